"""Input values for an imported model: from an ``.npz`` file, or seeded random ones.

``load_npz(path, result)``: arrays by graph input name (every input must be
there); ``random_inputs(result, seed)``: values for inputs with static
shapes (floats in [-1, 1), integers in [0, 4), booleans), for a quick look
when the user has no data. ``reference_outputs`` runs ONNX Runtime (CPU, one
thread) on the same file for the expected values.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .api import OnnxImport
from .errors import OnnxImportError


def load_npz(path: str | Path, result: OnnxImport) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as data:
            values = {k: np.asarray(data[k]) for k in data.files}
    except (OSError, ValueError) as exc:
        raise OnnxImportError(f"{path}: cannot read inputs: {exc}") from None
    missing = [p.name for p in result.inputs if p.name not in values]
    if missing:
        raise OnnxImportError(f"{path}: no value for input(s) {missing} (has {sorted(values)})")
    feeds = {}
    for p in result.inputs:
        v = values[p.name]
        if p.shape is not None and len(p.shape) != v.ndim:
            raise OnnxImportError(
                f"{path}: input {p.name!r} has rank {v.ndim}, the model says {len(p.shape)}"
            )
        feeds[p.name] = v.astype(p.dtype)
    return feeds


def random_inputs(result: OnnxImport, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for p in result.inputs:
        if p.shape is None or any(d is None for d in p.shape):
            raise OnnxImportError(
                f"input {p.name!r} has shape {p.shape}: give values with --inputs FILE.npz"
            )
        dt = p.dtype
        if dt.kind == "f":
            v = rng.uniform(-1, 1, p.shape)
        elif dt.kind == "b":
            v = rng.integers(0, 2, p.shape).astype(bool)
        else:
            v = rng.integers(0, 4, p.shape)
        feeds[p.name] = np.asarray(v).astype(dt)
    return feeds


def ort_session(model_bytes: bytes):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # errors only: no shape-mismatch warnings on stderr
    return ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])


def reference_outputs(sess, result: OnnxImport, feeds: dict) -> list[np.ndarray]:
    """ONNX Runtime's outputs in the import's output order (ONNX dtypes)."""
    names = [p.name for p in result.outputs]
    return list(sess.run(names, feeds))
