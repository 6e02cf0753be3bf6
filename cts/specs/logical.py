"""Specs: LOGICAL_AND, LOGICAL_OR (with broadcasting), LOGICAL_NOT."""

from nnhal.cts.dsl import BOOL8, spec

_T, _F = True, False


@spec("logical_and_broadcast")
def logical_and_broadcast(s):
    """LOGICAL_AND [2, 2] with [2]."""
    a, b = s.input("a", BOOL8, [2, 2]), s.input("b", BOOL8, [2])
    out = s.output("out", BOOL8, [2, 2])
    s.op("LOGICAL_AND", [a, b], [out])
    s.example({a: [_T, _F, _T, _T], b: [_T, _F]}, {out: [_T, _F, _T, _F]})


@spec("logical_or")
def logical_or(s):
    """LOGICAL_OR of two [4] tensors, one constant."""
    a = s.input("a", BOOL8, [4])
    b = s.const("b", BOOL8, [_F, _T, _F, _T], [4])
    out = s.output("out", BOOL8, [4])
    s.op("LOGICAL_OR", [a, b], [out])
    s.example({a: [_F, _F, _T, _T]}, {out: [_F, _T, _T, _T]})


@spec("logical_not")
def logical_not(s):
    """LOGICAL_NOT of a [1, 3] tensor."""
    a = s.input("a", BOOL8, [1, 3])
    out = s.output("out", BOOL8, [1, 3])
    s.op("LOGICAL_NOT", [a], [out])
    s.example({a: [_T, _F, _T]}, {out: [_F, _T, _F]})
