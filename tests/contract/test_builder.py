"""Tests for nnhal.builder: layout of the built Model and errors for misuse."""

from __future__ import annotations

import numpy as np
import pytest

from nnhal.builder import ModelBuilder, ValuePacker, value_to_array
from nnhal.types import (
    DataLocation,
    InlineMemory,
    OperandLifeTime,
    OperandType,
    OperationType,
    SymmPerChannelQuantParams,
)

F32 = OperandType.TENSOR_FLOAT32
I32 = OperandType.INT32


def _add_model():
    mb = ModelBuilder()
    g = mb.main
    a = g.input(F32, [1, 2])
    b = g.input(F32, [1, 2])
    act = g.constant(I32, 0)
    y = g.output(F32, [1, 2])
    g.operation(OperationType.ADD, [a, b, act], [y])
    return mb.build()


def test_simple_model_layout():
    m = _add_model()
    ops = m.main.operands
    assert [o.lifetime for o in ops] == [
        OperandLifeTime.SUBGRAPH_INPUT,
        OperandLifeTime.SUBGRAPH_INPUT,
        OperandLifeTime.CONSTANT_COPY,
        OperandLifeTime.SUBGRAPH_OUTPUT,
    ]
    assert m.main.inputIndexes == (0, 1)
    assert m.main.outputIndexes == (3,)
    assert [o.numberOfConsumers for o in ops] == [1, 1, 1, 0]
    assert ops[2].location == DataLocation(0, 0, 4)
    assert np.frombuffer(m.operandValues, np.int32).tolist() == [0]
    assert ops[0].dimensions == (1, 2)
    assert m.main.operations[0].type == OperationType.ADD
    assert m.main.operations[0].inputs == (0, 1, 2)
    assert m.pools == () and m.referenced == ()
    assert m.relaxComputationFloat32toFloat16 is False


def test_consumers_count_every_occurrence():
    mb = ModelBuilder()
    g = mb.main
    x = g.input(F32, [2])
    act = g.constant(I32, 0)
    t = g.temporary(F32, [2])
    y = g.output(F32, [2])
    g.operation("ADD", [x, x, act], [t])
    g.operation("MUL", [t, x, act], [y])
    m = mb.build()
    assert [o.numberOfConsumers for o in m.main.operands] == [3, 2, 1, 0]


def test_input_output_order_follows_calls():
    mb = ModelBuilder()
    g = mb.main
    y = g.output(F32, [1])
    b = g.input(F32, [1])
    a = g.input(F32, [1])
    m = mb.build()
    assert m.main.inputIndexes == (int(b), int(a))
    assert m.main.outputIndexes == (int(y),)


def test_constant_copy_alignment():
    mb = ModelBuilder()
    g = mb.main
    c1 = g.constant(OperandType.BOOL, True)  # 1 byte, unaligned
    c2 = g.constant(OperandType.TENSOR_QUANT8_ASYMM, [1, 2, 3], scale=0.5)  # 3 bytes -> align 2
    c3 = g.constant(OperandType.FLOAT16, 1.5)  # 2 bytes -> align 2
    c4 = g.constant(OperandType.TENSOR_BOOL8, [True])  # 1 byte
    c5 = g.constant(F32, [1.0, 2.0])  # 8 bytes -> align 4
    m = mb.build()
    locs = [m.main.operands[i].location for i in (c1, c2, c3, c4, c5)]
    assert [(loc.offset, loc.length) for loc in locs] == [(0, 1), (2, 3), (6, 2), (8, 1), (12, 8)]
    assert len(m.operandValues) == 20
    assert np.frombuffer(m.operandValues[12:20], np.float32).tolist() == [1.0, 2.0]
    assert np.frombuffer(m.operandValues[6:8], np.float16)[0] == np.float16(1.5)
    assert m.main.operands[c2].scale == 0.5
    assert m.main.operands[c2].dimensions == (3,)


