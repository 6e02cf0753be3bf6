"""ONNX's own backend node tests, run through the importer and the nnhal executor.

Every relevant test shipped with ``onnx`` (control flow: test_loop*, test_if*,
test_scan*, test_range_*_expanded; and every operator the importer maps)
runs from its stored inputs and must match its stored outputs. A test may
instead be reported unsupported only if onnx_node_expected.json lists it
(regenerate with ``python tests/importers/onnx/onnx_node_table.py
--expected``); a wrong result never passes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

onnx = pytest.importorskip("onnx")

from nnhal.importers.onnx.node_tests import CONTROL, cases, data_root, operator_of, run_case
from onnx_exec_helper import execute

EXPECTED = json.loads((Path(__file__).parent / "onnx_node_expected.json").read_text())


def _params():
    out = []
    for name, op, d in cases():
        marks = [] if name.startswith(CONTROL) else [pytest.mark.slow]
        out.append(pytest.param(name, op, d, id=name, marks=marks))
    return out


def test_node_test_data_is_shipped():
    assert data_root() is not None, (
        f"onnx {onnx.__version__} ships no backend node test data; install onnx<1.22 "
        "(pip install 'nnhal[onnx]')"
    )
    names = {name for name, _, _ in cases()}
    for needed in ("test_loop11", "test_if", "test_scan9_sum",
                   "test_range_float_type_positive_delta_expanded"):  # fmt: skip
        assert needed in names


@pytest.mark.parametrize(("name", "op"), [
    ("test_greater_equal_bcast", "GreaterOrEqual"),  # not Greater, a shorter prefix
    ("test_greater_bcast", "Greater"),
    ("test_less_equal", "LessOrEqual"),
    ("test_edge_pad", "Pad"),  # Pad's tests are named by mode
    ("test_basic_conv_with_padding", "Conv"),
    ("test_gather_elements_0", None),  # GatherElements is not mapped: not Gather's test
    ("test_gather_0", "Gather"),
    ("test_maxpool_2d_default", "MaxPool"),
    ("test_reduce_sum_square_default_axes_keepdims_example", "ReduceSumSquare"),
])  # fmt: skip
def test_each_node_test_counts_under_its_operator(name, op):
    from nnhal.importers.onnx.registry import table

    assert operator_of(name, sorted(table())) == op


@pytest.mark.parametrize(("name", "op", "directory"), _params())
def test_backend_node(name, op, directory):
    outcome = run_case(name, op, directory, execute)
    if outcome.status == "passed":
        return
    if name in WRAPPED:  # checked against the saturated values below
        assert outcome.status == "failed" and "values differ" in outcome.detail
        return
    assert outcome.status == "unsupported", f"{name}: {outcome.detail}"
    assert name in EXPECTED, f"{name} newly unsupported: {outcome.detail}"
    assert outcome.reasons and all(r.strip() for r in outcome.reasons)


def test_control_flow_node_tests_pass():
    """The control-flow cases that NNAPI can express all pass (the rest are listed)."""
    passed = [n for n, op, d in cases() if n.startswith(CONTROL)
              and run_case(n, op, d, execute).status == "passed"]  # fmt: skip
    for name in ("test_if", "test_scan9_sum", "test_range_float_type_positive_delta_expanded",
                 "test_range_int32_type_negative_delta_expanded"):  # fmt: skip
        assert name in passed


#: tests whose stored outputs wrap around where the ONNX spec (and NNAPI) saturate
WRAPPED = (
    "test_qlinearmatmul_2D_int8_float16",
    "test_qlinearmatmul_2D_int8_float32",
    "test_qlinearmatmul_3D_int8_float16",
    "test_qlinearmatmul_3D_int8_float32",
)


@pytest.mark.parametrize("name", WRAPPED)
def test_qlinearmatmul_int8_saturates_where_stored_output_wraps(name):
    """Our output is the saturated one; the stored one is it modulo 256."""
    import numpy as np
    from nnhal.importers.onnx import import_onnx
    from nnhal.importers.onnx.node_tests import load_data_set

    d = data_root() / name
    ins, outs = load_data_set(d / "test_data_set_0")
    a, a_s, a_z, b, b_s, b_z, y_s, y_z = ins
    names = ["a", "a_scale", "a_zero_point", "b", "b_scale", "b_zero_point", "y_scale",
             "y_zero_point"]  # fmt: skip
    result = import_onnx(d / "model.onnx", constants=dict(zip(names[1:], ins[1:])))
    assert result.ok
    got = result.onnx_outputs(execute(result.model, result.nnapi_inputs({"a": a})))["y"]
    acc = (a.astype(np.int64) - a_z) @ (b.astype(np.int64) - b_z)
    exact = np.round(acc * (a_s.astype(np.float64) * b_s / y_s)) + y_z
    np.testing.assert_array_equal(got, np.clip(exact, -128, 127).astype(np.int8))
    wrapped = ((exact.astype(np.int64) + 128) % 256 - 128).astype(np.int8)
    # the stored values: wrapped (within one step: the float16 variants rescale in float16)
    step = (outs[0].astype(np.int64) - wrapped.astype(np.int64)) % 256
    assert np.isin(step, (0, 1, 255)).all(), (outs[0], wrapped)
    assert (got != outs[0]).any()
