"""WHILE and IF of unknown dimensions and of unknown rank carrying every tensor type the shared
corpus's models take in or give out (the corpus itself has no IF/WHILE), relaxed float32
too: the runtime runs them, with the right outputs, and the loop timeout holds.

The body moves its value with CAST, which HAL 1.3 defines for every one of these types
(an identity cast for BOOL8, QUANT16, QUANT8_SYMM and QUANT8_ASYMM_SIGNED). Not covered:
TENSOR_QUANT8_SYMM_PER_CHANNEL (no operation outputs it, so nothing can carry it across
iterations) and the scalar INT32 (a scalar has no unknown size)."""

from __future__ import annotations

import numpy as np
import pytest
from nnhal.runtime.api import run_model
from nnhal.runtime.partition import INTERPRETER, partition
from nnhal.runtime.reference import reference_device
from runtime_helpers import served

from nnhal.builder import ModelBuilder
from nnhal.errors import MissedDeadline
from nnhal.types import ExecutionPreference
from nnhal.types import OperandType as T
from nnhal.types import OperationType as O

I32, BOOL8 = T.TENSOR_INT32, T.TENSOR_BOOL8

# name -> (type, dtype, scale, zeroPoint); "relaxed": float32 in a relaxed model
CORPUS_TYPES = {
    "TENSOR_FLOAT32": (T.TENSOR_FLOAT32, np.float32, 0.0, 0),
    "relaxed_TENSOR_FLOAT32": (T.TENSOR_FLOAT32, np.float32, 0.0, 0),
    "TENSOR_FLOAT16": (T.TENSOR_FLOAT16, np.float16, 0.0, 0),
    "TENSOR_INT32": (T.TENSOR_INT32, np.int32, 0.0, 0),
    "TENSOR_QUANT8_ASYMM": (T.TENSOR_QUANT8_ASYMM, np.uint8, 0.5, 3),
    "TENSOR_QUANT8_ASYMM_SIGNED": (T.TENSOR_QUANT8_ASYMM_SIGNED, np.int8, 0.5, -3),
    "TENSOR_QUANT8_SYMM": (T.TENSOR_QUANT8_SYMM, np.int8, 0.5, 0),
    "TENSOR_QUANT16_ASYMM": (T.TENSOR_QUANT16_ASYMM, np.uint16, 0.125, 10),
    "TENSOR_QUANT16_SYMM": (T.TENSOR_QUANT16_SYMM, np.int16, 0.25, 0),
    "TENSOR_BOOL8": (T.TENSOR_BOOL8, np.bool_, 0.0, 0),
}
SHAPES = {"unknown_dims": [0, 0], "unknown_rank": None}


def _value(name):
    dtype = CORPUS_TYPES[name][1]
    if dtype is np.bool_:
        return np.array([[True, False], [False, True], [True, True]])
    return (np.arange(6).reshape(3, 2) * 3 + 1).astype(dtype)


def _builder(name):
    return ModelBuilder(relaxed=name.startswith("relaxed"))


def carry_loop(name, dims, endless=False):
    """WHILE (i < n) [or (i >= 0), endless]: x = CAST(x); i = i + 1 -> (x, i)."""
    code, _, scale, zp = CORPUS_TYPES[name]
    mb = _builder(name)
    cond = mb.subgraph()
    cond.input(code, dims, scale, zp)
    ci, cn = cond.input(I32, [1]), cond.input(I32, [1])
    c_out = cond.output(BOOL8, [1])
    if endless:
        cond.operation(O.GREATER_EQUAL, [ci, cond.constant(I32, [0])], [c_out])
    else:
        cond.operation(O.LESS, [ci, cn], [c_out])
    body = mb.subgraph()
    bx = body.input(code, dims, scale, zp)
    bi, _bn = body.input(I32, [1]), body.input(I32, [1])
    bx_out, bi_out = body.output(code, dims, scale, zp), body.output(I32, [1])
    body.operation(O.CAST, [bx], [bx_out])
    body.operation(O.ADD, [bi, body.constant(I32, [1]), body.constant(T.INT32, 0)], [bi_out])
    g = mb.main
    x = g.input(code, dims, scale, zp)
    i, n = g.input(I32, [1]), g.input(I32, [1])
    x_out, i_out = g.output(code, dims, scale, zp), g.output(I32, [1])
    g.operation(O.WHILE, [g.subgraph_ref(cond), g.subgraph_ref(body), x, i, n], [x_out, i_out])
    return mb.build()


