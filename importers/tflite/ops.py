"""Builtin TFLite operators -> NNAPI operations, as TFLite's NNAPI delegate maps them.

One entry per builtin the delegate takes (``tensorflow/lite/delegates/nnapi/
nnapi_delegate.cc``: ``Validate`` says which nodes it accepts, ``Map`` and
``AddOpsAndTensors`` which operation and operands it emits). Each entry is a
function ``(ctx, op) -> None`` that either raises :class:`Unsupported` with the
delegate's reason or emits the operation through ``ctx`` (a
:class:`~nnhal.importers.tflite.convert.OpContext`).

The target is Android 11 (API 30, NNAPI 1.3, what NN HAL 1.3 drivers serve):
int8 tensors are TENSOR_QUANT8_ASYMM_SIGNED, int8 per-channel weights
TENSOR_QUANT8_SYMM_PER_CHANNEL, rank-0 tensors become shape [1]. Checks that
only matter below API 30 are kept with their API level so the minimum
Android version of each mapping is reported.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from nnhal.types import OperandType as T

if TYPE_CHECKING:  # pragma: no cover
    from nnhal.importers.tflite.convert import OpContext
    from nnhal.importers.tflite.reader import TfOperator

__all__ = ["MAPPERS", "MIN_API", "Unsupported"]

# tflite.TensorType codes used here
FLOAT32, FLOAT16, INT32, UINT8, INT64, BOOL, INT16, INT8 = 0, 1, 2, 3, 4, 6, 7, 9
QUANT8 = (UINT8, INT8)


class Unsupported(Exception):
    """The delegate would leave this node to TFLite's CPU kernels; the message says why."""


#: builtin -> the lowest Android API level at which the delegate maps it
MIN_API: dict[str, int] = {}

MAPPERS: dict[str, Callable[[OpContext, TfOperator], None]] = {}


def _op(*names: str, api: int = 27) -> Callable:
    def register(fn: Callable) -> Callable:
        for n in names:
            MAPPERS[n] = fn
            MIN_API[n] = api
        return fn

    return register


# ---- shared checks -------------------------------------------------------

_FUSE = {0: 0, 1: 1, 2: 2, 3: 3}  # TFLite ActivationFunctionType -> NNAPI FuseCode
_ACT_NAMES = {4: "TANH", 5: "SIGN_BIT"}


def fuse_code(act: int) -> int:
    if act not in _FUSE:
        raise Unsupported(f"fused activation {_ACT_NAMES.get(act, act)} has no NNAPI FuseCode")
    return _FUSE[act]


def padding_code(pad: int) -> int:
    # schema Padding SAME=0, VALID=1; NNAPI PaddingCode SAME=1, VALID=2
    if pad not in (0, 1):
        raise Unsupported(f"unknown padding {pad}")
    return pad + 1


def max_version(op: TfOperator, v: int) -> None:
    if op.version > v:
        raise Unsupported(f"operator version {op.version} is higher than {v}")


def expect_type(ctx: OpContext, tensor: int, allowed: tuple[int, ...], what: str = "input") -> int:
    t = ctx.tensor(tensor)
    if t.type not in allowed:
        names = "/".join(_TYPE_NAMES[a] for a in allowed)
        raise Unsupported(f"{what} {t.name!r} is {t.type_name}; the delegate takes {names}")
    return t.type


_TYPE_NAMES = {
    FLOAT32: "FLOAT32",
    FLOAT16: "FLOAT16",
    INT32: "INT32",
    UINT8: "UINT8",
    INT64: "INT64",
    BOOL: "BOOL",
    INT16: "INT16",
    INT8: "INT8",
}
FLOAT_Q8 = (FLOAT32, UINT8, INT8)
FLOAT_Q8_I32 = (FLOAT32, UINT8, INT8, INT32)


def need_const(ctx: OpContext, tensor: int, what: str) -> np.ndarray:
    t = ctx.tensor(tensor)
    if not ctx.is_constant(tensor):
        raise Unsupported(f"{what} {t.name!r} must be constant (dynamically-sized tensors)")
    return ctx.value(tensor)


