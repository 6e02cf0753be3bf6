"""The committed TFLite test models and helpers to compare outputs (shared by the tests here)."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any

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
    "cnn_uint8_deep": True,
    "if_else": True,
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


def npu_profile(name: str, keep_even: bool) -> dict[str, Any]:
    """A device faster than the CPU that takes every other NNAPI operation type (by code):
    two of them, one per parity, split most models between them and the CPU."""
    from nnhal.types import OperationType

    codes = sorted(int(o) for o in OperationType if o != OperationType.OEM_OPERATION)
    excluded = [OperationType(c).name for i, c in enumerate(codes) if (i % 2 == 1) == keep_even]
    return {
        "name": name,
        "type": "ACCELERATOR",
        "exclude_operations": excluded,
        "capabilities": {"default": {"execTime": 0.5, "powerUsage": 0.5}},
    }


@contextmanager
def served(*profiles: dict[str, Any]):
    """One server with a driver Device per profile; yields (address, runtime ClientDevices)."""
    from nnhal.driver.device import Device
    from nnhal.driver.profile import parse_profile
    from nnhal.driver.server import create_server
    from nnhal.runtime.devices import connect_target

    server, address = create_server([Device(parse_profile(p)) for p in profiles], "127.0.0.1:0")
    devices = []
    try:
        for p in profiles:
            devices.append(connect_target(f"{address}/{p['name']}"))
        yield address, devices
    finally:
        for d in devices:
            d.device.close()
        server.stop(None)