def choose(name, dims):
    """IF c: y = CAST(a) else: y = CAST(b)."""
    code, _, scale, zp = CORPUS_TYPES[name]
    mb = _builder(name)
    branches = []
    for _ in range(2):
        sub = mb.subgraph()
        a, b = sub.input(code, dims, scale, zp), sub.input(code, dims, scale, zp)
        y = sub.output(code, dims, scale, zp)
        sub.operation(O.CAST, [a if not branches else b], [y])
        branches.append(sub)
    g = mb.main
    c = g.input(BOOL8, [1])
    a, b = g.input(code, dims, scale, zp), g.input(code, dims, scale, zp)
    y = g.output(code, dims, scale, zp)
    g.operation(O.IF, [c, g.subgraph_ref(branches[0]), g.subgraph_ref(branches[1]), a, b], [y])
    return mb.build()


@pytest.fixture(scope="module")
def npu():
    # no LESS / GREATER_EQUAL on the device: conditions on the CPU, bodies on the device
    profile = {"name": "npu", "type": "ACCELERATOR",
               "exclude_operations": ["LESS", "GREATER_EQUAL"],
               "capabilities": {"default": {"execTime": 0.5, "powerUsage": 0.5}}}  # fmt: skip
    with served(profile) as (_, (device,)):
        yield device


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("name", sorted(CORPUS_TYPES))
def test_while_carries_every_corpus_type_of_unknown_size(npu, name, shape):
    model = carry_loop(name, SHAPES[shape])
    plan = partition(model, [npu, reference_device()], ExecutionPreference.FAST_SINGLE_ANSWER)
    assert plan.choices[0].device == INTERPRETER
    x = _value(name)
    for n in (0, 2):
        outs, execution = run_model(model, [x, np.array([0], np.int32), np.array([n], np.int32)],
                                    [npu])  # fmt: skip
        np.testing.assert_array_equal(outs[0], x)
        assert outs[0].dtype == x.dtype and outs[0].shape == x.shape
        assert outs[1].tolist() == [n]
        assert list(execution.report.loop_iterations.values()) == [n]
        body_devices = {s.device for s in execution.report.steps if s.operations == [0, 1]}
        assert body_devices == ({"npu"} if n else set())
        assert not execution.report.fallbacks


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("name", sorted(CORPUS_TYPES))
def test_if_carries_every_corpus_type_of_unknown_size(npu, name, shape):
    model = choose(name, SHAPES[shape])
    a = _value(name)
    b = a[:2]  # another shape: the output's size depends on the branch taken
    for c, expected in ((True, a), (False, b)):
        outs, execution = run_model(model, [np.array([c]), a, b], [npu])
        np.testing.assert_array_equal(outs[0], expected)
        assert outs[0].dtype == a.dtype
        assert [s.device for s in execution.report.steps] == ["npu"]
        assert execution.report.trace[0]["branch"] == ("then" if c else "else")


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("name", sorted(CORPUS_TYPES))
def test_loop_timeout_holds_for_every_corpus_type(npu, name, shape):
    model = carry_loop(name, SHAPES[shape], endless=True)
    with pytest.raises(MissedDeadline) as info:
        run_model(model, [_value(name), np.array([0], np.int32), np.array([0], np.int32)],
                  [npu], loop_timeout_ns=20_000_000)  # fmt: skip
    assert info.value.status.name == "MISSED_DEADLINE_TRANSIENT"
    assert "loop timeout" in info.value.message