def is_hybrid(ctx: OpContext, op: TfOperator, weights: int) -> bool:
    return (
        ctx.tensor(op.inputs[0]).type == FLOAT32 and ctx.tensor(op.inputs[weights]).type in QUANT8
    )


# ---- convolutions and fully connected -----------------------------------


def _bias(ctx: OpContext, op: TfOperator, pos: int, channels: int) -> Any:
    """The bias operand: the node's own, or zeros the way the delegate adds them."""
    if len(op.inputs) > pos and op.inputs[pos] != -1:
        return ctx.input(op.inputs[pos], bias_of=(op.inputs[0], op.inputs[1]))
    return ctx.zero_bias(op.inputs[0], op.inputs[1], channels)


@_op("CONV_2D")
def conv_2d(ctx: OpContext, op: TfOperator) -> None:
    max_version(op, 3)
    if is_hybrid(ctx, op, 1):
        raise Unsupported("hybrid (float input, quantized weights): NNAPI 1.3 has no such CONV_2D")
    o = op.options
    ins = [ctx.input(op.inputs[0]), ctx.input(op.inputs[1])]
    ins.append(_bias(ctx, op, 2, ctx.tensor(op.inputs[1]).shape[0]))
    ins += ctx.scalars(
        T.INT32,
        padding_code(o.Padding()),
        o.StrideW(),
        o.StrideH(),
        fuse_code(o.FusedActivationFunction()),
    )
    if o.DilationWFactor() != 1 or o.DilationHFactor() != 1:
        ins += ctx.scalars(T.BOOL, False)
        ins += ctx.scalars(T.INT32, o.DilationWFactor(), o.DilationHFactor())
    ctx.emit("CONV_2D", ins, op.outputs)


@_op("DEPTHWISE_CONV_2D")
def depthwise_conv_2d(ctx: OpContext, op: TfOperator) -> None:
    max_version(op, 3)
    if is_hybrid(ctx, op, 1):
        raise Unsupported("hybrid (float input, quantized weights) depthwise convolution")
    o = op.options
    ins = [ctx.input(op.inputs[0]), ctx.input(op.inputs[1])]
    ins.append(_bias(ctx, op, 2, ctx.tensor(op.inputs[1]).shape[3]))
    ins += ctx.scalars(
        T.INT32,
        padding_code(o.Padding()),
        o.StrideW(),
        o.StrideH(),
        o.DepthMultiplier(),
        fuse_code(o.FusedActivationFunction()),
    )
    if o.DilationWFactor() != 1 or o.DilationHFactor() != 1:
        ins += ctx.scalars(T.BOOL, False)
        ins += ctx.scalars(T.INT32, o.DilationWFactor(), o.DilationHFactor())
    ctx.emit("DEPTHWISE_CONV_2D", ins, op.outputs)


