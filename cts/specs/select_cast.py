"""Specs: SELECT and CAST.

CAST converts raw values (quantization parameters are ignored; floats
truncate toward zero; conversions to TENSOR_QUANT8_ASYMM clamp to [0, 255]),
so its specs are written per type pair, without data-type variations.
"""

from nnhal.cts.dsl import BOOL8, F16, F32, FLOAT_AND_QUANT8, I32, Q8A, Q8S, spec


@spec("select", variations=FLOAT_AND_QUANT8, quant=(0.5, 128))
def select(s):
    """SELECT(cond, a, b) elementwise on [2, 2]."""
    c = s.input("cond", BOOL8, [2, 2])
    a, b = s.input("a", F32, [2, 2]), s.input("b", F32, [2, 2])
    out = s.output("out", F32, [2, 2])
    s.op("SELECT", [c, a, b], [out])
    s.example(
        {c: [True, False, False, True], a: [1, 2, 3, 4], b: [-1, -2, -3, -4]},
        {out: [1, -2, -3, 4]},
    )


@spec("select_int32")
def select_int32(s):
    """SELECT on TENSOR_INT32 with a constant condition."""
    c = s.const("cond", BOOL8, [False, True, True], [3])
    a, b = s.input("a", I32, [3]), s.input("b", I32, [3])
    out = s.output("out", I32, [3])
    s.op("SELECT", [c, a, b], [out])
    s.example({a: [10, 20, 30], b: [-10, -20, -30]}, {out: [-10, 20, 30]})


def _cast(name, src, dst, values, expected, src_q=(0.0, 0), dst_q=(0.0, 0)):
    @spec(name)
    def build(s):
        a = s.input("in", src, [len(values)], scale=src_q[0], zero_point=src_q[1])
        out = s.output("out", dst, [len(values)], scale=dst_q[0], zero_point=dst_q[1])
        s.op("CAST", [a], [out])
        s.example({a: values}, {out: expected})

    return build


SPECS = [
    _cast("cast_float32_to_int32", F32, I32, [1.9, -1.9, 0.4, 100.5], [1, -1, 0, 100]),
    _cast("cast_int32_to_float32", I32, F32, [1, -7, 0, 1 << 20], [1, -7, 0, 1 << 20]),
    _cast("cast_float32_to_float16", F32, F16, [0.5, -2, 1024, 3.25], [0.5, -2, 1024, 3.25]),
    _cast("cast_float16_to_float32", F16, F32, [0.5, -2, 1024, 3.25], [0.5, -2, 1024, 3.25]),
    _cast(
        "cast_float32_to_quant8", F32, Q8A, [-3.5, 0, 17.9, 300], [0, 0, 17, 255], dst_q=(0.5, 128)
    ),
    _cast("cast_quant8_to_float32", Q8A, F32, [0, 1, 128, 255], [0, 1, 128, 255], src_q=(0.25, 7)),
    _cast("cast_int32_to_quant8", I32, Q8A, [-5, 5, 255, 1000], [0, 5, 255, 255], dst_q=(1.0, 0)),
    _cast("cast_bool8_identity", BOOL8, BOOL8, [True, False, True], [True, False, True]),
    _cast(
        "cast_quant8_signed_identity",
        Q8S,
        Q8S,
        [-128, 0, 127],
        [-128, 0, 127],
        src_q=(0.5, 1),
        dst_q=(0.5, 1),
    ),
]
