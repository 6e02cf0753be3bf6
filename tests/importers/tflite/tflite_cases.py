"""The committed TFLite test models and helpers to compare outputs (shared by the tests here)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from repo_paths import REPO_ROOT

DATA = REPO_ROOT / "examples" / "tflite"

#: model -> delegated whole by the importer (True) or partitioned around CPU nodes
MODELS = {
    "cnn_float16": True,
    "cnn_int8": True,
    "cnn_uint8": True,
    "cnn_dynamic_range": False,
    "while_loop": True,
    "lstm": True,
    "lstm_while": False,
    "sparse_cnn": True,
    "sparse_block_fc": True,
    "cnn_large_float16": True,
}


def model_path(name: str) -> Path:
    return DATA / f"{name}.tflite"


def reference(name: str) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Inputs and the outputs TFLite's interpreter computed when the model was made."""
    data = np.load(DATA / f"{name}.npz")
    ins = [data[k] for k in sorted(data.files) if k.startswith("input_")]
    outs = [data[k] for k in sorted(data.files) if k.startswith("output_")]
    return ins, outs


def assert_matches(got: np.ndarray, want: np.ndarray, what: str) -> None:
    """1e-4 relative (float; absolute floor 1e-6) or one quantization step (integers)."""
    got = np.asarray(got).reshape(want.shape)
    if np.issubdtype(want.dtype, np.floating):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6, err_msg=what)
    else:
        steps = np.abs(got.astype(np.int64) - want.astype(np.int64))
        assert steps.max(initial=0) <= 1, f"{what}: {steps.max()} quantization steps off"