@_op("FULLY_CONNECTED")
def fully_connected(ctx: OpContext, op: TfOperator) -> None:
    max_version(op, 5)
    if ctx.tensor(op.outputs[0]).type == INT16:
        raise Unsupported("Unsupported output of type kTfLiteInt16")
    if is_hybrid(ctx, op, 1):
        raise Unsupported(
            "hybrid (float input, quantized weights): NNAPI 1.3 has no such FULLY_CONNECTED"
        )
    if ctx.tensor(op.inputs[1]).per_channel:
        raise Unsupported(
            "per-channel quantized weights: NNAPI FULLY_CONNECTED takes per-tensor weights only"
        )
    o = op.options
    if o is not None and o.WeightsFormat() != 0:
        raise Unsupported("shuffled weights format")
    ins = [ctx.input(op.inputs[0]), ctx.input(op.inputs[1])]
    ins.append(_bias(ctx, op, 2, ctx.tensor(op.inputs[1]).shape[0]))
    ins += ctx.scalars(T.INT32, fuse_code(o.FusedActivationFunction() if o else 0))
    if o is not None and o.KeepNumDims():
        out = ctx.tensor(op.outputs[0])
        units = out.shape[-1]
        flat = ctx.temporary_like(op.outputs[0], (int(np.prod(out.shape)) // units, units))
        ctx.emit("FULLY_CONNECTED", ins, [flat], raw_outputs=True)
        shape = ctx.const_vector(np.array(out.shape, np.int32))
        ctx.emit("RESHAPE", [flat, shape], op.outputs)
        return
    ctx.emit("FULLY_CONNECTED", ins, op.outputs)


@_op("TRANSPOSE_CONV", api=29)
def transpose_conv(ctx: OpContext, op: TfOperator) -> None:
    max_version(op, 3)
    shape = need_const(ctx, op.inputs[0], "output shape")
    need_const(ctx, op.inputs[1], "filter")
    o = op.options
    ins = [ctx.input(op.inputs[2]), ctx.input(op.inputs[1], force_per_channel=True)]
    if len(op.inputs) > 3 and op.inputs[3] != -1:
        ins.append(ctx.input(op.inputs[3], bias_of=(op.inputs[2], op.inputs[1])))
    else:
        ins.append(ctx.zero_bias(op.inputs[2], op.inputs[1], int(np.ravel(shape)[3])))
    ins.append(ctx.input(op.inputs[0]))
    ins += ctx.scalars(T.INT32, padding_code(o.Padding()), o.StrideW(), o.StrideH(), 0)
    ins += ctx.scalars(T.BOOL, False)
    ctx.emit("TRANSPOSE_CONV_2D", ins, op.outputs)


# ---- pooling --------------------------------------------------------------


def _pool(nn: str) -> Callable:
    def mapper(ctx: OpContext, op: TfOperator) -> None:
        max_version(op, 2)
        expect_type(ctx, op.inputs[0], FLOAT32 if nn == "L2_POOL_2D" else FLOAT_Q8)
        o = op.options
        if (
            nn == "AVERAGE_POOL_2D"
            and ctx.tensor(op.inputs[0]).type in QUANT8
            and o.FilterWidth() * o.FilterHeight() > 256
            and not ctx.accelerator_specified
        ):
            raise Unsupported("Large filter window would overflow on the reference CPU path")
        ins = [ctx.input(op.inputs[0])]
        ins += ctx.scalars(
            T.INT32,
            padding_code(o.Padding()),
            o.StrideW(),
            o.StrideH(),
            o.FilterWidth(),
            o.FilterHeight(),
            fuse_code(o.FusedActivationFunction()),
        )
        ctx.emit(nn, ins, op.outputs)

    return mapper


_op("AVERAGE_POOL_2D")(_pool("AVERAGE_POOL_2D"))
_op("MAX_POOL_2D")(_pool("MAX_POOL_2D"))
_op("L2_POOL_2D")(_pool("L2_POOL_2D"))


# ---- elementwise ------------------------------------------------------------


def _binary(nn: str, types: tuple[int, ...], version: int, act: bool = True) -> Callable:
    def mapper(ctx: OpContext, op: TfOperator) -> None:
        max_version(op, version)
        t = expect_type(ctx, op.inputs[0], types)
        code = fuse_code(op.options.FusedActivationFunction()) if act and op.options else 0
        if t == INT32 and code != 0:
            raise Unsupported("No activation function supported for INT32 inputs")
        for i in op.inputs[:2]:
            if len(ctx.tensor(i).shape) > 4:
                raise Unsupported("Input rank must be <= 4")
        ins = [ctx.input(op.inputs[0]), ctx.input(op.inputs[1])]
        if act:
            ins += ctx.scalars(T.INT32, code)
        ctx.emit(nn, ins, op.outputs)

    return mapper


_op("ADD")(_binary("ADD", FLOAT_Q8_I32, 2))
_op("MUL")(_binary("MUL", FLOAT_Q8_I32, 3))
_op("SUB", api=28)(_binary("SUB", FLOAT_Q8_I32, 3))
_op("DIV", api=28)(_binary("DIV", (FLOAT32,), 1))
_op("MAXIMUM", api=29)(_binary("MAXIMUM", FLOAT_Q8_I32, 3, act=False))
_op("MINIMUM", api=29)(_binary("MINIMUM", FLOAT_Q8_I32, 3, act=False))
_op("POW", api=29)(_binary("POW", (FLOAT32,), 1, act=False))
for _name in ("LESS", "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "EQUAL", "NOT_EQUAL"):
    _op(_name, api=28)(_binary(_name, (FLOAT32, UINT8, INT8, BOOL, INT32), 2, act=False))
_op("LOGICAL_AND", api=29)(_binary("LOGICAL_AND", (BOOL,), 1, act=False))
_op("LOGICAL_OR", api=29)(_binary("LOGICAL_OR", (BOOL,), 1, act=False))


def _unary(nn: str, types: tuple[int, ...], version: int) -> Callable:
    def mapper(ctx: OpContext, op: TfOperator) -> None:
        max_version(op, version)
        expect_type(ctx, op.inputs[0], types)
        ctx.emit(nn, [ctx.input(op.inputs[0])], op.outputs)

    return mapper


_op("RELU")(_unary("RELU", FLOAT_Q8, 2))
_op("RELU6")(_unary("RELU6", FLOAT_Q8, 2))
_op("RELU_N1_TO_1")(_unary("RELU1", FLOAT_Q8, 2))
_op("LOGISTIC")(_unary("LOGISTIC", FLOAT_Q8, 2))
_op("TANH")(_unary("TANH", FLOAT_Q8, 2))
_op("HARD_SWISH", api=30)(_unary("HARD_SWISH", FLOAT_Q8, 99))
_op("FLOOR")(_unary("FLOOR", (FLOAT32,), 1))
for _name in ("ABS", "EXP", "LOG", "RSQRT", "SQRT", "SIN"):
    _op(_name, api=29)(_unary(_name, (FLOAT32,), 1))
_op("NEG", api=28)(_unary("NEG", (FLOAT32, INT32), 2))
_op("LOGICAL_NOT", api=29)(_unary("LOGICAL_NOT", (BOOL,), 1))
_op("L2_NORMALIZATION")(_unary("L2_NORMALIZATION", FLOAT_Q8, 2))


@_op("SOFTMAX")
def softmax(ctx: OpContext, op: TfOperator) -> None:
    max_version(op, 2)
    expect_type(ctx, op.inputs[0], FLOAT_Q8)
    if len(ctx.tensor(op.inputs[0]).shape) > 4:
        raise Unsupported("Input rank should be <= 4")
    beta = op.options.Beta() if op.options else 1.0
    ctx.emit("SOFTMAX", [ctx.input(op.inputs[0]), *ctx.scalars(T.FLOAT32, beta)], op.outputs)


@_op("LOG_SOFTMAX", api=29)
def log_softmax(ctx: OpContext, op: TfOperator) -> None:
    expect_type(ctx, op.inputs[0], (FLOAT32,))
    ins = [ctx.input(op.inputs[0]), *ctx.scalars(T.FLOAT32, 1.0), *ctx.scalars(T.INT32, -1)]
    ctx.emit("LOG_SOFTMAX", ins, op.outputs)


@_op("LEAKY_RELU", api=29)
def leaky_relu(ctx: OpContext, op: TfOperator) -> None:
    t = expect_type(ctx, op.inputs[0], FLOAT_Q8)
    alpha = op.options.Alpha()
    if t == FLOAT32:
        a = ctx.const_tensor(T.TENSOR_FLOAT32, np.array([alpha], np.float32))
    elif t == INT8:
        a = ctx.const_tensor(T.TENSOR_QUANT8_ASYMM_SIGNED, np.array([1], np.int8), scale=alpha)
    else:
        a = ctx.const_tensor(T.TENSOR_QUANT8_ASYMM, np.array([1], np.uint8), scale=alpha)
    ctx.emit("PRELU", [ctx.input(op.inputs[0]), a], op.outputs)


_op("PRELU", api=29)(_binary("PRELU", FLOAT_Q8, 1, act=False))


# ---- shapes and data movement ------------------------------------------------


@_op("RESHAPE")
def reshape(ctx: OpContext, op: TfOperator) -> None:
    expect_type(ctx, op.inputs[0], FLOAT_Q8)
    if len(op.inputs) >= 2 and op.inputs[1] != -1:
        shape = need_const(ctx, op.inputs[1], "shape input").astype(np.int32).ravel()
    else:
        shape = np.array(op.options.NewShapeAsNumpy() if op.options else [], np.int32)
        if len(shape) == 1 and shape[0] == 0:
            shape = shape[:0]
    if len(shape) == 0:
        raise Unsupported("New shape rank should be > 0")
    ctx.emit("RESHAPE", [ctx.input(op.inputs[0]), ctx.const_vector(shape)], op.outputs)


@_op("SQUEEZE", api=28)
def squeeze(ctx: OpContext, op: TfOperator) -> None:
    dims = np.array(
        op.options.SqueezeDimsAsNumpy() if op.options and op.options.SqueezeDimsLength() else [],
        np.int32,
    )
    ins = [ctx.input(op.inputs[0])]
    ins.append(ctx.const_vector(dims) if len(dims) else ctx.omitted(T.TENSOR_INT32))
    ctx.emit("SQUEEZE", ins, op.outputs)


@_op("CONCATENATION")
def concatenation(ctx: OpContext, op: TfOperator) -> None:
    max_version(op, 2)
    o = op.options
    if fuse_code(o.FusedActivationFunction()) != 0:
        raise Unsupported("No activation function supported")
    rank = len(ctx.tensor(op.inputs[0]).shape)
    if rank > 4:
        raise Unsupported("Input rank should be less than 4")
    expect_type(ctx, op.inputs[0], (FLOAT16, FLOAT32, UINT8, INT8))
    axis = o.Axis() + rank if o.Axis() < 0 else o.Axis()
    ins = [ctx.input(i) for i in op.inputs]
    ctx.emit("CONCATENATION", [*ins, *ctx.scalars(T.INT32, axis)], op.outputs)


@_op("MEAN", api=28)
def mean(ctx: OpContext, op: TfOperator) -> None:
    max_version(op, 2)
    expect_type(ctx, op.inputs[0], FLOAT_Q8)
    inp, out = ctx.tensor(op.inputs[0]), ctx.tensor(op.outputs[0])
    if not out.shape:
        raise Unsupported("NNAPI does not support generating a scalar as output for MEAN.")
    if inp.type in QUANT8 and (inp.scale != out.scale or inp.zero_point != out.zero_point):
        raise Unsupported(
            "NNAPI requires that the input and output have the same quantization parameters."
        )
    keep = int(bool(op.options.KeepDims())) if op.options else 0
    axes = ctx.axis_vector(op.inputs[1])
    ctx.emit("MEAN", [ctx.input(op.inputs[0]), axes, *ctx.scalars(T.INT32, keep)], op.outputs)


def _reduce(nn: str, types: tuple[int, ...]) -> Callable:
    def mapper(ctx: OpContext, op: TfOperator) -> None:
        expect_type(ctx, op.inputs[0], types)
        if not ctx.tensor(op.outputs[0]).shape:
            raise Unsupported("NNAPI does not support generating a scalar as output.")
        keep = bool(op.options.KeepDims()) if op.options else False
        ins = [ctx.input(op.inputs[0]), ctx.axis_vector(op.inputs[1]), *ctx.scalars(T.BOOL, keep)]
        ctx.emit(nn, ins, op.outputs)

    return mapper


_op("SUM", api=29)(_reduce("REDUCE_SUM", (FLOAT32,)))
_op("REDUCE_PROD", api=29)(_reduce("REDUCE_PROD", (FLOAT32,)))
_op("REDUCE_MAX", api=29)(_reduce("REDUCE_MAX", FLOAT_Q8))
_op("REDUCE_MIN", api=29)(_reduce("REDUCE_MIN", FLOAT_Q8))
_op("REDUCE_ANY", api=29)(_reduce("REDUCE_ANY", (BOOL,)))


@_op("PAD", "PADV2", api=28)
def pad(ctx: OpContext, op: TfOperator) -> None:
    max_version(op, 2)
    t = expect_type(ctx, op.inputs[0], FLOAT_Q8)
    if 0 in ctx.tensor(op.inputs[0]).shape:
        raise Unsupported("NN API pad ops do not support input tensors with no elements")
    ins = [ctx.input(op.inputs[0]), ctx.input(op.inputs[1])]
    if len(op.inputs) == 3 and op.inputs[2] != -1:
        value = np.ravel(need_const(ctx, op.inputs[2], "pad value"))[0]
        if t == FLOAT32:
            ins += ctx.scalars(T.FLOAT32, float(value))
        else:
            ins += ctx.scalars(T.INT32, int(value))
        ctx.emit("PAD_V2", ins, op.outputs)
    else:
        ctx.emit("PAD", ins, op.outputs)


@_op("TRANSPOSE", api=28)
def transpose(ctx: OpContext, op: TfOperator) -> None:
    max_version(op, 2)
    if len(op.inputs) < 2:
        raise Unsupported("Dynamically-sized tensors not supported.")
    need_const(ctx, op.inputs[1], "permutation")
    ctx.emit("TRANSPOSE", [ctx.input(op.inputs[0]), ctx.input(op.inputs[1])], op.outputs)


@_op("STRIDED_SLICE", api=28)
def strided_slice(ctx: OpContext, op: TfOperator) -> None:
    max_version(op, 2)
    o = op.options
    if o.EllipsisMask() or o.NewAxisMask():
        raise Unsupported("ellipsis_mask and new_axis_mask have no NNAPI operand")
    ins = [ctx.input(i) for i in op.inputs[:4]]
    ins += ctx.scalars(T.INT32, o.BeginMask(), o.EndMask(), o.ShrinkAxisMask())
    ctx.emit("STRIDED_SLICE", ins, op.outputs)


@_op("SLICE", api=29)
def slice_(ctx: OpContext, op: TfOperator) -> None:
    max_version(op, 2)
    expect_type(ctx, op.inputs[0], FLOAT_Q8_I32)
    expect_type(ctx, op.inputs[1], (INT32,), "begin")
    expect_type(ctx, op.inputs[2], (INT32,), "size")
    ctx.emit("SLICE", [ctx.input(i) for i in op.inputs[:3]], op.outputs)


@_op("GATHER", api=29)
def gather(ctx: OpContext, op: TfOperator) -> None:
    max_version(op, 2)
    expect_type(ctx, op.inputs[0], (FLOAT32, FLOAT16, INT32, UINT8, INT8))
    expect_type(ctx, op.inputs[1], (INT32,), "positions")
    if not ctx.tensor(op.inputs[1]).shape:
        raise Unsupported("0-dimension args are not supported by NNAPI.")
    if op.options is not None and op.options.BatchDims() != 0:
        raise Unsupported("batch_dims != 0 has no NNAPI operand")
    axis = op.options.Axis() if op.options else 0
    ins = [ctx.input(op.inputs[0]), *ctx.scalars(T.INT32, axis), ctx.input(op.inputs[1])]
    ctx.emit("GATHER", ins, op.outputs)


@_op("SPLIT", api=29)
def split(ctx: OpContext, op: TfOperator) -> None:
    max_version(op, 3)
    expect_type(ctx, op.inputs[1], (FLOAT32, UINT8, INT8, INT32))
    axis = int(np.ravel(need_const(ctx, op.inputs[0], "axis"))[0])
    ins = [ctx.input(op.inputs[1]), *ctx.scalars(T.INT32, axis, op.options.NumSplits())]
    ctx.emit("SPLIT", ins, op.outputs)


@_op("EXPAND_DIMS", api=29)
def expand_dims(ctx: OpContext, op: TfOperator) -> None:
    expect_type(ctx, op.inputs[0], (FLOAT32, FLOAT16, INT32, UINT8, INT8))
    axis = int(np.ravel(need_const(ctx, op.inputs[1], "axis"))[0])
    ctx.emit("EXPAND_DIMS", [ctx.input(op.inputs[0]), *ctx.scalars(T.INT32, axis)], op.outputs)


@_op("TILE", api=29)
def tile(ctx: OpContext, op: TfOperator) -> None:
    expect_type(ctx, op.inputs[0], FLOAT_Q8_I32)
    expect_type(ctx, op.inputs[1], (INT32,), "multipliers")
    ctx.emit("TILE", [ctx.input(op.inputs[0]), ctx.input(op.inputs[1])], op.outputs)


@_op("SPACE_TO_DEPTH", "DEPTH_TO_SPACE")
def space_depth(ctx: OpContext, op: TfOperator) -> None:
    expect_type(ctx, op.inputs[0], FLOAT_Q8)
    ins = [ctx.input(op.inputs[0]), *ctx.scalars(T.INT32, op.options.BlockSize())]
    ctx.emit(op.name, ins, op.outputs)


@_op("SPACE_TO_BATCH_ND", api=28)
def space_to_batch(ctx: OpContext, op: TfOperator) -> None:
    max_version(op, 2)
    ctx.emit("SPACE_TO_BATCH_ND", [ctx.input(i) for i in op.inputs[:3]], op.outputs)


@_op("BATCH_TO_SPACE_ND", api=28)
def batch_to_space(ctx: OpContext, op: TfOperator) -> None:
    max_version(op, 2)
    crops = need_const(ctx, op.inputs[2], "crops")
    if crops.size != 4 or np.any(crops != 0):
        raise Unsupported("All crops should be 0.")
    ctx.emit("BATCH_TO_SPACE_ND", [ctx.input(i) for i in op.inputs[:2]], op.outputs)


def _resize(nn: str) -> Callable:
    def mapper(ctx: OpContext, op: TfOperator) -> None:
        max_version(op, 3)
        expect_type(ctx, op.inputs[0], FLOAT_Q8)
        if len(ctx.tensor(op.inputs[0]).shape) != 4:
            raise Unsupported("Input should have rank 4")
        if len(op.inputs) < 2:
            raise Unsupported("Expected at least 2 inputs")
        size = np.ravel(need_const(ctx, op.inputs[1], "size input"))
        o = op.options
        align, half = bool(o.AlignCorners()), bool(o.HalfPixelCenters())
        ins = [ctx.input(op.inputs[0]), *ctx.scalars(T.INT32, int(size[1]), int(size[0]))]
        if nn == "RESIZE_NEAREST_NEIGHBOR":
            ins += ctx.scalars(T.BOOL, False)
            if align or half:
                ins += ctx.scalars(T.BOOL, align, half)
        elif align or half:
            ins += ctx.scalars(T.BOOL, False, align, half)
        ctx.emit(nn, ins, op.outputs)

    return mapper


_op("RESIZE_BILINEAR")(_resize("RESIZE_BILINEAR"))
_op("RESIZE_NEAREST_NEIGHBOR", api=29)(_resize("RESIZE_NEAREST_NEIGHBOR"))


def _arg(nn: str) -> Callable:
    def mapper(ctx: OpContext, op: TfOperator) -> None:
        max_version(op, 2)
        expect_type(ctx, op.inputs[0], (FLOAT16, FLOAT32, INT32, UINT8, INT8))
        if ctx.tensor(op.outputs[0]).type != INT32:
            raise Unsupported("NNAPI only supports int32 output.")
        axis = int(np.ravel(need_const(ctx, op.inputs[1], "axis"))[0])
        ctx.emit(nn, [ctx.input(op.inputs[0]), *ctx.scalars(T.INT32, axis)], op.outputs)

    return mapper


_op("ARG_MAX", api=29)(_arg("ARGMAX"))
_op("ARG_MIN", api=29)(_arg("ARGMIN"))


@_op("TOPK_V2", api=29)
def topk(ctx: OpContext, op: TfOperator) -> None:
    expect_type(ctx, op.inputs[0], FLOAT_Q8_I32)
    k = int(np.ravel(need_const(ctx, op.inputs[1], "K param"))[0])
    ctx.emit("TOPK_V2", [ctx.input(op.inputs[0]), *ctx.scalars(T.INT32, k)], op.outputs)


@_op("SELECT", api=28)
def select(ctx: OpContext, op: TfOperator) -> None:
    expect_type(ctx, op.inputs[1], FLOAT_Q8_I32, "value")
    if ctx.tensor(op.inputs[0]).shape != ctx.tensor(op.inputs[1]).shape:
        raise Unsupported("Condition and inputs tensors should have the same shape")
    ctx.emit("SELECT", [ctx.input(i) for i in op.inputs[:3]], op.outputs)


@_op("CAST", api=29)
def cast(ctx: OpContext, op: TfOperator) -> None:
    expect_type(ctx, op.inputs[0], FLOAT_Q8_I32)
    expect_type(ctx, op.outputs[0], FLOAT_Q8_I32, "output")
    ctx.emit("CAST", [ctx.input(op.inputs[0])], op.outputs)


# ---- quantization ------------------------------------------------------------


@_op("QUANTIZE", api=29)
def quantize(ctx: OpContext, op: TfOperator) -> None:
    max_version(op, 2)
    t = expect_type(ctx, op.inputs[0], FLOAT_Q8, "value")
    if ctx.tensor(op.outputs[0]).scale <= 0:
        raise Unsupported("Quantization scale should be > 0.")
    x = ctx.input(op.inputs[0])
    if t in QUANT8:  # NNAPI quantizes only from float: dequantize first, as the delegate does
        x = ctx.dequantized(op.inputs[0])
    ctx.emit("QUANTIZE", [x], op.outputs)


@_op("DEQUANTIZE")
def dequantize(ctx: OpContext, op: TfOperator) -> None:
    src = ctx.tensor(op.inputs[0])
    if src.type != FLOAT16:
        if op.version > 2:
            raise Unsupported("Supported op versions are 1 and 2 only")
        expect_type(ctx, op.inputs[0], QUANT8)
    ctx.emit("DEQUANTIZE", [ctx.input(op.inputs[0])], op.outputs)


# ---- recurrent -------------------------------------------------------------


@_op("UNIDIRECTIONAL_SEQUENCE_LSTM", api=29)
def unidirectional_lstm(ctx: OpContext, op: TfOperator) -> None:
    max_version(op, 2)
    if is_hybrid(ctx, op, 2):
        raise Unsupported("Hybrid version of this op is not supported by NN API.")
    if len(op.inputs) not in (20, 24):
        raise Unsupported("Supporting only operation with 20 or 24 inputs")
    ins = [ctx.input(i) if i != -1 else ctx.omitted(T.TENSOR_FLOAT32) for i in op.inputs[:20]]
    o = op.options
    # the LSTM activation operand is TFLite's ActivationFunctionType itself (4 = tanh)
    ins += ctx.scalars(T.INT32, o.FusedActivationFunction())
    ins += ctx.scalars(T.FLOAT32, o.CellClip(), o.ProjClip())
    ins += ctx.scalars(T.BOOL, bool(o.TimeMajor()))
    for k in range(20, 24):
        i = op.inputs[k] if len(op.inputs) == 24 else -1
        ins.append(ctx.input(i) if i != -1 else ctx.omitted(T.TENSOR_FLOAT32))
    ctx.emit("UNIDIRECTIONAL_SEQUENCE_LSTM", ins, op.outputs)


# ---- control flow (beyond the delegate: NNAPI 1.3 has WHILE and IF) -----------


@_op("WHILE", api=30)
def while_(ctx: OpContext, op: TfOperator) -> None:
    o = op.options
    cond = ctx.subgraph_operand(o.CondSubgraphIndex(), "condition")
    body = ctx.subgraph_operand(o.BodySubgraphIndex(), "body")
    ctx.emit("WHILE", [cond, body, *(ctx.input(i) for i in op.inputs)], op.outputs)


@_op("IF", api=30)
def if_(ctx: OpContext, op: TfOperator) -> None:
    o = op.options
    then = ctx.subgraph_operand(o.ThenSubgraphIndex(), "then")
    else_ = ctx.subgraph_operand(o.ElseSubgraphIndex(), "else")
    cond = ctx.input(op.inputs[0])
    ctx.emit("IF", [cond, then, else_, *(ctx.input(i) for i in op.inputs[1:])], op.outputs)