def test_constant_reference_in_one_pool():
    mb = ModelBuilder()
    g = mb.main
    w = g.constant(F32, np.arange(4, dtype=np.float32), dims=[2, 2], reference=True)
    q = g.constant(OperandType.TENSOR_QUANT8_ASYMM, [7], scale=1.0, reference=True)
    v = g.constant(OperandType.TENSOR_INT32, [5, 6], reference=True)
    sub = mb.subgraph()
    s = sub.constant(OperandType.TENSOR_INT32, [9], reference=True)
    m = mb.build()
    assert len(m.pools) == 1 and isinstance(m.pools[0], InlineMemory)
    pool = m.pools[0].data
    lw, lq, lv = (m.main.operands[i].location for i in (w, q, v))
    ls = m.referenced[0].operands[s].location
    assert (lw.poolIndex, lw.offset, lw.length) == (0, 0, 16)
    assert (lq.offset, lq.length) == (16, 1)
    assert (lv.offset, lv.length) == (20, 8)  # 4-byte aligned after the single byte
    assert (ls.offset, ls.length) == (28, 4)
    assert m.main.operands[w].lifetime == OperandLifeTime.CONSTANT_REFERENCE
    assert m.main.operands[w].dimensions == (2, 2)
    assert np.frombuffer(pool[0:16], np.float32).tolist() == [0, 1, 2, 3]
    assert np.frombuffer(pool[20:28], np.int32).tolist() == [5, 6]
    assert m.operandValues == b""


def test_dims_inferred_and_scalar_tensor():
    mb = ModelBuilder()
    g = mb.main
    a = g.constant(F32, [[1, 2, 3], [4, 5, 6]])
    b = g.constant(OperandType.TENSOR_INT32, 4)  # bare scalar for a tensor -> [1]
    c = g.constant(F32, np.zeros(6), dims=[3, 2])
    m = mb.build()
    assert m.main.operands[a].dimensions == (2, 3)
    assert m.main.operands[b].dimensions == (1,)
    assert m.main.operands[c].dimensions == (3, 2)


def test_relaxed_flag_and_extension_prefix():
    mb = ModelBuilder(relaxed=True)
    mb.extension("com.example.ops", 1)
    mb.main.input(F32, [1])
    m = mb.build()
    assert m.relaxComputationFloat32toFloat16 is True
    assert m.extensionNameToPrefix[0].name == "com.example.ops"


def test_channel_quant():
    mb = ModelBuilder()
    g = mb.main
    w = g.constant(
        OperandType.TENSOR_QUANT8_SYMM_PER_CHANNEL,
        np.ones((2, 3), np.int8),
        channel_quant=([0.5, 0.25], 0),
    )
    m = mb.build()
    assert m.main.operands[w].extraParams == SymmPerChannelQuantParams((0.5, 0.25), 0)
    with pytest.raises(ValueError, match="TENSOR_QUANT8_SYMM_PER_CHANNEL"):
        g.input(F32, [2], channel_quant=([1.0], 0))
    with pytest.raises(ValueError, match="scales, channelDim"):
        g.input(OperandType.TENSOR_QUANT8_SYMM_PER_CHANNEL, [2], channel_quant=[1.0])


def test_subgraph_references_and_while_shape():
    mb = ModelBuilder()
    cond = mb.subgraph()
    body = mb.subgraph()
    ci = cond.input(F32, [1])
    co = cond.output(OperandType.TENSOR_BOOL8, [1])
    zero = cond.constant(F32, [0.0])
    cond.operation(OperationType.LESS, [ci, zero], [co])
    bi = body.input(F32, [1])
    one = body.constant(F32, [1.0])
    act = body.constant(I32, 0)
    bo = body.output(F32, [1])
    body.operation(OperationType.ADD, [bi, one, act], [bo])

    g = mb.main
    c_ref = g.subgraph_ref(cond)
    b_ref = g.subgraph_ref(body)
    x = g.input(F32, [1])
    y = g.output(F32, [1])
    g.operation(OperationType.WHILE, [c_ref, b_ref, x], [y])
    m = mb.build()
    assert len(m.referenced) == 2
    sub_ops = [m.main.operands[c_ref], m.main.operands[b_ref]]
    assert [o.type for o in sub_ops] == [OperandType.SUBGRAPH] * 2
    assert [o.lifetime for o in sub_ops] == [OperandLifeTime.SUBGRAPH] * 2
    assert [o.location.offset for o in sub_ops] == [0, 1]
    assert [o.numberOfConsumers for o in sub_ops] == [1, 1]
    assert m.referenced[1].operations[0].type == OperationType.ADD
    # the constants of referenced subgraphs share operandValues with main
    assert m.referenced[0].operands[zero].location.offset == 0
    assert m.referenced[1].operands[one].location.offset == 4
    assert cond.index == 1 and body.index == 2 and g.index == 0


