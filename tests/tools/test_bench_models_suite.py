"""``nnhal bench --suite models``: the networks build as valid NNAPI models that compute
what the same ONNX networks compute in onnxruntime (optional extra ``bench``)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from nnhal.driver.executor import compile_model
from nnhal.tools import bench_models

from nnhal.validation import validate_model


def test_lstm_case_agrees_with_onnxruntime():
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    case = bench_models.lstm_100(steps=6, inp=8, units=16)
    validate_model(case.model)
    ours = compile_model(case.model).run(case.inputs)[0]
    theirs = case.back(ort.InferenceSession(case.onnx).run(None, case.feed))[0]
    assert ours.shape == theirs.shape == (6, 1, 16)
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mobilenet-f32", "mobilenet-q8", "resnet18-f32"])
def test_conv_net_cases_agree_with_onnxruntime(name):
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    case = bench_models.CASES[name]()
    validate_model(case.model)
    ours = compile_model(case.model).run(case.inputs)[0]
    theirs = case.back(ort.InferenceSession(case.onnx).run(None, case.feed))[0]
    assert ours.shape == theirs.shape
    if case.exact:
        # onnxruntime requantizes in float, NNAPI in fixed point: values near a rounding
        # boundary land one step apart, and that carries through 27 layers
        diff = np.abs(ours.astype(np.int32) - theirs.astype(np.int32))
        assert diff.max() <= 2 and np.mean(diff) < 0.5
        assert len(np.unique(ours)) > 20  # not a saturated or all-zero feature map
    else:
        np.testing.assert_allclose(ours, theirs, rtol=1e-3, atol=1e-4)
        assert np.std(ours) > 1e-3


def test_models_suite_refuses_an_unknown_workload():
    proc = subprocess.run(
        [sys.executable, "-m", "nnhal.tools.cli", "bench", "--suite", "models", "--workload", "x"],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "unknown models workload" in proc.stderr or "onnxruntime" in proc.stderr
    assert "Traceback" not in proc.stderr
