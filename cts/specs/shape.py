"""Specs: RESHAPE, CONCATENATION, SLICE."""

from nnhal.cts.dsl import F32, FLOAT_AND_QUANT8, I32, spec

Q = (0.5, 128)


@spec("reshape", variations=FLOAT_AND_QUANT8, quant=Q)
def reshape(s):
    """RESHAPE [2, 3] -> [3, 2] with a constant shape."""
    x = s.input("in", F32, [2, 3])
    shape = s.const("shape", I32, [3, 2], [2])
    out = s.output("out", F32, [3, 2])
    s.op("RESHAPE", [x, shape], [out])
    s.example({x: [1, 2, 3, 4, 5, 6]}, {out: [1, 2, 3, 4, 5, 6]})


@spec("reshape_stretch", variations=FLOAT_AND_QUANT8, quant=Q)
def reshape_stretch(s):
    """RESHAPE [1, 2, 2] -> [-1] (one axis inferred)."""
    x = s.input("in", F32, [1, 2, 2])
    shape = s.const("shape", I32, [-1], [1])
    out = s.output("out", F32, [4])
    s.op("RESHAPE", [x, shape], [out])
    s.example({x: [-1, 0.5, 2, 3]}, {out: [-1, 0.5, 2, 3]})


@spec("concatenation_axis0", variations=FLOAT_AND_QUANT8, quant=Q)
def concatenation_axis0(s):
    """CONCATENATION of three tensors along axis 0 (one constant)."""
    a, b = s.input("a", F32, [1, 2]), s.input("b", F32, [2, 2])
    c = s.const("c", F32, [9, 10], [1, 2])
    out = s.output("out", F32, [4, 2])
    s.op("CONCATENATION", [a, b, c, s.int32(0)], [out])
    s.example({a: [1, 2], b: [3, 4, 5, 6]}, {out: [1, 2, 3, 4, 5, 6, 9, 10]})


@spec("concatenation_axis1", variations=FLOAT_AND_QUANT8, quant=Q)
def concatenation_axis1(s):
    """CONCATENATION along the last axis (1) of rank-2 tensors."""
    a, b = s.input("a", F32, [2, 1]), s.input("b", F32, [2, 2])
    out = s.output("out", F32, [2, 3])
    s.op("CONCATENATION", [a, b, s.int32(1)], [out])
    s.example({a: [1, 2], b: [3, 4, 5, 6]}, {out: [1, 3, 4, 2, 5, 6]})


@spec("slice", variations=FLOAT_AND_QUANT8, quant=Q)
def slice_(s):
    """SLICE [3, 3] from [1, 0] size [2, 2]."""
    x = s.input("in", F32, [3, 3])
    begin = s.const("begin", I32, [1, 0], [2])
    size = s.const("size", I32, [2, 2], [2])
    out = s.output("out", F32, [2, 2])
    s.op("SLICE", [x, begin, size], [out])
    s.example({x: [1, 2, 3, 4, 5, 6, 7, 8, 9]}, {out: [4, 5, 7, 8]})


@spec("slice_to_end_int32")
def slice_to_end_int32(s):
    """SLICE of TENSOR_INT32 with size -1 (to the end of the axis)."""
    x = s.input("in", I32, [2, 4])
    begin = s.const("begin", I32, [0, 1], [2])
    size = s.const("size", I32, [1, -1], [2])
    out = s.output("out", I32, [1, 3])
    s.op("SLICE", [x, begin, size], [out])
    s.example({x: [1, 2, 3, 4, 5, 6, 7, 8]}, {out: [2, 3, 4]})
