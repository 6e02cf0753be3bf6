"""Shared harness of the operation tables (tests/test_ops*.py).

A row builds an OpContext from OperandInfo values, runs ``validate_operation``
(checking the HAL version), ``prepare`` (checking the inferred shape) and
``execute(ctx)(*tensors)``. References work on real values: quantized inputs
are dequantized and the real result is quantized with the output's scale and
zero point, so they do not share the fixed-point arithmetic under test;
quantized results may differ by one unit, as the vectors' tolerance allows.

``NoValue`` / ``no_value`` / ``runtime_none`` give omitted inputs, and
``run_model`` runs one operation as a whole model through the executor (the
``shapes_mode`` fixture, in conftest.py, runs such tests with and without
shape proofs).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest
from nnhal.driver.executor import compile_model
from nnhal.driver.ops import quant
from nnhal.driver.ops.registry import OpContext, OperandInfo, lookup, validate_operation

from nnhal.builder import ModelBuilder
from nnhal.errors import InvalidArgument
from nnhal.types import OPERAND_TYPE_INFO
from nnhal.types import FusedActivationFunc as Act
from nnhal.types import HalVersion as V
from nnhal.types import OperandType as T
from nnhal.types import OperationType as Op

RNG = np.random.default_rng(20240611)
WHERE = "subgraph 0, operation 3"
QUANT = (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)

# ---------------------------------------------------------------------------
# Operand specs
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class X:
    """One operand of a row: its type, value, model dims and quantization."""

    type: T
    data: np.ndarray | None = None
    dims: tuple | None | str = "data"  # "data": the data's shape; None: unknown rank
    scale: float = 0.0
    zp: int = 0
    const: bool = False

    def info(self) -> OperandInfo:
        dims = tuple(self.data.shape) if self.dims == "data" else self.dims
        if OPERAND_TYPE_INFO[self.type].is_scalar:
            dims = ()
        value = self.data if self.const else None
        return OperandInfo(self.type, dims, self.scale, self.zp, value=value)

    @property
    def is_tensor(self) -> bool:
        return not OPERAND_TYPE_INFO[self.type].is_scalar

    def real(self) -> np.ndarray:
        if self.type in QUANT:
            return (self.data.astype(np.float64) - self.zp) * self.scale
        if self.type == T.TENSOR_INT32 and self.scale:  # a quantized bias
            return self.data * self.scale
        return self.data


def _random(type_: T, shape: tuple) -> np.ndarray:
    dtype = OPERAND_TYPE_INFO[type_].dtype
    if type_ == T.TENSOR_BOOL8:
        return RNG.random(shape) < 0.5
    if dtype.kind == "f":
        return RNG.uniform(-4, 4, shape).astype(dtype)
    if type_ == T.TENSOR_INT32:
        return RNG.integers(-50, 50, shape, dtype=np.int32)
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max, shape, endpoint=True, dtype=dtype)


def t(type_: T, shape=(2, 3), *, scale=0.0, zp=0, const=False, dims="data", data=None) -> X:
    """A tensor with random (or given) data."""
    if data is None:
        data = _random(type_, tuple(shape))
    else:
        data = np.asarray(data, dtype=OPERAND_TYPE_INFO[type_].dtype)
    return X(type_, data, dims, scale, zp, const)


def f32(shape=(2, 3), **kw) -> X:
    return t(T.TENSOR_FLOAT32, shape, **kw)


def f16(shape=(2, 3), **kw) -> X:
    return t(T.TENSOR_FLOAT16, shape, **kw)


def i32(shape=(2, 3), **kw) -> X:
    return t(T.TENSOR_INT32, shape, **kw)


def u8(shape=(2, 3), scale=0.5, zp=128, **kw) -> X:
    return t(T.TENSOR_QUANT8_ASYMM, shape, scale=scale, zp=zp, **kw)


def s8(shape=(2, 3), scale=0.5, zp=0, **kw) -> X:
    return t(T.TENSOR_QUANT8_ASYMM_SIGNED, shape, scale=scale, zp=zp, **kw)


def b8(shape=(2, 3), **kw) -> X:
    return t(T.TENSOR_BOOL8, shape, **kw)


def ivec(values, const=True, dims="data") -> X:
    """A TENSOR_INT32 vector (a shape/begin/size parameter)."""
    return X(T.TENSOR_INT32, np.asarray(values, np.int32), dims, const=const)


def scalar(value, type_: T = T.INT32, const=True) -> X:
    dtype = OPERAND_TYPE_INFO[type_].dtype
    return X(type_, np.asarray(value, dtype), (), const=const)


def out(type_: T, dims=None, scale=0.0, zp=0) -> X:
    """An output operand (dims None = unknown rank)."""
    return X(type_, None, dims, scale, zp)


# ---------------------------------------------------------------------------
# Harness
# ---------------------------------------------------------------------------


def context(op: Op, ins: list[X], outs: list[X]) -> OpContext:
    definition = lookup(op)
    assert definition is not None, f"{op.name} is not registered"
    return OpContext(definition, [x.info() for x in ins], [x.info() for x in outs], where=WHERE)


def run(op: Op, ins: list[X], outs: list[X]) -> tuple[V, list, np.ndarray]:
    """validate + prepare + execute one operation; returns (version, shapes, output)."""
    ctx = context(op, ins, outs)
    version = validate_operation(ctx)
    shapes = ctx.op.prepare(ctx) if ctx.op.prepare else None
    kernel = ctx.op.kernel(ctx)
    tensors = [x.data for x in ins if x.is_tensor]
    result = kernel(*tensors)
    for x in tensors:
        assert not np.shares_memory(result, x), "a kernel returned a view of an input"
    return version, shapes, result


def expected(ref_real: np.ndarray, o: X, raw: bool) -> np.ndarray:
    dtype = OPERAND_TYPE_INFO[o.type].dtype
    ref_real = np.asarray(ref_real)
    if o.type in QUANT and not raw:
        lo, hi = quant.QUANT_RANGE[dtype]
        q = quant.round_half_away_array(ref_real / o.scale) + o.zp
        return np.clip(q, lo, hi).astype(dtype)
    return ref_real.astype(dtype)


def assert_close(got: np.ndarray, want: np.ndarray, type_: T) -> None:
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    g, w = got.astype(np.float64), want.astype(np.float64)
    if type_ == T.TENSOR_FLOAT32:
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    elif type_ == T.TENSOR_FLOAT16:
        np.testing.assert_allclose(g, w, rtol=5 * 2**-10, atol=5 * 2**-10)
    elif type_ in QUANT:
        np.testing.assert_allclose(g, w, rtol=0, atol=1)
    else:
        np.testing.assert_array_equal(g, w)


@dataclass
class Row:
    id: str
    op: Op
    ins: list[X]
    out: X
    ref: Callable[..., np.ndarray]  # reference on the real (or raw) tensor inputs
    version: V | None = None
    raw: bool = False  # the reference works on raw quantized integers (CAST, SLICE...)
    shape: tuple | None = field(default=None)  # expected prepared shape when not the result's

    def check(self) -> None:
        version, shapes, got = run(self.op, self.ins, [self.out])
        if self.version is not None:
            assert version == self.version
        args = [x.data if self.raw else x.real() for x in self.ins if x.is_tensor]
        want = expected(self.ref(*args), self.out, self.raw)
        assert_close(got, want, self.out.type)
        if shapes is not None and shapes[0] is not None:
            prepared = shapes[0]
            assert len(prepared) == got.ndim
            assert all(p in (0, s) for p, s in zip(prepared, got.shape)), (prepared, got.shape)
            if self.shape is not None:
                assert tuple(prepared) == self.shape


def act(a: Act) -> X:
    return scalar(int(a))


def relu(x):
    return np.maximum(x, 0)


def relu1(x):
    return np.clip(x, -1, 1)


def relu6(x):
    return np.clip(x, 0, 6)


NONE = act(Act.NONE)
F32_OUT = out(T.TENSOR_FLOAT32)


@dataclass
class Bad:
    id: str
    op: Op
    ins: list[X]
    outs: list[X]
    match: str  # regex the message must contain (operand and rule)

    def check(self) -> None:
        ctx = context(self.op, self.ins, self.outs)
        with pytest.raises(InvalidArgument) as err:
            validate_operation(ctx)
            if ctx.op.prepare is not None:
                ctx.op.prepare(ctx)
            ctx.op.kernel(ctx)
        message = err.value.message
        assert message.startswith(f"{self.op.name} ({WHERE}): "), message
        assert_matches(message, self.match)


def assert_matches(message: str, pattern: str) -> None:
    assert re.search(pattern, message), f"{message!r} does not match {pattern!r}"


# ---------------------------------------------------------------------------
# Omitted inputs, and one operation run as a whole model
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class NoValue(X):
    """An optional tensor input given as NO_VALUE (the kernel receives None)."""

    def info(self) -> OperandInfo:
        return OperandInfo(self.type, (0,), omitted=True)


def no_value(type_: T = T.TENSOR_INT32) -> NoValue:
    return NoValue(type_, None, (0,))


def runtime_none(type_: T = T.TENSOR_INT32, dims=(0,)) -> X:
    """A tensor that is a model input given no value at run time (kernel gets None)."""
    return X(type_, None, dims)


def run_model(op: Op, inputs: list[tuple], outputs: list[tuple]) -> list[np.ndarray]:
    """One operation as a whole model, compiled and run by the executor.

    ``inputs``: ``("in", type, array[, scale, zp])`` a model input with its
    value; ``("in?", type, dims)`` a model input given no value;
    ``("const", type, value[, scale, zp])``; ``("none", type)`` NO_VALUE.
    ``outputs``: ``(type, dims[, scale, zp])``. Returns the output arrays.
    """
    mb = ModelBuilder()
    g = mb.main
    operands, values = [], []
    for kind, type_, value, *qparams in inputs:
        if kind == "const":
            operands.append(g.constant(type_, value, None, *qparams))
        elif kind == "none":
            operands.append(g.no_value(type_))
        elif kind == "in?":
            operands.append(g.input(type_, value))
            values.append(None)
        else:
            array = np.asarray(value)
            operands.append(g.input(type_, array.shape, *qparams))
            values.append(array)
    outs = [g.output(type_, dims, *qparams) for type_, dims, *qparams in outputs]
    g.operation(op, operands, outs)
    return compile_model(mb.build()).run(values)