def test_no_value_operand():
    mb = ModelBuilder()
    n = mb.main.no_value(F32, [2])
    m = mb.build()
    assert m.main.operands[n].lifetime == OperandLifeTime.NO_VALUE
    assert m.main.operands[n].location == DataLocation()


def test_build_is_repeatable():
    mb = ModelBuilder()
    mb.main.constant(F32, [1.0])
    assert mb.build() == mb.build()


def test_quantized_values_are_raw_integers():
    arr = value_to_array(OperandType.TENSOR_QUANT8_ASYMM_SIGNED, [-128, 127])
    assert arr.dtype == np.int8 and arr.tolist() == [-128, 127]
    assert value_to_array(OperandType.TENSOR_BOOL8, [0, 1]).dtype == np.bool_
    assert value_to_array(OperandType.TENSOR_FLOAT16, [0.5]).dtype == np.float16


def test_value_packer_alignment_rules():
    p = ValuePacker()
    assert p.add_copy(b"\1").offset == 0
    assert p.add_copy(b"\1\2").offset == 2
    assert p.add_copy(b"\1").offset == 4
    assert p.add_copy(b"\1\2\3\4\5").offset == 8
    assert p.add_reference(b"\1").offset == 0
    assert p.add_reference(b"\1\2").offset == 4


# ---- misuse --------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"type": F32, "value": [1.0, 2.0, 3.0], "dims": [2, 2]}, "does not match dimensions"),
        ({"type": F32, "value": [1.0], "dims": [0]}, "fully specified"),
        ({"type": F32, "value": [1.0], "dims": []}, "fully specified"),
        ({"type": I32, "value": [1, 2]}, "scalar type"),
        ({"type": OperandType.TENSOR_QUANT8_ASYMM, "value": [256]}, "out of range"),
        ({"type": OperandType.TENSOR_QUANT8_ASYMM, "value": [-1]}, "out of range"),
        ({"type": OperandType.TENSOR_INT32, "value": [1.5]}, "integers"),
        ({"type": OperandType.TENSOR_BOOL8, "value": [2]}, "0/1"),
        ({"type": F32, "value": ["a"]}, "numeric"),
        ({"type": F32, "value": []}, "empty"),
        ({"type": F32, "value": b"\0" * 6, "dims": [2]}, "does not match dimensions"),
        ({"type": "NOT_A_TYPE", "value": 1}, "unknown operand type"),
        ({"type": OperandType.OEM, "value": 1}, "give the value as bytes"),
        ({"type": F32, "value": [1.0], "dims": [-1]}, "uint32"),
    ],
)
def test_constant_misuse(kwargs, match):
    g = ModelBuilder().main
    with pytest.raises(ValueError, match=match):
        g.constant(kwargs.pop("type"), kwargs.pop("value"), **kwargs)


def test_operand_from_another_subgraph_builder():
    mb = ModelBuilder()
    body = mb.subgraph()
    x = body.input(F32, [1])
    y = mb.main.output(F32, [1])
    with pytest.raises(ValueError, match="belongs to subgraph 1, not to subgraph 0"):
        mb.main.operation(OperationType.RESHAPE, [x], [y])


def test_operand_index_out_of_range():
    g = ModelBuilder().main
    y = g.output(F32, [1])
    with pytest.raises(ValueError, match="does not exist"):
        g.operation(OperationType.ADD, [5], [y])
    with pytest.raises(ValueError, match="operand index"):
        g.operation(OperationType.ADD, ["x"], [y])
    with pytest.raises(ValueError, match="unknown operation type"):
        g.operation("NOPE", [y], [y])


def test_subgraph_ref_misuse():
    mb = ModelBuilder()
    other = ModelBuilder().subgraph()
    with pytest.raises(ValueError, match="another ModelBuilder"):
        mb.main.subgraph_ref(other)
    with pytest.raises(ValueError, match="main subgraph"):
        mb.main.subgraph_ref(mb.main)
    with pytest.raises(ValueError, match="SubgraphBuilder"):
        mb.main.subgraph_ref(3)
    with pytest.raises(ValueError, match="use constant"):
        mb.main.operand(F32, [1], lifetime=OperandLifeTime.CONSTANT_COPY)
    with pytest.raises(ValueError, match="uint16"):
        mb.extension("x", 1 << 16)


def test_built_model_validates():
    from nnhal.validation import validate_model

    validate_model(_add_model())
