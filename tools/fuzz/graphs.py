"""Valid-but-nasty graphs for the in-process execution target, with their expected outputs.

``nasty_case(d)`` builds, from a ``Draw``, a model that is valid by
construction plus its inputs and a reference result computed alongside in
numpy:

- IF and WHILE nested to any depth (usually a few levels, sometimes dozens,
  rarely hundreds), each branch, condition and body its own subgraph;
- shared subgraphs: a finished subgraph is reused by later IF/WHILE
  operations in any subgraph (one subgraph referenced many times);
- infinite loops (a counter stepped by 0) run with a short loopTimeoutDuration
  or a deadline: the only right answer is MISSED_DEADLINE_*;
- declared shapes made unknown (dimension 0, unknown rank) where the HAL
  allows it (dynamic shapes: the result must still be exact).

``spoil(d, case)`` then optionally breaks the case on purpose: NO_VALUE
operands fed to operations, omitted request inputs, huge or conflicting
declared shapes, zero-sized request inputs, deadlines already passed. A
spoiled case has no reference result: any documented error (or success) is
fine, an internal error is not.

All float tensors of a case share one small shape (at most 4 x 3 x 3), and
values are small integers, so results are exact and the reference needs no
tolerance (overflow to inf/NaN is deterministic too).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from nnhal.tools.fuzz.data import Draw

from nnhal.builder import ModelBuilder, SubgraphBuilder
from nnhal.types import DataLocation, Model, OperandLifeTime, OperandType, Operation, OperationType

_T = OperandType
F32, BOOL8, I32, INT32 = _T.TENSOR_FLOAT32, _T.TENSOR_BOOL8, _T.TENSOR_INT32, _T.INT32
_O = OperationType
ADD, MUL, SUB, IF, WHILE, LESS = _O.ADD, _O.MUL, _O.SUB, _O.IF, _O.WHILE, _O.LESS
RELU, RELU6, ABS, NEG, MAXIMUM, MINIMUM = _O.RELU, _O.RELU6, _O.ABS, _O.NEG, _O.MAXIMUM, _O.MINIMUM
_ACTS: dict[int, Callable[[np.ndarray], np.ndarray]] = {
    0: lambda x: x,
    1: lambda x: np.maximum(x, np.float32(0)),
    2: lambda x: np.clip(x, np.float32(-1), np.float32(1)),
    3: lambda x: np.clip(x, np.float32(0), np.float32(6)),
}
_BINARY = {
    ADD: np.add,
    SUB: np.subtract,
    MUL: np.multiply,
}
_PLAIN_BINARY = {MAXIMUM: np.maximum, MINIMUM: np.minimum}
_UNARY = {
    RELU: _ACTS[1],
    RELU6: _ACTS[3],
    ABS: np.abs,
    NEG: np.negative,
}
MAX_OPERATIONS = 400  # per case, all subgraphs together: keeps one case well under a second


class Infinite(Exception):
    """The reference reached a loop that never ends."""


@dataclass
class Sub:
    """A subgraph being built and its reference program."""

    g: SubgraphBuilder
    inputs: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)
    consts: dict[int, np.ndarray] = field(default_factory=dict)
    program: list[tuple[tuple[int, ...], tuple[int, ...], Callable]] = field(default_factory=list)
    floats: list[int] = field(default_factory=list)

    def run(self, args: list[np.ndarray]) -> list[np.ndarray]:
        env = dict(self.consts)
        env.update(zip(self.inputs, args))
        for ins, outs, fn in self.program:
            env.update(zip(outs, fn(*(env[i] for i in ins))))
        return [env[o] for o in self.outputs]


@dataclass
class NastyCase:
    model: Model
    inputs: list[np.ndarray | None]
    expected: list[np.ndarray] | None  # None: spoiled, or an infinite loop
    infinite: bool = False
    loop_timeout_ns: int | None = None
    deadline_in_ns: int | None = None  # relative to the start of the execution
    notes: list[str] = field(default_factory=list)
    spoiled: bool = False
    fixed: set[tuple[int, int]] = field(default_factory=set)


class _Gen:
    def __init__(self, d: Draw, shape: tuple[int, ...]) -> None:
        self.d = d
        self.mb = ModelBuilder()
        self.shape = shape
        self.operations = 0
        self.shared: dict[str, list[Sub]] = {"branch": [], "body": []}
        self.notes: list[str] = []
        #: (subgraph, operand) pairs a WHILE touches: their shapes must stay known
        self.fixed: set[tuple[int, int]] = set()

    # -- operands and operations --------------------------------------------

    def const(self, sub: Sub, type_code: int, value: object, dims: tuple[int, ...] | None) -> int:
        index = sub.g.constant(type_code, value, dims)
        info = np.asarray(value)
        if type_code == F32:
            info = info.astype(np.float32)
        elif type_code == BOOL8:
            info = info.astype(bool)
        elif type_code in (I32, INT32):
            info = info.astype(np.int32)
        sub.consts[int(index)] = info
        return int(index)

    def op(self, sub: Sub, code: int, ins: list[int], outs: list[int], fn: Callable) -> None:
        sub.g.operation(code, ins, outs)
        sub.program.append((tuple(ins), tuple(outs), fn))
        self.operations += 1

    def ref(self, sub: Sub, target: Sub) -> int:
        index = int(sub.g.subgraph_ref(target.g))
        sub.consts[index] = None  # the reference program passes subgraphs by closure
        return index

    def float_temp(self, sub: Sub) -> int:
        index = int(sub.g.temporary(F32, self.shape))
        sub.floats.append(index)
        return index

    # -- plain operations ------------------------------------------------------

    def plain(self, sub: Sub) -> None:
        d = self.d
        kind = d.int(0, 2)
        x = d.choice(sub.floats)
        if kind == 0:
            code = d.choice(list(_BINARY))
            act = d.int(0, 3)
            y = d.choice(sub.floats)
            fn, fa = _BINARY[code], _ACTS[act]
            out = self.float_temp(sub)
            scalar = self.const(sub, INT32, act, None)
            self.op(sub, code, [x, y, scalar], [out], lambda a, b, _s: (fa(fn(a, b)),))
        elif kind == 1:
            code = d.choice(list(_PLAIN_BINARY))
            y = d.choice(sub.floats)
            fn = _PLAIN_BINARY[code]
            out = self.float_temp(sub)
            self.op(sub, code, [x, y], [out], lambda a, b: (fn(a, b),))
        else:
            code = d.choice(list(_UNARY))
            fn = _UNARY[code]
            out = self.float_temp(sub)
            self.op(sub, code, [x], [out], lambda a: (fn(a),))

    def fill(self, sub: Sub, count: int, depth: int, budget: int) -> None:
        for _ in range(count):
            if self.operations >= MAX_OPERATIONS:
                return
            if depth > 0 and self.d.bool(40):
                (self.if_op if self.d.bool(55) else self.while_op)(sub, depth, budget)
            else:
                self.plain(sub)

    # -- control flow -----------------------------------------------------------

    def finish_float(self, sub: Sub, source: int) -> None:
        """Copy ``source`` into a new subgraph output (identity ADD)."""
        out = int(sub.g.output(F32, self.shape))
        zero = self.const(sub, F32, np.zeros(self.shape, np.float32), self.shape)
        none = self.const(sub, INT32, 0, None)
        self.op(sub, ADD, [source, zero, none], [out], lambda a, z, _s: (a + z,))
        sub.outputs.append(out)

    def branch(self, n_inputs: int, depth: int, budget: int) -> Sub:
        """A subgraph: n float inputs -> 1 float output; shared when one fits."""
        pool = [s for s in self.shared["branch"] if len(s.inputs) == n_inputs]
        if pool and self.d.bool(45):
            self.notes.append("shared branch")
            return self.d.choice(pool)
        sub = Sub(self.mb.subgraph())
        for _ in range(n_inputs):
            index = int(sub.g.input(F32, self.shape))
            sub.inputs.append(index)
            sub.floats.append(index)
        self.fill(sub, self.d.int(0 if depth > 6 else 1, 3), depth - 1, budget)
        self.finish_float(sub, sub.floats[-1])
        self.shared["branch"].append(sub)
        return sub

    def if_op(self, sub: Sub, depth: int, budget: int) -> None:
        d = self.d
        flag = d.bool(50)
        cond = self.const(sub, BOOL8, [flag], (1,))
        n_inputs = d.int(1, 2)
        args = [d.choice(sub.floats) for _ in range(n_inputs)]
        then, other = self.branch(n_inputs, depth, budget), self.branch(n_inputs, depth, budget)
        refs = [self.ref(sub, then), self.ref(sub, other)]
        out = self.float_temp(sub)

        def run(c, _t, _e, *xs):
            return tuple((then if bool(c.reshape(-1)[0]) else other).run(list(xs)))

        self.op(sub, IF, [cond, *refs, *args], [out], run)

    def while_op(self, sub: Sub, depth: int, budget: int) -> None:
        """WHILE (i < n) { i += step; x = f(x) } with a trip count within ``budget``."""
        d = self.d
        infinite = d.bool(4)
        trips = 0 if budget <= 1 else d.int(0, min(4, budget))
        step = 0 if infinite else 1
        n_value = max(trips, 1) if infinite else trips
        cond = Sub(self.mb.subgraph())
        ci, cx, cn = (int(cond.g.input(I32, [1])), int(cond.g.input(F32, self.shape)),
                      int(cond.g.input(I32, [1])))  # fmt: skip
        cond.inputs = [ci, cx, cn]
        flag = int(cond.g.output(BOOL8, [1]))
        cond.outputs = [flag]
        self.op(cond, LESS, [ci, cn], [flag], lambda a, b: (a < b,))
        body = self.loop_body(depth, max(1, budget // max(trips, 1)), step)
        i0 = self.const(sub, I32, [0], (1,))
        n = self.const(sub, I32, [n_value], (1,))
        x = d.choice(sub.floats)
        i_end = int(sub.g.temporary(I32, [1]))
        out = self.float_temp(sub)
        refs = [self.ref(sub, cond), self.ref(sub, body)]

        def run(_c, _b, i, xv, nv):
            guard = 0
            while cond.run([i, xv, nv])[0].reshape(-1)[0]:
                guard += 1
                if guard > 64:
                    raise Infinite
                i, xv = body.run([i, xv, nv])
            return i, xv

        self.op(sub, WHILE, [*refs, i0, x, n], [i_end, out], run)
        self.fixed.update({(sub.g.index, i_end), (sub.g.index, out), (sub.g.index, x)})
        for part in (cond, body):
            self.fixed.update((part.g.index, i) for i in (*part.inputs, *part.outputs))

    def loop_body(self, depth: int, budget: int, step: int) -> Sub:
        pool = [s for s in self.shared["body"] if getattr(s, "step", None) == step]
        if pool and self.d.bool(40):
            self.notes.append("shared body")
            return self.d.choice(pool)
        body = Sub(self.mb.subgraph())
        bi, bx, bn = (int(body.g.input(I32, [1])), int(body.g.input(F32, self.shape)),
                      int(body.g.input(I32, [1])))  # fmt: skip
        body.inputs = [bi, bx, bn]
        body.floats.append(bx)
        i2 = int(body.g.output(I32, [1]))
        one = self.const(body, I32, [step], (1,))
        none = self.const(body, INT32, 0, None)
        self.op(body, ADD, [bi, one, none], [i2], lambda a, b, _s: (a + b,))
        self.fill(body, self.d.int(0 if depth > 6 else 1, 3), depth - 1, budget)
        x2 = int(body.g.output(F32, self.shape))
        last = body.floats[-1]
        zero = self.const(body, F32, np.zeros(self.shape, np.float32), self.shape)
        act = self.const(body, INT32, 3, None)  # RELU6 keeps repeated MULs finite
        self.op(body, ADD, [last, zero, act], [x2], lambda a, z, _s: (_ACTS[3](a + z),))
        body.outputs = [i2, x2]
        body.step = step  # type: ignore[attr-defined]
        self.shared["body"].append(body)
        return body


def _depth(d: Draw) -> int:
    kind = d.int(0, 15)
    if kind < 10:
        return d.int(0, 4)
    if kind < 14:
        return d.int(5, 24)
    return d.int(25, 120)


def nasty_case(d: Draw) -> NastyCase:
    """A valid model with nested control flow, its inputs and (when it ends) its outputs."""
    shape = tuple(d.int(1, 3) for _ in range(d.int(1, 3)))
    gen = _Gen(d, shape)
    main = Sub(gen.mb.main)
    inputs: list[np.ndarray | None] = []
    for _ in range(d.int(1, 2)):
        index = int(main.g.input(F32, shape))
        main.inputs.append(index)
        main.floats.append(index)
        inputs.append(np.array([d.int(-4, 4) for _ in range(int(np.prod(shape)))],
                               np.float32).reshape(shape))  # fmt: skip
    depth = _depth(d)
    if depth > 0:
        (gen.if_op if d.bool(50) else gen.while_op)(main, depth, 64)
    gen.fill(main, d.int(0, 4), depth, 64)
    for source in sorted({d.choice(main.floats) for _ in range(d.int(1, 2))}):
        gen.finish_float(main, source)
    model = gen.mb.build()
    infinite = False
    try:
        expected: list[np.ndarray] | None = main.run([np.asarray(x) for x in inputs])
    except Infinite:
        expected, infinite = None, True
    case = NastyCase(model, inputs, expected, infinite, notes=[f"depth {depth}", *gen.notes])
    case.fixed = gen.fixed
    if infinite or d.bool(10):
        case.loop_timeout_ns = d.choice([0, 1, 1_000_000, 5_000_000, 20_000_000])
    if infinite and d.bool(30):
        case.deadline_in_ns = d.choice([1_000_000, 10_000_000, 30_000_000])
    if d.bool(25):
        case.model = _unknown_shapes(d, case.model, gen.fixed)
        case.notes.append("unknown shapes")
    return case


# ---------------------------------------------------------------------------
# Changes after building
# ---------------------------------------------------------------------------


def _map_operands(model: Model, change: Callable[[int, int, object], object]) -> Model:
    subgraphs = []
    for s, sg in enumerate((model.main, *model.referenced)):
        operands = tuple(change(s, i, o) for i, o in enumerate(sg.operands))
        subgraphs.append(dataclasses.replace(sg, operands=operands))
    return dataclasses.replace(model, main=subgraphs[0], referenced=tuple(subgraphs[1:]))


def _unknown_shapes(d: Draw, model: Model, fixed: set[tuple[int, int]]) -> Model:
    """Temporaries and outputs with an unknown axis or rank (valid dynamic shapes), except
    where a WHILE needs them known (HAL 1.3: every WHILE operand is fully specified)."""

    def change(s: int, i: int, o):
        if (s, i) in fixed or o.type != F32 or o.lifetime not in (OperandLifeTime.TEMPORARY_VARIABLE,
                                              OperandLifeTime.SUBGRAPH_OUTPUT):  # fmt: skip
            return o
        if not d.bool(40):
            return o
        dims = () if d.bool(30) else tuple(0 if d.bool(50) else x for x in o.dimensions)
        return dataclasses.replace(o, dimensions=dims)

    return _map_operands(model, change)


def spoil(d: Draw, case: NastyCase) -> NastyCase:
    """Break the case on purpose (see the module docstring); None of it has a reference."""
    kind = d.int(0, 5)
    model = case.model
    subgraphs = [model.main, *model.referenced]
    if kind == 0:  # a NO_VALUE operand fed to an operation
        s = d.int(0, len(subgraphs) - 1)
        sg = subgraphs[s]
        if sg.operations:
            k = d.int(0, len(sg.operations) - 1)
            op = sg.operations[k]
            if op.inputs:
                pos = d.int(0, len(op.inputs) - 1)
                old = sg.operands[op.inputs[pos]]
                blank = dataclasses.replace(old, lifetime=OperandLifeTime.NO_VALUE,
                                            location=DataLocation(), numberOfConsumers=1,
                                            extraParams=None)  # fmt: skip
                operands = list(sg.operands)
                operands[op.inputs[pos]] = dataclasses.replace(
                    old, numberOfConsumers=old.numberOfConsumers - 1
                )
                operands.append(blank)
                ins = list(op.inputs)
                ins[pos] = len(operands) - 1
                ops = list(sg.operations)
                ops[k] = Operation(op.type, tuple(ins), op.outputs)
                sg = dataclasses.replace(sg, operands=tuple(operands), operations=tuple(ops))
                subgraphs[s] = sg
                model = dataclasses.replace(model, main=subgraphs[0],
                                            referenced=tuple(subgraphs[1:]))  # fmt: skip
                case.notes.append(f"NO_VALUE into subgraph {s} operation {k} input {pos}")
    elif kind == 1 and case.inputs:  # an omitted request input
        case.inputs = list(case.inputs)
        case.inputs[d.int(0, len(case.inputs) - 1)] = None
        case.notes.append("request input omitted")
    elif kind == 2:  # a huge or conflicting declared shape
        huge = d.choice([2**32 - 1, 2**31, 65536 * 65536 - 1, 1 << 20])

        def change(s: int, i: int, o):
            if o.type != F32 or not o.dimensions or not d.bool(20):
                return o
            dims = list(o.dimensions)
            dims[d.int(0, len(dims) - 1)] = huge
            return dataclasses.replace(o, dimensions=tuple(dims))

        model = _map_operands(model, change)
        case.notes.append(f"declared dimension {huge}")
    elif kind == 3 and case.inputs and case.inputs[0] is not None:  # a zero-sized input
        x = case.inputs[0]
        case.inputs = [np.zeros((0, *x.shape[1:]), np.float32), *case.inputs[1:]]
        main = model.main
        first = main.inputIndexes[0]
        model = _map_operands(model, lambda s, i, o: dataclasses.replace(
            o, dimensions=(0, *o.dimensions[1:])) if s == 0 and i == first else o)  # fmt: skip
        case.notes.append("zero-sized input")
    elif kind == 4:
        case.deadline_in_ns = d.choice([-1, 0, 1])
        case.notes.append(f"deadline {case.deadline_in_ns} ns")
    else:
        case.loop_timeout_ns = d.choice([0, 1, -1])
        case.notes.append(f"loop timeout {case.loop_timeout_ns}")
    case.model = model
    case.expected = None
    case.spoiled = True
    return case
