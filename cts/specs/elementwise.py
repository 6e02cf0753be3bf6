"""Specs: ADD, SUB, MUL, DIV (broadcasting, fused activations, int32).

Float values are multiples of 0.5 inside [-64, 63.5] so that the quantized
variations (scale 0.5, zero point 128 / 0) represent them exactly.
"""

from nnhal.cts.dsl import F32, FLOAT_AND_QUANT8, FLOAT_VARIATIONS, I32, spec

Q = (0.5, 128)


@spec("add", variations=FLOAT_AND_QUANT8, quant=Q)
def add(s):
    """ADD of two [2, 2] tensors, no activation."""
    a, b = s.input("a", F32, [2, 2]), s.input("b", F32, [2, 2])
    out = s.output("out", F32, [2, 2])
    s.op("ADD", [a, b, s.int32(0)], [out])
    s.example({a: [1, 2, -3, 4.5], b: [0.5, -6, 7, 8]}, {out: [1.5, -4, 4, 12.5]})
    s.example({a: [0, 0, 0, 0], b: [-1, 1, -2.5, 2.5]}, {out: [-1, 1, -2.5, 2.5]})


@spec("add_broadcast_relu", variations=FLOAT_AND_QUANT8, quant=Q)
def add_broadcast_relu(s):
    """ADD [2, 3] + [3] with RELU: broadcasting over the leading axis."""
    a, b = s.input("a", F32, [2, 3]), s.input("b", F32, [3])
    out = s.output("out", F32, [2, 3])
    s.op("ADD", [a, b, s.int32(1)], [out])
    s.example({a: [1, -2, 3, -4, 5, -6], b: [-1, 1, 0.5]}, {out: [0, 0, 3.5, 0, 6, 0]})


@spec("add_int32", quant=None)
def add_int32(s):
    """ADD of TENSOR_INT32 (HAL 1.3), broadcast [2, 2] + [1, 2]."""
    a, b = s.input("a", I32, [2, 2]), s.input("b", I32, [1, 2])
    out = s.output("out", I32, [2, 2])
    s.op("ADD", [a, b, s.int32(0)], [out])
    s.example({a: [1, -2, 300, 2**30], b: [10, -20]}, {out: [11, -22, 310, 2**30 - 20]})


@spec("sub_relu6", variations=FLOAT_AND_QUANT8, quant=Q)
def sub_relu6(s):
    """SUB with RELU6, constant second operand."""
    a = s.input("a", F32, [1, 4])
    b = s.const("b", F32, [1, -2, 3, -10], [1, 4])
    out = s.output("out", F32, [1, 4])
    s.op("SUB", [a, b, s.int32(3)], [out])
    s.example({a: [3, 1, 3, -1]}, {out: [2, 3, 0, 6]})


@spec("sub_broadcast", variations=FLOAT_AND_QUANT8, quant=Q)
def sub_broadcast(s):
    """SUB [2, 1, 2] - [3, 1]: both operands broadcast."""
    a, b = s.input("a", F32, [2, 1, 2]), s.input("b", F32, [3, 1])
    out = s.output("out", F32, [2, 3, 2])
    s.op("SUB", [a, b, s.int32(0)], [out])
    s.example(
        {a: [1, 2, 3, 4], b: [0, 1, 2]},
        {out: [1, 2, 0, 1, -1, 0, 3, 4, 2, 3, 1, 2]},
    )


@spec("sub_int32")
def sub_int32(s):
    """SUB of TENSOR_INT32."""
    a, b = s.input("a", I32, [3]), s.input("b", I32, [3])
    out = s.output("out", I32, [3])
    s.op("SUB", [a, b, s.int32(0)], [out])
    s.example({a: [5, -5, 0], b: [7, -7, -(2**31) + 1]}, {out: [-2, 2, 2**31 - 1]})


@spec("mul", variations=FLOAT_AND_QUANT8, quant=Q)
def mul(s):
    """MUL [2, 2] * [2, 2]; the quantized output scale is above the product of input scales."""
    a, b = s.input("a", F32, [2, 2]), s.input("b", F32, [2, 2])
    out = s.output("out", F32, [2, 2], quant=(1.0, 128))
    s.op("MUL", [a, b, s.int32(0)], [out])
    s.example({a: [1, 2, -3, 4], b: [2, 0.5, 1, -2]}, {out: [2, 1, -3, -8]})


@spec("mul_broadcast_relu1", variations=FLOAT_AND_QUANT8, quant=Q)
def mul_broadcast_relu1(s):
    """MUL [2, 2] * [1] with RELU1 (clamp to [-1, 1])."""
    a, b = s.input("a", F32, [2, 2]), s.input("b", F32, [1])
    out = s.output("out", F32, [2, 2], quant=(1.0, 128))
    s.op("MUL", [a, b, s.int32(2)], [out])
    s.example({a: [0.5, -0.5, 4, -4], b: [2]}, {out: [1, -1, 1, -1]})


@spec("mul_int32")
def mul_int32(s):
    """MUL of TENSOR_INT32 with broadcasting."""
    a, b = s.input("a", I32, [2, 2]), s.input("b", I32, [2])
    out = s.output("out", I32, [2, 2])
    s.op("MUL", [a, b, s.int32(0)], [out])
    s.example({a: [1, -2, 3, 40000], b: [-3, 50000]}, {out: [-3, -100000, -9, 2_000_000_000]})


@spec("div", variations=FLOAT_VARIATIONS)
def div(s):
    """DIV of float tensors with broadcasting."""
    a, b = s.input("a", F32, [2, 2]), s.input("b", F32, [2])
    out = s.output("out", F32, [2, 2])
    s.op("DIV", [a, b, s.int32(0)], [out])
    s.example({a: [1, 2, -3, 4], b: [2, -0.5]}, {out: [0.5, -4, -1.5, -8]})


@spec("div_relu", variations=FLOAT_VARIATIONS)
def div_relu(s):
    """DIV with RELU and a constant divisor."""
    a = s.input("a", F32, [4])
    b = s.const("b", F32, [4, -4, 0.25, 8], [4])
    out = s.output("out", F32, [4])
    s.op("DIV", [a, b, s.int32(1)], [out])
    s.example({a: [2, 2, 1, -1]}, {out: [0.5, 0, 4, 0]})


@spec("div_int32")
def div_int32(s):
    """DIV of TENSOR_INT32 rounds toward negative infinity."""
    a, b = s.input("a", I32, [4]), s.input("b", I32, [4])
    out = s.output("out", I32, [4])
    s.op("DIV", [a, b, s.int32(0)], [out])
    s.example({a: [7, -7, 7, -7], b: [2, 2, -2, -2]}, {out: [3, -4, -4, 3]})
