"""TFLite test models: imported as the NNAPI delegate would, run in nnhal, compared with TFLite.

References: the outputs TFLite's interpreter gave at model creation (stored .npz),
and LiteRT itself when ``ai_edge_litert`` is installed (the ``tflite`` extra).
"""

from __future__ import annotations

import numpy as np
import pytest
from nnhal.importers.tflite import import_tflite
from tflite_cases import MODELS, assert_matches, model_path, reference


@pytest.fixture(scope="module")
def compiled():
    from nnhal.driver.executor import compile_model

    cache = {}

    def get(name):
        if name not in cache:
            result = import_tflite(model_path(name))
            assert result.complete, [s.line() for s in result.skipped]
            cache[name] = (result, compile_model(result.partitions[0].model))
        return cache[name]

    return get


WHOLE = [name for name, whole in MODELS.items() if whole]


@pytest.mark.parametrize("name", WHOLE)
def test_whole_model_matches_tflite_interpreter(name, compiled):
    _, model = compiled(name)
    ins, want = reference(name)
    got = model.run([np.atleast_1d(x) for x in ins])
    assert len(got) == len(want)
    for k, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype, f"output {k}: {g.dtype} vs {w.dtype}"
        assert_matches(g, w, f"{name} output {k}")


@pytest.mark.parametrize("name", WHOLE)
def test_whole_model_matches_litert(name, compiled):
    litert = pytest.importorskip("ai_edge_litert.interpreter", exc_type=ImportError)
    _, model = compiled(name)
    ins, _ = reference(name)
    interp = litert.Interpreter(model_path=str(model_path(name)), num_threads=1)
    interp.allocate_tensors()
    for d, x in zip(interp.get_input_details(), ins):
        interp.set_tensor(d["index"], x)
    interp.invoke()
    want = [interp.get_tensor(d["index"]) for d in interp.get_output_details()]
    for k, (g, w) in enumerate(zip(model.run([np.atleast_1d(x) for x in ins]), want)):
        assert_matches(g, w, f"{name} output {k} vs LiteRT")


def test_float16_weights_are_folded():
    result = import_tflite(model_path("cnn_float16"))
    sg = result.tflite.subgraphs[0]
    dequant = [op.index for op in sg.operators if op.name == "DEQUANTIZE"]
    assert dequant and result.folded == dequant
    ops = result.partitions[0].model.main.operations
    assert len(ops) == result.nodes - len(dequant)  # no DEQUANTIZE left in the NNAPI model
    from nnhal.types import OperandType

    types = {o.type for o in result.partitions[0].model.main.operands}
    assert OperandType.TENSOR_FLOAT16 not in types


def test_int8_model_uses_signed_and_per_channel_types():
    from nnhal.types import OperandType as T

    model = import_tflite(model_path("cnn_int8")).partitions[0].model
    types = {o.type for o in model.main.operands}
    assert T.TENSOR_QUANT8_ASYMM_SIGNED in types
    assert T.TENSOR_QUANT8_SYMM_PER_CHANNEL in types  # conv filters, per output channel
    conv = [op for op in model.main.operations if op.type == 3]  # CONV_2D
    filt = model.main.operands[conv[0].inputs[1]]
    assert filt.extraParams.channelDim == 0


def test_while_becomes_nnapi_while():
    from nnhal.types import OperationType

    model = import_tflite(model_path("while_loop")).partitions[0].model
    assert [op.type for op in model.main.operations] == [OperationType.WHILE]
    assert len(model.referenced) == 2  # condition and body


def test_if_becomes_nnapi_if_and_runs_either_branch(compiled):
    from nnhal.types import OperationType

    result, model = compiled("if_else")
    nnapi = result.partitions[0].model
    assert [op.type for op in nnapi.main.operations] == [OperationType.IF]
    assert len(nnapi.referenced) == 2  # then and else
    (cond, x), (want,) = reference("if_else")
    else_want = np.load(model_path("if_else").with_suffix(".npz"))["else_output_0"]
    assert not np.allclose(want, else_want)  # the branches differ: the condition is obeyed
    assert_matches(model.run([cond, x])[0], want, "if_else, condition true")
    assert_matches(model.run([~cond, x])[0], else_want, "if_else, condition false")


def test_unsupported_node_is_listed_with_reason_and_graph_partitioned():
    result = import_tflite(model_path("lstm_while"))
    assert not result.complete
    (skip,) = result.skipped
    assert skip.op == "WHILE"
    assert "GATHER" in skip.reason and "0-dimension" in skip.reason
    # the nodes around it are still delegated, as two partitions
    assert [p.nodes for p in result.partitions] == [[0], [2, 3]]
    assert result.delegated == result.nodes - 1


def test_partition_runs_on_its_own():
    """The partition after the CPU node takes the CPU node's output as a model input."""
    from nnhal.driver.executor import compile_model

    result = import_tflite(model_path("lstm_while"))
    part = result.partitions[1]
    sg = result.tflite.subgraphs[0]
    assert all(t in sg.operators[1].outputs for t in part.inputs)
    feeds = [np.zeros(sg.tensors[t].shape, np.float32) for t in part.inputs]
    outs = compile_model(part.model).run(feeds)
    assert [o.shape for o in outs] == [tuple(sg.tensors[t].shape) for t in part.outputs]


