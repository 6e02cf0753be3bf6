"""Element-wise operators: arithmetic, activations, comparisons, logic, Cast, Where, Identity.

As ONNX Runtime's NNAPI execution provider does: Add/Sub/Mul/Div/Pow/PRelu
(binary builder, fused activation NONE), the unary builder's Abs, Exp,
Floor, Log, Neg, Sigmoid (LOGISTIC), Sin, Sqrt, Tanh, Relu, Elu, LeakyRelu
(PRELU with the slope as a constant), Clip (RELU / RELU1 / RELU6 when the
bounds match, else MAXIMUM + MINIMUM), Max/Min (chains of MAXIMUM /
MINIMUM). Beyond the execution provider (control-flow bodies need them):
comparisons, Not/And/Or/Xor, Where (SELECT; inputs broadcast with TILE when
their shapes are static), Cast/CastLike, Identity, Reciprocal, Ceil,
HardSwish, HardSigmoid (MUL, ADD, MAXIMUM, MINIMUM); Pow with an integer
exponent CASTs it to the base's float type. NNAPI broadcasts binary operands the numpy way, as ONNX
does (multidirectional broadcasting).
"""

from __future__ import annotations

import numpy as np

from nnhal.types import OperandType, OperationType

from . import types_map as tm
from .errors import Unsupported
from .node import Node
from .registry import mapping

T = OperandType
O = OperationType

_BINARY = {"Add": O.ADD, "Sub": O.SUB, "Mul": O.MUL, "Div": O.DIV}
_FLOATS = (tm.FLOAT, tm.FLOAT16)


@mapping(*_BINARY)
def binary(n: Node) -> None:
    a, b = n.t(0), n.t(1)
    if a.elem not in (*_FLOATS, tm.INT32, tm.INT64):
        raise Unsupported(f"{n.op_type} on {tm.elem_name(a.elem)} tensors")
    if n.op_type == "Div" and a.elem in (tm.INT32, tm.INT64):
        # NNAPI's integer DIV rounds toward negative infinity, ONNX's truncates
        raise Unsupported("integer Div (NNAPI rounds toward -inf, ONNX truncates)")
    del b
    n.op(_BINARY[n.op_type], [n.i(0), n.i(1), n.scalar_i32(0)], [n.out(0, like=0)])


@mapping("Pow")
def pow_(n: Node) -> None:
    base, exp = n.t(0), n.t(1)
    if base.elem not in _FLOATS:
        raise Unsupported(f"Pow of a {tm.elem_name(base.elem)} base (NNAPI's POW is float)")
    e = n.i(1)
    if exp.elem != base.elem:
        if exp.elem not in (*_FLOATS, tm.INT32, tm.INT64):
            raise Unsupported(f"Pow with a {tm.elem_name(exp.elem)} exponent")
        # POW takes the base's type: integer exponents are exact in float, so CAST them
        e = n.scope.temp(base.nnapi_type(), exp.shape)
        n.op(O.CAST, [n.i(1)], [e])
    n.op(O.POW, [n.i(0), e], [n.out(0, like=0)])


@mapping("PRelu")
def prelu(n: Node) -> None:
    n.op(O.PRELU, [n.i(0), n.i(1)], [n.out(0, like=0)])


@mapping("LeakyRelu")
def leaky_relu(n: Node) -> None:
    x = n.t(0)
    if x.elem not in _FLOATS:
        raise Unsupported("LeakyRelu on non-float tensors")
    alpha = np.array([n.attr("alpha", 0.01)], np.float16 if x.elem == tm.FLOAT16 else np.float32)
    code = T.TENSOR_FLOAT16 if x.elem == tm.FLOAT16 else T.TENSOR_FLOAT32
    n.op(O.PRELU, [n.i(0), n.scope.sb.constant(code, alpha, (1,))], [n.out(0, like=0)])


_UNARY = {
    "Abs": O.ABS, "Exp": O.EXP, "Floor": O.FLOOR, "Log": O.LOG, "Neg": O.NEG,
    "Sigmoid": O.LOGISTIC, "Sin": O.SIN, "Sqrt": O.SQRT, "Tanh": O.TANH, "Relu": O.RELU,
    "Not": O.LOGICAL_NOT, "HardSwish": O.HARD_SWISH, "Cos": None,
}  # fmt: skip


@mapping(*[k for k, v in _UNARY.items() if v is not None])
def unary(n: Node) -> None:
    x = n.t(0)
    if n.op_type == "Not":
        if x.elem != tm.BOOL:
            raise Unsupported("Not on non-bool tensors")
    elif n.op_type == "Abs" or n.op_type == "Neg":
        if x.elem not in (*_FLOATS, tm.INT32):
            raise Unsupported(f"{n.op_type} on {tm.elem_name(x.elem)} tensors")
    elif x.elem not in _FLOATS:
        raise Unsupported(f"{n.op_type} on {tm.elem_name(x.elem)} tensors")
    n.op(_UNARY[n.op_type], [n.i(0)], [n.out(0, like=0)])


