"""Nodes without an NNAPI mapping run by ONNX Runtime on the host, through nnhal.runtime.

Each model mixes mapped nodes with one the importer cannot map (GatherElements), in the
main graph or inside a Loop body; the imported model runs through the runtime (host steps
between NNAPI steps) and must agree with ONNX Runtime on the whole ONNX file.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from nnhal.importers.onnx import import_onnx
from nnhal.runtime.api import run_model
from nnhal.runtime.host import HOST_NAME
from onnx import TensorProto as TP
from onnx import helper, numpy_helper


def _vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def _model(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def _main_graph_model():
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("GatherElements", ["r", "idx"], ["g"], axis=1, name="pick"),
        helper.make_node("Add", ["g", "b"], ["y"]),
    ]
    b = numpy_helper.from_array(np.array([[0.5, 1.0], [2.0, -1.0]], np.float32), "b")
    return _model(nodes, [_vi("x", TP.FLOAT, [2, 3]), _vi("idx", TP.INT64, [2, 2])],
                  [_vi("y", TP.FLOAT, [2, 2])], [b])  # fmt: skip


def _loop_model():
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Add", ["s_in", "x"], ["t"]),
            helper.make_node("GatherElements", ["t", "idx"], ["s_out"], axis=1, name="inner_pick"),
        ],
        "body",
        [_vi("i", TP.INT64, []), _vi("cond_in", TP.BOOL, []), _vi("s_in", TP.FLOAT, [2, 3])],
        [_vi("cond_out", TP.BOOL, []), _vi("s_out", TP.FLOAT, [2, 3])],
    )
    loop = helper.make_node("Loop", ["M", "", "s0"], ["s"], body=body, name="the_loop")
    ins = [_vi("M", TP.INT64, []), _vi("s0", TP.FLOAT, [2, 3]), _vi("x", TP.FLOAT, [2, 3]),
           _vi("idx", TP.INT64, [2, 3])]  # fmt: skip
    return _model([loop], ins, [_vi("s", TP.FLOAT, [2, 3])])


def _agree(m, feeds):
    result = import_onnx(m.SerializeToString(), host=True)
    assert result.ok and not result.unsupported
    out, execution = run_model(result.model, result.nnapi_inputs(feeds))
    got = result.onnx_outputs(out)
    ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    want = dict(zip([o.name for o in ref.get_outputs()], ref.run(None, feeds)))
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-6, atol=1e-6)
    return result, execution


def test_main_graph_node_runs_on_the_host():
    feeds = {"x": np.array([[1, -2, 3], [-4, 5, 6]], np.float32),
             "idx": np.array([[0, 2], [1, 0]], np.int64)}  # fmt: skip
    result, execution = _agree(_main_graph_model(), feeds)
    assert [(u.node, u.op_type, u.reason) for u in result.host] == [
        ("pick", "GatherElements", "no NNAPI mapping for this operator")
    ]
    devices = [s.device for s in execution.report.steps]
    assert devices == ["nnapi-reference", HOST_NAME, "nnapi-reference"]


def test_without_host_the_node_is_refused():
    result = import_onnx(_main_graph_model().SerializeToString())
    assert not result.ok and result.host == []
    assert result.unsupported[0].node == "pick"


@pytest.mark.parametrize("trips", [0, 1, 4])
def test_node_inside_a_loop_body_runs_on_the_host(trips):
    rng = np.random.default_rng(trips)
    feeds = {"M": np.array(trips, np.int64), "s0": rng.standard_normal((2, 3), np.float32),
             "x": rng.standard_normal((2, 3), np.float32),
             "idx": np.array([[2, 0, 1], [1, 1, 0]], np.int64)}  # fmt: skip
    result, execution = _agree(_loop_model(), feeds)
    assert [(u.node, u.graph) for u in result.host] == [("inner_pick", "main/the_loop.body")]
    host_runs = [s for s in execution.report.steps if s.device == HOST_NAME]
    assert len(host_runs) == trips


def test_a_value_nnapi_cannot_hold_keeps_the_node_unsupported():
    # the unmapped node's output is a double: it cannot cross to the NNAPI side
    nodes = [
        helper.make_node("Cast", ["x"], ["d"], to=TP.DOUBLE, name="to_double"),
        helper.make_node("Cast", ["d"], ["y"], to=TP.FLOAT),
    ]
    m = _model(nodes, [_vi("x", TP.FLOAT, [2])], [_vi("y", TP.FLOAT, [2])])
    result = import_onnx(m.SerializeToString(), host=True)
    assert not result.ok
    first = result.unsupported[0]
    assert first.node == "to_double"
    assert "and not on the host" in first.reason and "DOUBLE" in first.reason


@pytest.mark.slow
def test_cli_writes_the_model_and_runtime_runs_it(tmp_path):
    src = tmp_path / "ge.onnx"
    onnx.save(_main_graph_model(), src)
    np.savez(tmp_path / "ge.npz", x=np.array([[1, -2, 3], [-4, 5, 6]], np.float32),
             idx=np.array([[0, 2], [1, 0]], np.int64))  # fmt: skip
    out = tmp_path / "ge.json"

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "nnhal", *args], capture_output=True,
                              text=True, timeout=300, check=False)  # fmt: skip

    r = cli("import", str(src), "--onnx-inputs", str(tmp_path / "ge.npz"), "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert "run by ONNX Runtime on the host" in r.stdout and "pick (GatherElements)" in r.stdout
    r = cli("vectors", str(out), "--runtime", "--no-progress")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 passed, 0 failed" in r.stdout
    r = cli("plan", str(out), "--json")
    doc = json.loads(r.stdout)
    host_ops = [o for o in doc["operations"] if o["device"] == HOST_NAME]
    assert [o["why"] for o in host_ops] == [
        "ONNX Runtime: GatherElements node 'pick': no NNAPI mapping for this operator"
    ]
    r = cli("import", str(src), "--onnx-no-host", "-o", str(tmp_path / "x.json"))
    assert r.returncode == 1 and not (tmp_path / "x.json").exists()