def test_keras2_lstm_is_one_nnapi_sequence_lstm():
    from nnhal.types import OperationType

    model = import_tflite(model_path("lstm")).partitions[0].model
    kinds = [OperationType(op.type).name for op in model.main.operations]
    assert kinds[0] == "UNIDIRECTIONAL_SEQUENCE_LSTM"
    lstm = model.main.operations[0]
    assert len(lstm.inputs) == 28  # 20 tensors, activation, clips, time_major, 4 layer norms


SOFT_CLIP = {"SoftClip": ("com.example.soft_clip_package", 0)}


def test_custom_operator_is_listed_without_a_mapping():
    result = import_tflite(model_path("custom_op"))
    (skip,) = result.skipped
    assert skip.op == "CUSTOM 'SoftClip'" and "--custom-op" in skip.reason
    assert [p.nodes for p in result.partitions] == [[0]]


def _soft_clip_params():
    """SoftClip's parameters as the example op package defines them (limit, FLOAT_32)."""
    from nnhal.driver.op_packages.discovery import load_path
    from nnhal.importers.tflite import CustomParam
    from repo_paths import REPO_ROOT

    (pkg,) = load_path(REPO_ROOT / "examples" / "qnn_xml" / "soft_clip.xml")
    op = pkg.spec.op("SoftClip")
    params = [CustomParam(t.name, t.datatypes, t.scalar, t.mandatory, t.default) for t in op.params]
    return pkg, params


def _run_soft_clip(model, pkg):
    from nnhal.driver.device import Device
    from nnhal.driver.service import create_server

    from nnhal.client import connect

    server, address = create_server(Device(op_packages=[pkg]), "127.0.0.1:0")
    try:
        client = connect(address, timeout=10.0)
        try:
            assert client.getSupportedOperations_1_3(model) == [True, True]
            ins, _ = reference("custom_op")
            prepared = client.prepareModel_1_3(model)
            got = prepared.execute(ins).outputs
            prepared.release()
        finally:
            client.close()
    finally:
        server.stop(None)
    return got


def test_custom_operator_runs_in_the_op_package_with_its_options():
    """Mapped to the example QNN op package's SoftClip, its custom options {"limit": 2.0}
    passed as the operation's limit parameter, served by a device over gRPC."""
    pkg, params = _soft_clip_params()
    ext, number = SOFT_CLIP["SoftClip"]
    result = import_tflite(model_path("custom_op"), {"SoftClip": (ext, number, params)})
    assert result.complete and not result.notes
    model = result.partitions[0].model
    assert [e.name for e in model.extensionNameToPrefix] == ["com.example.soft_clip_package"]
    soft_clip = model.main.operations[1]
    assert len(soft_clip.inputs) == 2  # x, then the limit parameter
    got = _run_soft_clip(model, pkg)
    _, want = reference("custom_op")
    assert_matches(got[0], want[0], "custom_op (limit 2 from its options) vs TensorFlow")


def test_custom_operator_without_a_definition_keeps_the_defaults_with_a_note():
    pkg, _ = _soft_clip_params()
    result = import_tflite(model_path("custom_op"), SOFT_CLIP)
    assert result.complete
    (note,) = result.notes
    assert "custom options not passed" in note and "SoftClip" in note
    got = _run_soft_clip(result.partitions[0].model, pkg)
    _, want = reference("custom_op")  # made with limit 2: the default limit 1 differs
    assert not np.allclose(got[0].reshape(want[0].shape), want[0], rtol=1e-4)


def test_bad_custom_op_mapping():
    from nnhal.importers.tflite import parse_custom_op

    assert parse_custom_op("A=x.y:3") == ("A", ("x.y", 3))
    for bad in ("A", "A=x", "=x:1", "A=x:one", "A=:1", "A=x:70000"):
        with pytest.raises(ValueError, match="NAME=EXTENSION:OPERATION"):
            parse_custom_op(bad)


class ExecutorPrepared:
    """nnhal's executor, shaped like a prepared model (for the CPU-fallback runner)."""

    def __init__(self, partition):
        from nnhal.driver.executor import compile_model

        self.compiled = compile_model(partition.model)

    def execute(self, feeds, output_shapes=None):
        return type("Result", (), {"outputs": self.compiled.run(feeds)})

    def release(self):
        pass


@pytest.mark.parametrize(
    ("name", "kinds"),
    [
        ("lstm_while", ["nnapi", "litert", "nnapi"]),  # the refused WHILE on LiteRT
        ("cnn_dynamic_range", ["nnapi", "litert", "litert", "nnapi"]),  # FULLY_CONNECTED v12
    ],
)
def test_cpu_fallback_matches_tflite_interpreter(name, kinds):
    """Partitions on nnhal's executor, refused nodes as single-operator LiteRT models."""
    pytest.importorskip("ai_edge_litert", exc_type=ImportError)
    from nnhal.importers.tflite.fallback import TfliteRunner

    path = model_path(name)
    runner = TfliteRunner(import_tflite(path), ExecutorPrepared, path.read_bytes())
    assert [s.kind for s in runner.steps] == kinds
    ins, want = reference(name)
    (got,) = runner.run(ins)
    assert_matches(got, want[0], f"{name} with CPU nodes on LiteRT")


def test_dynamic_range_model_partitions_around_the_refused_layers():
    result = import_tflite(model_path("cnn_dynamic_range"))
    assert [s.op for s in result.skipped] == ["FULLY_CONNECTED", "FULLY_CONNECTED"]
    assert all("version 12 is higher than 5" in s.reason for s in result.skipped)
    assert len(result.partitions) == 2 and result.delegated == result.nodes - 2
