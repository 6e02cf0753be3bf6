"""Specs: EQUAL, NOT_EQUAL, LESS, LESS_EQUAL, GREATER, GREATER_EQUAL.

Each comparison gets a float spec (with broadcasting, and inputs of
different quantization in the quantized variations), an int32 spec and a
bool8 spec; the expected values come from numpy so the six stay in step.
"""

import numpy as np
from nnhal.cts.dsl import BOOL8, F32, FLOAT_AND_QUANT8, I32, spec

_NUMPY = {
    "EQUAL": np.equal,
    "NOT_EQUAL": np.not_equal,
    "LESS": np.less,
    "LESS_EQUAL": np.less_equal,
    "GREATER": np.greater,
    "GREATER_EQUAL": np.greater_equal,
}

_A = np.array([[1.0, -2.5, 3.0], [0.0, 7.5, -8.0]])
_B = np.array([1.0, 2.0, -8.0])


def _float_spec(op: str):
    @spec(f"{op.lower()}_broadcast", variations=FLOAT_AND_QUANT8, quant=(0.5, 128))
    def build(s):
        a = s.input("a", F32, [2, 3])
        b = s.input("b", F32, [3], quant=(1.0, 100))
        out = s.output("out", BOOL8, [2, 3])
        s.op(op, [a, b], [out])
        s.example({a: _A.ravel(), b: _B}, {out: _NUMPY[op](_A, _B).ravel()})

    build.description = f"{op} [2, 3] vs [3], float and quantized (different scales)"
    return build


def _int_spec(op: str):
    @spec(f"{op.lower()}_int32")
    def build(s):
        a, b = s.input("a", I32, [4]), s.input("b", I32, [4])
        out = s.output("out", BOOL8, [4])
        s.op(op, [a, b], [out])
        x, y = np.array([1, -5, 2**31 - 1, 0]), np.array([1, 5, -(2**31), -1])
        s.example({a: x, b: y}, {out: _NUMPY[op](x, y)})

    build.description = f"{op} of TENSOR_INT32"
    return build


def _bool_spec(op: str):
    @spec(f"{op.lower()}_bool8")
    def build(s):
        a, b = s.input("a", BOOL8, [4]), s.input("b", BOOL8, [4])
        out = s.output("out", BOOL8, [4])
        s.op(op, [a, b], [out])
        x, y = np.array([0, 0, 1, 1], bool), np.array([0, 1, 0, 1], bool)
        s.example({a: x, b: y}, {out: _NUMPY[op](x, y)})

    build.description = f"{op} of TENSOR_BOOL8"
    return build


SPECS = [make(op) for op in _NUMPY for make in (_float_spec, _int_spec, _bool_spec)]
