"""Input values from ``.npz`` files (``nnhal run --inputs``, ``nnhal tflite --inputs``),
checked against what they are for.

- ``load_npz``: the arrays of a file written by ``np.savez``; a file that is not
  one (a text file, a lone ``.npy``) is one clear line, not numpy's message
  about pickles;
- ``fit_array``: a value converted to an element type only when every element
  fits it: a float too large for float32/float16 (it would become infinity), an
  integer out of range, a fraction for an integer or quantized type, a boolean
  that is not 0/1 are errors naming the input, never a numpy warning and NaN
  outputs; NaN and infinities in a float value stay (they are float values);
- ``fit_operand``: ``fit_array`` for an operand of a model, plus its rank and
  the dimensions it fixes (0 = any).

Errors are ``ValueError`` with the input's label first; the commands make them
one line, exit 1 (a data error).
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Sequence
from typing import Any

import numpy as np


def load_npz(path: str | os.PathLike[str]) -> dict[str, np.ndarray]:
    """Every array of an ``.npz`` file; ValueError (one line) when it is not one."""
    name = os.fspath(path)
    if not zipfile.is_zipfile(name):  # numpy would try it as a pickle, and say so
        raise ValueError(
            f"{name}: not an .npz file (np.savez writes one: a zip archive of .npy arrays)"
        )
    try:
        with np.load(name, allow_pickle=False) as npz:
            return {k: np.asarray(npz[k]) for k in npz.files}
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise ValueError(f"{name}: not a readable .npz file: {exc}") from None


def fit_array(value: Any, dtype: np.dtype, label: str, type_label: str | None = None) -> np.ndarray:
    """``value`` as ``dtype`` when every element fits; else ValueError naming ``label``."""
    dtype = np.dtype(dtype)
    what = type_label or dtype.name
    src = np.asarray(value)
    if src.dtype.kind not in "biuf":
        raise ValueError(f"{label}: {src.dtype} values cannot be {what} (numbers are needed)")
    if dtype.kind == "b":
        if src.dtype.kind != "b" and not np.isin(src, (0, 1)).all():
            raise ValueError(f"{label}: {what} takes only 0/1 (or booleans)")
        return src.astype(np.bool_)
    if dtype.kind == "f":
        if src.dtype.kind == "f" and src.size:
            finite = src[np.isfinite(src)]
            limit = float(np.finfo(dtype).max)
            if finite.size and float(np.abs(finite).max()) > limit:
                worst = finite.flat[int(np.abs(finite).argmax())]
                raise ValueError(
                    f"{label}: value {float(worst):g} does not fit {what} "
                    f"(largest magnitude {limit:g})"
                )
        elif src.dtype.kind in "iu" and src.size:
            # integers above float16's range would become infinity too
            limit = float(np.finfo(dtype).max)
            if float(np.abs(src.astype(np.float64)).max()) > limit:
                raise ValueError(f"{label}: values beyond {limit:g} do not fit {what}")
        return src.astype(dtype)
    # integer element types (quantized ones included)
    if src.dtype.kind == "f":
        if not np.isfinite(src).all():
            raise ValueError(f"{label}: {what} takes integers; the value holds NaN or infinity")
        if (src != np.round(src)).any():
            raise ValueError(f"{label}: {what} takes integers; the value has fractions")
    if src.size:
        info = np.iinfo(dtype)
        lo, hi = src.min(), src.max()
        if lo < info.min or hi > info.max:
            raise ValueError(
                f"{label}: values {lo}..{hi} do not fit {what} (range {info.min}..{info.max})"
            )
    return src.astype(dtype)


def fit_operand(value: Any, operand_type: int, dimensions: Sequence[int], label: str) -> np.ndarray:
    """``fit_array`` for an operand: its type's element type, its rank, its fixed sizes."""
    from nnhal.types import OPERAND_TYPE_INFO, is_tensor_type, type_name

    name = type_name(operand_type)
    info = OPERAND_TYPE_INFO.get(operand_type)
    if info is None or info.dtype is None:
        raise ValueError(f"{label}: {name} has no numpy element type")
    src = np.asarray(value)
    if not is_tensor_type(operand_type):
        if src.size != 1:
            raise ValueError(f"{label}: {name} is a scalar; the value has shape {list(src.shape)}")
    elif dimensions:  # rank known
        dims = list(dimensions)
        if src.ndim != len(dims):
            raise ValueError(
                f"{label}: the operand has rank {len(dims)} (dimensions {dims}); "
                f"the value has shape {list(src.shape)}"
            )
        bad = [k for k, (d, s) in enumerate(zip(dims, src.shape)) if d and d != s]
        if bad:
            raise ValueError(
                f"{label}: the operand's dimensions are {dims} (0 = any); "
                f"the value has shape {list(src.shape)} (axis {bad[0]} differs)"
            )
    return fit_array(src, info.dtype, label, name)