@mapping("Ceil")
def ceil(n: Node) -> None:
    x = n.t(0)
    if x.elem not in _FLOATS:
        raise Unsupported("Ceil on non-float tensors")
    code = x.nnapi_type()
    neg = n.scope.temp(code, x.shape)
    n.op(O.NEG, [n.i(0)], [neg])
    low = n.scope.temp(code, x.shape)
    n.op(O.FLOOR, [neg], [low])
    n.op(O.NEG, [low], [n.out(0, like=0)])  # ceil(x) = -floor(-x)


@mapping("HardSigmoid")
def hard_sigmoid(n: Node) -> None:
    """max(0, min(1, alpha * x + beta)): MUL, ADD, then MAXIMUM / MINIMUM with constants."""
    x = n.t(0)
    if x.elem not in _FLOATS:
        raise Unsupported("HardSigmoid on non-float tensors")
    code = x.nnapi_type()
    dtype = tm.NP_DTYPE[code]

    def const(v: float) -> int:
        return n.scope.sb.constant(code, np.array([v], dtype), (1,))

    scaled, shifted, low = (n.scope.temp(code, x.shape) for _ in range(3))
    n.op(O.MUL, [n.i(0), const(n.attr("alpha", 0.2)), n.scalar_i32(0)], [scaled])
    n.op(O.ADD, [scaled, const(n.attr("beta", 0.5)), n.scalar_i32(0)], [shifted])
    n.op(O.MAXIMUM, [shifted, const(0.0)], [low])
    n.op(O.MINIMUM, [low, const(1.0)], [n.out(0, like=0)])


@mapping("Reciprocal")
def reciprocal(n: Node) -> None:
    x = n.t(0)
    if x.elem not in _FLOATS:
        raise Unsupported("Reciprocal on non-float tensors")
    one = n.scope.sb.constant(x.nnapi_type(), np.ones(1, tm.NP_DTYPE[x.nnapi_type()]), (1,))
    n.op(O.DIV, [one, n.i(0), n.scalar_i32(0)], [n.out(0, like=0)])


@mapping("Elu")
def elu(n: Node) -> None:
    x = n.t(0)
    if x.elem not in _FLOATS:
        raise Unsupported("Elu on non-float tensors")
    n.op(O.ELU, [n.i(0), n.scalar_f(n.attr("alpha", 1.0), x)], [n.out(0, like=0)])


@mapping("Clip")
def clip(n: Node) -> None:
    x = n.t(0)
    if n.opset < 11:
        lo, hi = n.attr("min", -np.inf), n.attr("max", np.inf)
    else:
        lo = float(n.const(1, "min")) if n.has(1) else -np.inf
        hi = float(n.const(2, "max")) if n.has(2) else np.inf
    if x.elem in _FLOATS:
        special = {(0.0, np.inf): O.RELU, (-1.0, 1.0): O.RELU1, (0.0, 6.0): O.RELU6}
        op = special.get((float(lo), float(hi)))
        if op is not None:
            n.op(op, [n.i(0)], [n.out(0, like=0)])
            return
    elif x.elem not in (tm.INT32, tm.INT64):
        raise Unsupported(f"Clip on {tm.elem_name(x.elem)} tensors")
    code = x.nnapi_type()
    dtype = tm.NP_DTYPE[code]
    cur = n.i(0)
    steps = [(O.MAXIMUM, lo), (O.MINIMUM, hi)]
    steps = [(op, v) for op, v in steps if np.isfinite(v)]
    if not steps:
        copy(n, cur, 0)
        return
    for k, (op, v) in enumerate(steps):
        bound = n.scope.sb.constant(code, np.array([v], dtype), (1,))
        dst = n.out(0, like=0) if k == len(steps) - 1 else n.scope.temp(code, x.shape)
        n.op(op, [cur, bound], [dst])
        cur = dst


@mapping("Max", "Min")
def min_max(n: Node) -> None:
    op = O.MAXIMUM if n.op_type == "Max" else O.MINIMUM
    count = len(n.proto.input)
    if count == 1:
        copy(n, n.i(0), 0)
        return
    cur = n.i(0)
    code = n.t(0).nnapi_type()
    for k in range(1, count):
        dst = n.out(0, like=0) if k == count - 1 else n.scope.temp(code, None)
        n.op(op, [cur, n.i(k)], [dst])
        cur = dst


_COMPARE = {"Equal": O.EQUAL, "Less": O.LESS, "Greater": O.GREATER,
            "LessOrEqual": O.LESS_EQUAL, "GreaterOrEqual": O.GREATER_EQUAL}  # fmt: skip
