"""Comparing outputs with the vector README's tolerance table.

| output type | atol | rtol |
|---|---|---|
| TENSOR_FLOAT32 | 1e-5 | 5 * 2^-23 (5 ULP of fp32) |
| TENSOR_FLOAT32 in a relaxed model, or one with any TENSOR_FLOAT16 operand | 5 * 2^-10 | 5 * 2^-10 |
| TENSOR_FLOAT16 | 5 * 2^-10 | 5 * 2^-10 |
| TENSOR_INT32, INT32, TENSOR_QUANT16_ASYMM, TENSOR_QUANT16_SYMM | 1 | 0 |
| TENSOR_QUANT8_ASYMM(_SIGNED), TENSOR_QUANT8_SYMM | 1 (3 if the name has "mobilenet") | 0 |
| TENSOR_BOOL8 | exact | |

An element passes when ``|actual - expected| <= atol + rtol * |expected|``,
computed in double precision; NaN and Inf never pass. RANDOM_MULTINOMIAL
outputs are checked statistically instead (``check_multinomial``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from nnhal.types import Model, OperandType, type_name

__all__ = ["check_multinomial", "compare", "tolerance"]

_FP16_TOL = (5 * 2.0**-10, 5 * 2.0**-10)
_FP32_TOL = (1e-5, 5 * 2.0**-23)
_INT_TYPES = {
    OperandType.TENSOR_INT32,
    OperandType.INT32,
    OperandType.UINT32,
    OperandType.TENSOR_QUANT16_ASYMM,
    OperandType.TENSOR_QUANT16_SYMM,
}
_QUANT8_TYPES = {
    OperandType.TENSOR_QUANT8_ASYMM,
    OperandType.TENSOR_QUANT8_ASYMM_SIGNED,
    OperandType.TENSOR_QUANT8_SYMM,
    OperandType.TENSOR_QUANT8_SYMM_PER_CHANNEL,
}


def _has_fp16(model: Model) -> bool:
    fp16 = (OperandType.TENSOR_FLOAT16, OperandType.FLOAT16)
    return any(o.type in fp16 for sg in (model.main, *model.referenced) for o in sg.operands)


def tolerance(operand_type: int, model: Model | None, name: str = "") -> tuple[float, float] | None:
    """``(atol, rtol)`` for an output of this type, or None when it must match exactly.

    A scalar type is treated like its tensor twin.
    """
    if operand_type in (OperandType.TENSOR_FLOAT32, OperandType.FLOAT32):
        relaxed = model is not None and (model.relaxComputationFloat32toFloat16 or _has_fp16(model))
        return _FP16_TOL if relaxed else _FP32_TOL
    if operand_type in (OperandType.TENSOR_FLOAT16, OperandType.FLOAT16):
        return _FP16_TOL
    if operand_type in _INT_TYPES:
        return (1.0, 0.0)
    if operand_type in _QUANT8_TYPES:
        return (3.0 if "mobilenet" in name else 1.0, 0.0)
    return None  # TENSOR_BOOL8, BOOL, extension types: exact


def compare(
    expected: np.ndarray,
    actual: np.ndarray,
    operand_type: int,
    model: Any,
    *,
    name: str | None = None,
    output_index: int | None = None,
) -> tuple[bool, float, str]:
    """Element-wise check ``|actual - expected| <= atol + rtol * |expected|`` (float64).

    ``model`` gives the context of the tolerance: a TestModel (its Model and
    name) or a Model (pass ``name`` for the "mobilenet" rule). Returns
    ``(ok, worst_error, message)`` where ``worst_error`` is the largest
    absolute difference (inf for a NaN/Inf or a shape mismatch).
    NaN and Inf never pass, in the expected or the actual values.
    """
    if model is not None and not isinstance(model, Model):  # a TestModel
        name = model.name if name is None else name
        model = model.model
    label = f"output {output_index} " if output_index is not None else "output "
    label += f"({type_name(operand_type)})"
    exp = np.asarray(expected)
    act = np.asarray(actual)
    if exp.shape != act.shape:
        if exp.size == act.size and operand_type in (
            OperandType.FLOAT32,
            OperandType.INT32,
            OperandType.UINT32,
            OperandType.FLOAT16,
            OperandType.BOOL,
        ):
            act = act.reshape(exp.shape)  # scalar outputs: () vs [1] is not a difference
        else:
            return (
                False,
                math.inf,
                f"{label}: shape {list(act.shape)} differs from the expected {list(exp.shape)}",
            )
    tol = tolerance(operand_type, model, name or "")
    if tol is None:
        if exp.dtype.kind == "b" or act.dtype.kind == "b":
            bad = exp.astype(np.bool_) != act.astype(np.bool_)
        elif exp.dtype.kind in "iu" and exp.dtype == act.dtype:
            # in their own type: float64 cannot tell n from n + 1 beyond 2**53 (int64,
            # uint64 outputs of extension operand types)
            bad = exp != act
        else:
            bad = exp.astype(np.float64) != act.astype(np.float64)
        diff = bad.astype(np.float64)
        rule = "exact"
    else:
        atol, rtol = tol
        e = exp.astype(np.float64)
        a = act.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            diff = np.abs(a - e)
            finite = np.isfinite(e) & np.isfinite(a)
            diff = np.where(finite, diff, np.inf)
            bad = ~(diff <= atol + rtol * np.abs(e)) | ~finite
        rule = f"atol {atol:g}, rtol {rtol:g}"
    worst = float(diff.max()) if diff.size else 0.0
    nbad = int(np.count_nonzero(bad))
    if nbad == 0:
        return True, worst, f"{label}: {exp.size} elements within {rule}"
    # report the worst offending element (NaN/Inf count as infinitely wrong)
    flat_bad = np.flatnonzero(bad.reshape(-1))
    k = int(flat_bad[np.argmax(diff.reshape(-1)[flat_bad])])
    pos = list(np.unravel_index(k, exp.shape)) if exp.shape else []
    pos = [int(p) for p in pos]
    e_k = exp.reshape(-1)[k].item()
    a_k = act.reshape(-1)[k].item()
    return (
        False,
        worst,
        (
            f"{label}: {nbad} of {exp.size} elements outside {rule}; worst at {pos}: "
            f"expected {e_k!r}, got {a_k!r}"
        ),
    )


def check_multinomial(
    logits: np.ndarray, samples: np.ndarray, tol: float
) -> tuple[bool, float, str]:
    """RANDOM_MULTINOMIAL: class frequencies within ``tol`` of softmax(logits).

    ``logits`` is [batches, classes]; ``samples`` is [batches, samples] of class indexes.
    """
    lg = np.asarray(logits, dtype=np.float64)
    sm = np.asarray(samples)
    if lg.ndim != 2 or sm.ndim != 2 or lg.shape[0] != sm.shape[0]:
        return False, math.inf, f"shapes {list(lg.shape)} / {list(sm.shape)} do not fit"
    worst = 0.0
    for b in range(lg.shape[0]):
        p = np.exp(lg[b] - lg[b].max())
        p /= p.sum()
        counts = np.bincount(sm[b].astype(np.int64).clip(0), minlength=lg.shape[1])
        if counts.size > lg.shape[1] or (sm[b] < 0).any():
            return False, math.inf, f"batch {b}: a sample is not a class index"
        freq = counts / max(sm.shape[1], 1)
        err = float(np.abs(freq - p).max())
        worst = max(worst, err)
    ok = worst <= tol
    return ok, worst, f"largest frequency error {worst:.4g} ({'within' if ok else 'outside'} {tol})"
