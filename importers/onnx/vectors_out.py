"""An import as a model file in the test-vector JSON format (``nnhal.vectors``).

The file holds the NNAPI model and, when values are given, the inputs and
the expected outputs (NNAPI form: int64 as int32, rank 0 as [1]) so
``nnhal run``, ``nnhal bench --model`` and the vector runner use it as is.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from nnhal.vectors import model_to_json, save_vectors

from . import types_map as tm
from .api import OnnxImport


def nnapi_outputs(result: OnnxImport, values: list[np.ndarray]) -> list[np.ndarray]:
    """ONNX output values as the NNAPI model's outputs hold them."""
    out = []
    for port, v in zip(result.outputs, values):
        v = np.asarray(v)
        if port.elem in (tm.UINT8, tm.INT8):
            out.append(v.reshape(v.shape or (1,)))
        else:
            out.append(tm.to_nnapi_value(v, tm.nnapi_type(port.elem), f"output {port.name!r}"))
    return out


def write(
    result: OnnxImport,
    path: str | Path,
    name: str,
    feeds: dict | None = None,
    expected: list[np.ndarray] | None = None,
) -> None:
    assert result.model is not None
    inputs = result.nnapi_inputs(feeds) if feeds is not None else None
    exp = nnapi_outputs(result, expected) if expected is not None else None
    doc = model_to_json(result.model, name=name, inputs=inputs, expected=exp,
                        spec="onnx", minSupportedVersion="V1_3")  # fmt: skip
    save_vectors(path, [doc])
