"""Test helpers for the LSTM family: a textbook float64 LSTM cell, operand
specs with omitted inputs, and a harness for operations with several outputs.

The reference is written gate by gate from the NNAPI documentation (no
stacking, no reordering, float64), so it shares nothing with the kernels
under test but the math.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pytest
from nnhal.driver.ops.registry import OpContext, OperandInfo, OperationDef, validate_operation
from ops_harness import RNG, WHERE, X, scalar

from nnhal.errors import InvalidArgument
from nnhal.types import OPERAND_TYPE_INFO
from nnhal.types import OperandType as T

F32, F16 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16
GATES = ("input", "forget", "cell", "output")


# ---------------------------------------------------------------------------
# Operand specs
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Omit:
    """An optional input: NO_VALUE (``declared=False``) or a model input that the
    execution leaves without a value (``declared=True``: dims known, value None)."""

    type: T
    dims: tuple | None = None
    declared: bool = False

    def info(self) -> OperandInfo:
        if self.declared:
            return OperandInfo(self.type, self.dims)
        return OperandInfo(self.type, None, omitted=True)

    @property
    def is_tensor(self) -> bool:
        return not OPERAND_TYPE_INFO[self.type].is_scalar

    data = None


def tensor(type_: T, data, *, const=False, dims="data", scale=0.0, zp=0) -> X:
    arr = np.asarray(data, dtype=OPERAND_TYPE_INFO[type_].dtype)
    return X(type_, arr, dims, scale, zp, const)


def rand(shape, scale=0.5) -> np.ndarray:
    return RNG.uniform(-scale, scale, shape)


def fscalar(value, type_: T) -> X:
    """cell_clip/proj_clip: FLOAT32 with float32 tensors, FLOAT16 with float16."""
    return scalar(value, T.FLOAT32 if type_ == F32 else T.FLOAT16)


# ---------------------------------------------------------------------------
# Harness for several outputs
# ---------------------------------------------------------------------------


def context(definition: OperationDef, ins: list, outs: list) -> OpContext:
    return OpContext(definition, [x.info() for x in ins], [o.info() for o in outs], where=WHERE)


def run(definition: OperationDef, ins: list, outs: list):
    """validate + prepare + execute; returns (version, prepared shapes, results tuple)."""
    ctx = context(definition, ins, outs)
    version = validate_operation(ctx)
    shapes = definition.prepare(ctx)
    kernel = definition.kernel(ctx)
    tensors = [x.data for x in ins if x.is_tensor]
    result = kernel(*tensors)
    result = result if isinstance(result, tuple) else (result,)
    assert len(result) == len(outs)
    for r in result:
        for x in tensors:
            if x is not None:
                assert not np.shares_memory(r, x), "a kernel returned a view of an input"
    for i, r in enumerate(result):
        for s in result[i + 1 :]:
            assert not np.shares_memory(r, s), "two outputs share memory"
    for r, o, shape in zip(result, outs, shapes):
        assert r.dtype == OPERAND_TYPE_INFO[o.type].dtype, (r.dtype, o.type)
        if shape is not None:
            assert len(shape) == r.ndim and all(p in (0, s) for p, s in zip(shape, r.shape)), (
                shape,
                r.shape,
            )
    return version, shapes, result


def assert_close(got: np.ndarray, want: np.ndarray, type_: T, atol=None) -> None:
    assert got.shape == want.shape, (got.shape, want.shape)
    tol = atol if atol is not None else (1e-5 if type_ == F32 else 5 * 2**-10)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol)


@dataclass
class Bad:
    """A negative row: InvalidArgument naming the operation, where it sits and the rule."""

    id: str
    definition: OperationDef
    ins: list
    outs: list
    match: str
    marks: list = field(default_factory=list)

    def check(self) -> None:
        ctx = context(self.definition, self.ins, self.outs)
        with pytest.raises(InvalidArgument) as err:
            validate_operation(ctx)
            self.definition.prepare(ctx)
            self.definition.kernel(ctx)
        message = err.value.message
        name = self.definition.type.name
        assert message.startswith(f"{name} ({WHERE}): "), message
        assert re.search(self.match, message), f"{message!r} does not match {self.match!r}"


# ---------------------------------------------------------------------------
# The reference cell
# ---------------------------------------------------------------------------


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


ACTIVATIONS = {
    0: lambda x: x,
    1: lambda x: np.maximum(x, 0),
    3: lambda x: np.clip(x, 0, 6),
    4: np.tanh,
    6: sigmoid,
}


@dataclass
class Cell:
    """Float64 parameters of one cell: per-gate dicts keyed by GATES."""

    wx: dict
    wh: dict
    b: dict
    peep: dict | None = None  # input (absent with CIFG), forget, output
    ln: dict | None = None
    proj_w: np.ndarray | None = None
    proj_b: np.ndarray | None = None
    waux: dict | None = None

    @property
    def cifg(self) -> bool:
        return "input" not in self.wx

    @classmethod
    def random(
        cls,
        n_in: int,
        n_cell: int,
        n_out: int | None = None,
        *,
        cifg=False,
        peephole=False,
        layer_norm=False,
        projection=False,
        proj_bias=False,
        n_aux: int | None = None,
    ) -> Cell:
        n_out = n_cell if n_out is None else n_out
        gates = GATES[1:] if cifg else GATES
        wx = {g: rand((n_cell, n_in)) for g in gates}
        wh = {g: rand((n_cell, n_out)) for g in gates}
        b = {g: rand((n_cell,), 0.3) for g in gates}
        peep = None
        if peephole:
            peep = {g: rand((n_cell,)) for g in gates if g != "cell"}
        ln = {g: 1 + rand((n_cell,), 0.2) for g in gates} if layer_norm else None
        pw = rand((n_out, n_cell)) if projection else None
        pb = rand((n_out,), 0.2) if proj_bias else None
        waux = {g: rand((n_cell, n_aux)) for g in gates} if n_aux else None
        return cls(wx, wh, b, peep, ln, pw, pb, waux)

    def step(self, x, h, c, *, act=4, cell_clip=0.0, proj_clip=0.0, aux=None):
        """One step; returns (output, new cell state, gates dict after activation)."""
        f_act = ACTIVATIONS[act]
        pre = {}
        for g in self.wx:
            v = x @ self.wx[g].T + h @ self.wh[g].T
            if aux is not None and self.waux is not None:
                v = v + aux @ self.waux[g].T
            pre[g] = v if self.ln is not None else v + self.b[g]
        if self.peep is not None:
            for g in ("input", "forget"):
                if g in pre:
                    pre[g] = pre[g] + c * self.peep[g]

        def norm(g, v):
            if self.ln is None:
                return v
            mean = v.mean(axis=-1, keepdims=True)
            var = ((v - mean) ** 2).mean(axis=-1, keepdims=True)
            return (v - mean) / np.sqrt(var + 1e-8) * self.ln[g] + self.b[g]

        f = sigmoid(norm("forget", pre["forget"]))
        i = 1 - f if self.cifg else sigmoid(norm("input", pre["input"]))
        z = f_act(norm("cell", pre["cell"]))
        c_new = f * c + i * z
        if cell_clip > 0:
            c_new = np.clip(c_new, -cell_clip, cell_clip)
        o_pre = pre["output"]
        if self.peep is not None:
            o_pre = o_pre + c_new * self.peep["output"]
        o = sigmoid(norm("output", o_pre))
        hc = o * f_act(c_new)
        out = hc
        if self.proj_w is not None:
            out = hc @ self.proj_w.T
            if self.proj_b is not None:
                out = out + self.proj_b
            if proj_clip > 0:
                out = np.clip(out, -proj_clip, proj_clip)
        return out, c_new, {"i": i, "f": f, "o": o, "act_c": f_act(c_new), "hc": hc}

    def sequence(self, xs, h, c, *, reverse=False, aux=None, **kw):
        """Time-major xs [T, B, in]; returns (outputs [T, B, out], h, c)."""
        outs = [None] * len(xs)
        order = range(len(xs) - 1, -1, -1) if reverse else range(len(xs))
        for t in order:
            h, c, _ = self.step(xs[t], h, c, aux=None if aux is None else aux[t], **kw)
            outs[t] = h
        return np.stack(outs), h, c

    # -- operands --------------------------------------------------------

    def operands(self, type_: T, *, const: bool, omit_declared=False) -> list:
        """The 17 per-cell tensors in HAL order (omitted ones as Omit)."""

        def t(a):
            return tensor(type_, a, const=const)

        def omitted(dims):
            return Omit(type_, dims, declared=omit_declared)

        n_cell, n_in = self.wx["forget"].shape
        n_out = self.wh["forget"].shape[1]
        ops = []
        for src, dims in ((self.wx, (n_cell, n_in)), (self.wh, (n_cell, n_out))):
            ops += [t(src[g]) if g in src else omitted(dims) for g in GATES]
        for g in ("input", "forget", "output"):
            has = self.peep is not None and g in self.peep
            ops.append(t(self.peep[g]) if has else omitted((n_cell,)))
        ops += [t(self.b[g]) if g in self.b else omitted((n_cell,)) for g in GATES]
        ops.append(t(self.proj_w) if self.proj_w is not None else omitted((n_out, n_cell)))
        ops.append(t(self.proj_b) if self.proj_b is not None else omitted((n_out,)))
        return ops

    def ln_operands(self, type_: T, *, const: bool) -> list:
        n_cell = self.wx["forget"].shape[0]
        if self.ln is None:
            return [Omit(type_) for _ in GATES]
        return [
            tensor(type_, self.ln[g], const=const) if g in self.ln else Omit(type_, (n_cell,))
            for g in GATES
        ]
