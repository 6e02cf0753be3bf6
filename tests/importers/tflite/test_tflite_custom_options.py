"""A custom operator's FlexBuffer options as an op-package operation's parameters."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from flatbuffers import flexbuffers
from nnhal.importers.tflite import CustomParam, import_tflite, read_model
from nnhal.importers.tflite.convert import convert
from tflite_cases import model_path

from nnhal.types import OperandType as T

EXT = "com.example.soft_clip_package"


def _with_options(options: bytes):
    model = read_model(model_path("custom_op"))
    sg = model.subgraphs[0]
    sg.operators[1] = dataclasses.replace(sg.operators[1], custom_options=options)
    return model


def _convert(options, params):
    return convert(_with_options(options), {"SoftClip": (EXT, 0, params)})


def _param_operands(result):
    model = result.partitions[0].model
    op = model.main.operations[-1]
    return [model.main.operands[i] for i in op.inputs[1:]], model


def test_options_become_typed_parameters_in_definition_order():
    params = [
        CustomParam("limit", ("FLOAT_32",)),
        CustomParam("steps", ("INT_32",)),
        CustomParam("table", ("FLOAT_32",), scalar=False),
        CustomParam("flag", ("BOOL_8",)),
    ]
    opts = flexbuffers.Dumps({"flag": True, "steps": 3, "Limit": 2, "table": [1.5, 2.5]})
    result = _convert(opts, params)
    assert not result.notes
    operands, _ = _param_operands(result)
    assert [o.type for o in operands] == [T.FLOAT32, T.INT32, T.TENSOR_FLOAT32, T.BOOL]
    assert list(operands[2].dimensions) == [2]


def test_trailing_optional_parameters_are_left_off_and_gaps_take_defaults():
    params = [CustomParam("a", ("INT_32",), default=7), CustomParam("b", ("INT_32",)),
              CustomParam("c", ("INT_32",))]  # fmt: skip
    operands, _ = _param_operands(_convert(flexbuffers.Dumps({"b": 1}), params))
    assert len(operands) == 2  # a (its default), b; c left off
    operands, _ = _param_operands(_convert(b"", params))
    assert operands == []


def test_mandatory_parameter_missing_refuses_the_node():
    result = _convert(flexbuffers.Dumps({"other": 1}), [CustomParam("limit", mandatory=True)])
    (skip,) = result.skipped
    assert "requires" in skip.reason and "'limit'" in skip.reason


def test_gap_without_default_refuses_the_node():
    params = [CustomParam("a", ("INT_32",)), CustomParam("b", ("INT_32",))]
    (skip,) = _convert(flexbuffers.Dumps({"b": 1}), params).skipped
    assert "no default" in skip.reason


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (b"\x01\x02\x03", "not a FlexBuffer map"),
        (flexbuffers.Dumps([1, 2]), "decode to list"),
        (flexbuffers.Dumps({"limit": [1.0, 2.0]}), "is a scalar"),
    ],
)
def test_bad_options_refuse_the_node_with_a_reason(options, message):
    (skip,) = _convert(options, [CustomParam("limit", ("FLOAT_32",))]).skipped
    assert message in skip.reason and skip.op == "CUSTOM 'SoftClip'"


def test_undeclared_option_keys_are_noted_not_passed():
    result = _convert(flexbuffers.Dumps({"limit": 2.0, "mode": 1}), [CustomParam("limit")])
    assert result.complete
    (note,) = result.notes
    assert "['mode']" in note
    operands, _ = _param_operands(result)
    assert len(operands) == 1


def test_committed_model_carries_a_flexbuffer_limit():
    model = read_model(model_path("custom_op"))
    assert flexbuffers.Loads(model.subgraphs[0].operators[1].custom_options) == {"limit": 2.0}
    result = import_tflite(model_path("custom_op"), {"SoftClip": (EXT, 0, [CustomParam("limit")])})
    operands, model = _param_operands(result)
    from nnhal.runtime.slicing import constant_value

    assert np.isclose(float(np.ravel(constant_value(model, operands[0]))[0]), 2.0)
