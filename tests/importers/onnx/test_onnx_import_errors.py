"""Bad ONNX files: one clear line naming the file and the node or tensor; exit 1, no traceback."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from nnhal.importers.onnx import OnnxImportError, import_onnx
from onnx import TensorProto, helper, numpy_helper


def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "nnhal", "import", *args],
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip


def test_not_onnx(tmp_path):
    p = tmp_path / "x.onnx"
    p.write_bytes(b"\x00\x01 definitely not a protobuf \xff" * 3)
    with pytest.raises(OnnxImportError, match="not an ONNX model"):
        import_onnx(p)
    r = _cli(str(p))
    assert r.returncode == 1
    assert "not an ONNX model" in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_missing_file(tmp_path):
    with pytest.raises(OnnxImportError, match="cannot read"):
        import_onnx(tmp_path / "nope.onnx")


def test_opset_too_new(tmp_path):
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", TensorProto.FLOAT, [2])],
               [_vi("y", TensorProto.FLOAT, [2])], opset=17)  # fmt: skip
    m.opset_import[0].version = 99
    p = tmp_path / "new.onnx"
    p.write_bytes(m.SerializeToString())
    with pytest.raises(OnnxImportError, match="opset 99 is newer than the newest supported"):
        import_onnx(p)
    r = _cli(str(p))
    assert r.returncode == 1 and "opset 99" in r.stderr and "Traceback" not in r.stderr


def test_fails_checker_names_the_node(tmp_path):
    # Relu with two inputs: the checker rejects the node by name
    node = helper.make_node("Relu", ["x", "x"], ["y"], name="bad_relu")
    m = _model([node], [_vi("x", TensorProto.FLOAT, [2])], [_vi("y", TensorProto.FLOAT, [2])])
    p = tmp_path / "bad.onnx"
    p.write_bytes(m.SerializeToString())
    with pytest.raises(OnnxImportError, match="fails the ONNX checker.*bad_relu"):
        import_onnx(p)
    r = _cli(str(p))
    assert r.returncode == 1 and "bad_relu" in r.stderr and "Traceback" not in r.stderr


def test_unresolvable_dynamic_shape_names_the_node(tmp_path):
    # a Loop carrying a value whose shape is symbolic: HAL 1.3 WHILE operands must be static
    body = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["c_out"]),
         helper.make_node("Add", ["v", "v"], ["v_out"])],
        "body",
        [_vi("i", TensorProto.INT64, []), _vi("c", TensorProto.BOOL, []),
         _vi("v", TensorProto.FLOAT, ["n"])],
        [_vi("c_out", TensorProto.BOOL, []), _vi("v_out", TensorProto.FLOAT, ["n"])],
    )  # fmt: skip
    loop = helper.make_node("Loop", ["m", "", "x"], ["y"], body=body, name="the_loop")
    m = _model([loop], [_vi("m", TensorProto.INT64, []), _vi("x", TensorProto.FLOAT, ["n"])],
               [_vi("y", TensorProto.FLOAT, ["n"])])  # fmt: skip
    p = tmp_path / "dyn.onnx"
    p.write_bytes(m.SerializeToString())
    result = import_onnx(p)
    assert not result.ok
    assert [u.node for u in result.unsupported] == ["the_loop"]
    assert "not static" in result.unsupported[0].reason
    r = _cli(str(p), "--onnx-no-host", "-o", str(tmp_path / "dyn.json"))
    assert r.returncode == 1 and "the_loop (Loop)" in r.stdout and "--onnx-shape" in r.stdout
    assert not (tmp_path / "dyn.json").exists()
    # by default the Loop is left to ONNX Runtime on the host, with the same reason shown
    r = _cli(str(p), "-o", str(tmp_path / "host.json"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "run by ONNX Runtime on the host" in r.stdout and "the_loop (Loop)" in r.stdout
    assert "--onnx-shape" in r.stdout and (tmp_path / "host.json").exists()
    # with the shape given, it imports and the model file is written
    r = _cli(str(p), "--onnx-shape", "x=3", "-o", str(tmp_path / "dyn.json"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "dyn.json").exists()


def test_bad_shape_option(tmp_path):
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", TensorProto.FLOAT, ["n"])],
               [_vi("y", TensorProto.FLOAT, ["n"])])  # fmt: skip
    p = tmp_path / "m.onnx"
    p.write_bytes(m.SerializeToString())
    r = _cli(str(p), "--onnx-shape", "x=a,b")
    assert r.returncode == 2 and "--onnx-shape" in r.stderr
    with pytest.raises(OnnxImportError, match="no graph input 'zz'"):
        import_onnx(p, shapes={"zz": [1]})
    with pytest.raises(OnnxImportError, match="rank 1"):
        import_onnx(p, shapes={"x": [1, 2]})


def test_unmapped_operator_listed_with_reason(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="ok"),
             helper.make_node("Det", ["r"], ["y"], name="det_node")]  # fmt: skip
    m = _model(nodes, [_vi("x", TensorProto.FLOAT, [2, 2])], [_vi("y", TensorProto.FLOAT, [])])
    result = import_onnx(m)
    assert result.model is None
    (u,) = result.unsupported
    assert (u.node, u.op_type, u.inputs, u.outputs) == ("det_node", "Det", ["r"], ["y"])
    assert "no NNAPI mapping" in u.reason


def test_int64_constant_out_of_int32_range_is_reported():
    big = numpy_helper.from_array(np.array([2**40], np.int64), "big")
    nodes = [helper.make_node("Add", ["x", "big"], ["y"], name="add_big")]
    m = _model(nodes, [_vi("x", TensorProto.INT64, [1])], [_vi("y", TensorProto.INT64, [1])],
               [big])  # fmt: skip
    result = import_onnx(m)
    assert not result.ok and "do not fit NNAPI's int32" in result.unsupported[0].reason