_LOGIC = {"And": O.LOGICAL_AND, "Or": O.LOGICAL_OR}


@mapping(*_COMPARE)
def compare(n: Node) -> None:
    n.op(_COMPARE[n.op_type], [n.i(0), n.i(1)], [n.out(0, elem=tm.BOOL)])


@mapping(*_LOGIC)
def logic(n: Node) -> None:
    n.op(_LOGIC[n.op_type], [n.i(0), n.i(1)], [n.out(0, elem=tm.BOOL)])


@mapping("Xor")
def xor(n: Node) -> None:
    n.op(O.NOT_EQUAL, [n.i(0), n.i(1)], [n.out(0, elem=tm.BOOL)])


@mapping("Where")
def where(n: Node) -> None:
    out_shape = n.out_shape(0)
    ins = []
    for k in range(3):
        t = n.t(k)
        if t.shape == out_shape and t.static:
            ins.append(n.i(k))
        else:
            ins.append(broadcast(n, k, n.out_static(0)))
    n.op(O.SELECT, ins, [n.out(0, like=1)])


def broadcast(n: Node, k: int, shape: tuple) -> int:
    """Input ``k`` broadcast to the static ``shape`` (RESHAPE to its rank, then TILE)."""
    src = n.t(k)
    in_shape = n.shape(k)
    full = (1,) * (len(shape) - len(in_shape)) + tuple(in_shape)
    code = src.nnapi_type()
    cur = n.i(k)
    if full != tuple(in_shape) and len(full) > max(len(in_shape), 1):
        from .converter import reshape_operand

        tmp = n.scope.temp(code, full, src.scale, src.zero_point)
        reshape_operand(n.scope, src, cur, full, tmp)
        cur = tmp
    reps = [s // f if f == 1 else 1 for s, f in zip(shape, full)]
    if any(r != 1 for r in reps):
        tmp = n.scope.temp(code, shape, src.scale, src.zero_point)
        n.op(O.TILE, [cur, n.scope.vector(reps)], [tmp])
        cur = tmp
    return cur


@mapping("CastLike")
def cast_like(n: Node) -> None:
    cast(n, n.t(1).elem)


@mapping("Cast")
def cast(n: Node, to: int | None = None) -> None:
    x = n.t(0)
    to = n.attr("to") if to is None else to
    same = {tm.INT32: tm.INT64, tm.INT64: tm.INT32}
    if to == x.elem or same.get(x.elem) == to:
        identity_like(n, to)
        return
    if to == tm.BOOL:
        zero = n.scope.sb.constant(x.nnapi_type(), np.zeros(1, tm.NP_DTYPE[x.nnapi_type()]), (1,))
        n.op(O.NOT_EQUAL, [n.i(0), zero], [n.out(0, elem=tm.BOOL)])
        return
    if x.elem == tm.BOOL:
        code = tm.nnapi_type(to)
        dtype = tm.NP_DTYPE[code]
        shape = n.out_static(0)
        ones = n.scope.sb.constant(code, np.ones(shape or (1,), dtype), tm.nnapi_dims(shape))
        zeros = n.scope.sb.constant(code, np.zeros(shape or (1,), dtype), tm.nnapi_dims(shape))
        n.op(O.SELECT, [n.i(0), ones, zeros], [n.out(0, elem=to)])
        return
    if x.elem not in (*_FLOATS, tm.INT32, tm.INT64) or to not in (*_FLOATS, tm.INT32, tm.INT64):
        raise Unsupported(f"Cast {tm.elem_name(x.elem)} -> {tm.elem_name(to)}")
    n.op(O.CAST, [n.i(0)], [n.out(0, elem=to)])


@mapping("Identity")
def identity(n: Node) -> None:
    identity_like(n, None)


def identity_like(n: Node, elem: int | None) -> None:
    src = n.t(0)
    name = n.proto.output[0]
    if src.const is not None and name not in n.scope.preset_outputs:
        value = src.const if elem is None else src.const.astype(_np_of(elem))
        n.scope.bind_const(name, value)
        return
    if name in n.scope.preset_outputs:
        copy(n, n.i(0), 0, elem=elem)
        return
    t = type(src)(elem or src.elem, src.shape, n.i(0), None, src.scale, src.zero_point,
                  src.quantized)  # fmt: skip
    n.scope.tensors[name] = t


def _np_of(elem: int):
    from onnx import helper

    return helper.tensor_dtype_to_np_dtype(elem)


def copy(n: Node, src: int, k: int, elem: int | None = None) -> None:
    """Copy operand ``src`` (input 0's type) into output ``k``."""
    from .converter import copy_operand

    copy_operand(n.scope, n.t(0), src, n.out(k, like=0, elem=elem or n.t(0).elem))
