"""SELECT under a one-hot mask of a counter loop's counter: the buffer write of a loop.

NNAPI has no scatter, so a loop that writes element ``t`` of a buffer (a scan
output of an ONNX Loop, the tokens of a decoder) does it over the whole
buffer: ``mask = EQUAL(positions, t)`` with a constant ``positions`` tensor,
often ``value = MUL(ones, x)`` to spread a one-element ``x``, then
``buffer' = SELECT(mask, value, buffer)``; three kernels over every element,
each iteration (about 2 µs for 1024 values). In a counter loop
(``specialize.find_counter``), where ``t`` is a Python int, this module
recognises the pattern at preparation and emits::

    out = buffer.copy()                 # or buffer itself, when the loop made it
    q = t - first                       # where EQUAL holds, when the constant counts up
    if 0 <= q < size:
        out[0, q] = value[0, q]         # or the spread element's own arithmetic

A constant that does not count up from its first element gets a table
(``Positions``: each value's flat indexes, made once when the loop is
generated) and a loop over the indexes holding the counter's value; one
that holds a value at more than ``MAX_WRITES`` indexes is left to the
kernels. The mask must be read by the SELECT only;
a spreading ADD / SUB / MUL (activation NONE, int32: Python ints with numpy's
int32 wrap-around) likewise, else ``value`` is computed by its own step and
only read at the written indexes. When the buffer is a loop state that
nothing else reads and the result is only its next value, the array the
SELECT made in the previous iteration is written in place (the first
iteration copies the initial value, which belongs to the caller). The
SELECT's result must be proven at
preparation, its operands float32 or int32 of one fully known shape. The
generated code checks that the run-time shapes are the declared ones
(the spread element's too); otherwise the original steps run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from nnhal.driver.executor.plan import Step, StepKind, SubgraphPlan

from nnhal.types import OperandLifeTime, OperandType

_CONSTANTS = (OperandLifeTime.CONSTANT_COPY, OperandLifeTime.CONSTANT_REFERENCE)
_SPREAD = {"ADD": "+", "SUB": "-", "MUL": "*"}
_VALUES = (OperandType.TENSOR_FLOAT32, OperandType.TENSOR_INT32)
#: largest positions constant given a table (one dict entry per distinct value)
MAX_TABLE = 1 << 16
#: most indexes one value of the positions constant may hold: each is a Python line
#: per iteration (a row of a [rows, features] buffer stays with the whole-tensor kernels)
MAX_WRITES = 4


@dataclass(frozen=True)
class Spread:
    """``value = constant OP element`` (``element_first``: ``element OP constant``)."""

    step: Step
    operator: str
    element: int  # operand index of the one-element tensor
    element_first: bool


@dataclass(frozen=True)
class OneHotSelect:
    """The SELECT (``select``) fed by ``mask_step`` (EQUAL) and perhaps ``spread``."""

    select: Step
    mask_step: Step
    scalar: int  # the counter-derived operand EQUAL compares with
    dims: tuple[int, ...]
    #: the buffer is a carried state that only this SELECT reads, and the result is
    #: only that state's next value: the array this SELECT made last iteration is
    #: written in place (see ``owned``)
    in_place: bool = False


@dataclass(frozen=True)
class Absorbed:
    """A step the ``OneHotSelect`` at ``owner`` emits (nothing at its own place)."""

    owner: int


def _reads(plan: SubgraphPlan, index: int) -> int:
    reads = sum(step.inputs.count(index) for step in plan.steps)
    return reads + list(plan.subgraph.outputIndexes).count(index)


def _producer(plan: SubgraphPlan, index: int) -> tuple[int, Step] | None:
    for position, step in enumerate(plan.steps):
        if index in step.outputs:
            return position, step
    return None


def _operand(plan: SubgraphPlan, index: int):
    return plan.subgraph.operands[index]


def _constant(plan: SubgraphPlan, index: int, dims: tuple[int, ...]) -> np.ndarray | None:
    """An int32 constant of exactly ``dims``, or None."""
    operand = _operand(plan, index)
    if operand.lifetime not in _CONSTANTS or operand.type != OperandType.TENSOR_INT32:
        return None
    value = plan.constants.get(index)
    if value is None or value.shape != dims or value.dtype != np.int32:
        return None
    return value


def _plain(plan: SubgraphPlan, step: Step) -> bool:
    return step.kind is StepKind.OPERATION and step.late is None and len(step.outputs) == 1


def _spread(plan: SubgraphPlan, value: int, dims) -> tuple[int, Spread, np.ndarray] | None:
    """The int32 step spreading a one-element tensor into ``value``, read by the SELECT only."""
    found = _producer(plan, value)
    if found is None or _reads(plan, value) != 1:
        return None
    position, step = found
    operator = _SPREAD.get(step.name)
    if operator is None or not _plain(plan, step) or len(step.inputs) != 3:
        return None
    if _operand(plan, value).type != OperandType.TENSOR_INT32:
        return None
    activation = plan.constants.get(step.inputs[2])
    if activation is None or int(activation.reshape(-1)[0]) != 0:
        return None
    a, b = step.inputs[:2]
    for constant, element, first in ((a, b, False), (b, a, True)):
        values = _constant(plan, constant, dims)
        operand = _operand(plan, element)
        if values is None or operand.type != OperandType.TENSOR_INT32:
            continue
        if operand.lifetime in _CONSTANTS or not operand.dimensions:
            continue
        if not all(operand.dimensions) or int(math.prod(operand.dimensions)) != 1:
            continue
        return position, Spread(step, operator, element, first), values
    return None


def find(plan: SubgraphPlan, position: int, ints: dict) -> dict[int, object]:
    """{position: OneHotSelect or Absorbed} for the SELECT at ``position``, or {}.

    ``ints``: operand -> False for the counter-derived int32 values (``scalar_steps``).
    """
    select = plan.steps[position]
    if select.name != "SELECT" or not _plain(plan, select) or len(select.inputs) != 3:
        return {}
    if 0 not in select.proven:
        return {}
    mask, value, buffer = select.inputs
    if value in ints or buffer in ints:
        return {}  # a [1] value held as a Python int (the tables here index arrays)
    out = _operand(plan, select.outputs[0])
    dims = tuple(out.dimensions)
    if not dims or not all(dims) or out.type not in _VALUES:
        return {}
    for index in (mask, value, buffer):
        if tuple(_operand(plan, index).dimensions) != dims:
            return {}
    if _operand(plan, value).type != out.type or _operand(plan, buffer).type != out.type:
        return {}
    found = _producer(plan, mask)
    if found is None or _reads(plan, mask) != 1:
        return {}
    mask_position, mask_step = found
    if mask_step.name != "EQUAL" or not _plain(plan, mask_step) or len(mask_step.inputs) != 2:
        return {}
    a, b = mask_step.inputs
    scalar, positions = (b, a) if ints.get(b) is False else (a, b)
    if ints.get(scalar) is not False:
        return {}
    constant = _constant(plan, positions, dims)
    if constant is None or constant.size > MAX_TABLE:
        return {}
    flat = constant.reshape(-1)
    if not _counts_up(flat) and np.unique(flat, return_counts=True)[1].max() > MAX_WRITES:
        return {}  # a Python line per written element would cost more than the kernels
    spread = _spread(plan, value, dims)
    steps: dict[int, object] = {mask_position: Absorbed(position)}
    found_select = OneHotSelect(select, mask_step, scalar, dims, _in_place(plan, select))
    if spread is not None:
        steps[spread[0]] = Absorbed(position)
        steps[position] = (found_select, spread[1])
    else:
        steps[position] = found_select
    return steps


def _in_place(plan: SubgraphPlan, select: Step) -> bool:
    """Whether the buffer written by ``select`` can be its own result (``OneHotSelect``).

    Its value must reach no other variable: the state is read by this SELECT only
    (not by another step, which might hand back a view of it, nor passed out), and
    the result goes only to the same state slot's next value. The condition
    subgraph may read the state: its results end with each test.
    """
    buffer, result = select.inputs[2], select.outputs[0]
    inputs, outputs = list(plan.subgraph.inputIndexes), list(plan.subgraph.outputIndexes)
    if inputs.count(buffer) != 1 or _reads(plan, buffer) != 1:
        return False
    slot = inputs.index(buffer)
    if outputs.count(result) != 1 or outputs.index(result) != slot:
        return False
    return sum(step.inputs.count(result) for step in plan.steps) == 0


def owned(uid: str, select: OneHotSelect) -> str | None:
    """The variable holding the array ``select`` made last (None before the first), or
    None when it writes a copy every time."""
    return f"{uid}o{select.select.outputs[0]}" if select.in_place else None


@dataclass(frozen=True)
class Positions:
    """Where the EQUAL's constant holds each value, by flat (C-order) index."""

    offset: int | None  # the constant is offset + its flat index: no table at all
    entries: dict | None  # else value -> flat indexes holding it
    spread: tuple | None  # the spread's constant by flat index (None: no spread)
    uniform: int | None  # that constant when all its elements are equal


def table(plan: SubgraphPlan, select: Step) -> Positions:
    """The ``Positions`` of a SELECT that ``find`` recognised.

    Made once per step (the unchecked and checked variants both ask) from the plan
    alone, so a function generated again from its text gets the same values. A
    constant counting up from its first element (the positions of a buffer, the
    usual case) needs no table; others get a dict, built with numpy's help (a
    Python loop over each index had cost 0.9 ms for 1024 values).
    """
    cached = select.__dict__.get("_one_hot_table")
    if cached is not None:
        return cached
    mask, value, _ = select.inputs
    dims = tuple(_operand(plan, select.outputs[0]).dimensions)
    a, b = _producer(plan, mask)[1].inputs
    constant = _constant(plan, a, dims)
    flat = (constant if constant is not None else _constant(plan, b, dims)).reshape(-1)
    offset, entries = None, None
    if _counts_up(flat):
        offset = int(flat[0])
    else:
        order = np.argsort(flat, kind="stable")
        keys, starts = np.unique(flat[order], return_index=True)
        groups = np.split(order, starts[1:])
        entries = {k: tuple(g.tolist()) for k, g in zip(keys.tolist(), groups)}
    spread = _spread(plan, value, dims)
    values = None if spread is None else spread[2].reshape(-1)
    uniform = None
    if values is not None and (values == values[0]).all():
        uniform = int(values[0])
    cached = Positions(offset, entries, None if values is None else tuple(values.tolist()), uniform)
    select.__dict__["_one_hot_table"] = cached
    return cached


def _counts_up(flat: np.ndarray) -> bool:
    """Whether ``flat[i] == flat[0] + i`` throughout (int64: no wrap-around)."""
    steps = np.arange(flat.size, dtype=np.int64) + int(flat[0])
    return bool(np.array_equal(flat.astype(np.int64), steps))


def _index(dims: tuple[int, ...], flat: str) -> str:
    """The index tuple expression of flat (C-order) index ``flat`` into ``dims``."""
    parts, stride = [], 1
    for d in reversed(dims):
        if d == 1:
            parts.append("0")
        elif stride * d == int(math.prod(dims)) and stride == 1:
            parts.append(flat)  # the only axis longer than 1
        elif stride * d == int(math.prod(dims)):
            parts.append(f"{flat} // {stride}")
        else:
            parts.append(f"{flat} // {stride} % {d}" if stride > 1 else f"{flat} % {d}")
        stride *= d
    return ", ".join(reversed(parts))


def _identity(spread: Spread, uniform: int | None) -> bool:
    """Whether spreading with the constant ``uniform`` leaves the element as it is."""
    if spread.operator == "*":
        return uniform == 1
    if spread.operator == "+":
        return uniform == 0
    return uniform == 0 and spread.element_first  # element - 0


def emit_absorbed(at: int) -> None:
    """The place of an absorbed step: its work is done at the SELECT."""


def emit(gen, source, plan: SubgraphPlan, found, ints, arrays, namer, uid: str):
    """An emitter of the SELECT (``found``: a OneHotSelect, or one with its Spread)."""
    select, spread = found if isinstance(found, tuple) else (found, None)
    step = select.select
    own = owned(uid, select)

    def emit_at(at: int) -> None:
        _mask, value, buffer = step.inputs
        out, b = namer(step.outputs[0]), namer(buffer)
        positions = gen.bind("h", plan, step)
        name = f"h{plan.index}_{step.index}"
        tests = [f"{b}.shape == {select.dims!r}"]
        index = _index(select.dims, "_q")
        if spread is None:
            tests.append(f"{namer(value)}.shape == {select.dims!r}")
            put = f"{namer(value)}[{index}]"
        else:
            element = namer(spread.element)
            if spread.element in ints:  # derived from the counter: already a Python int
                x = ints[spread.element]
            else:
                shape = tuple(_operand(plan, spread.element).dimensions)
                tests.append(f"{element}.shape == {shape!r}")
                x = f"{element}.item()"
            k = str(positions.uniform)
            if positions.uniform is None:
                k = f"{source.bind(name, positions)}.spread[_q]"
            left, right = (x, k) if spread.element_first else (k, x)
            put = f"{left} {spread.operator} {right}"
        source.line(at, f"if {' and '.join(tests)}:")
        if own is None:
            source.line(at + 1, f"{out} = {b}.copy()")
        else:  # the array made last iteration; else the initial value, not ours to write
            source.line(at + 1, f"{out} = {b} if {b} is {own} else {b}.copy()")
        scalar = ints[select.scalar]
        if positions.offset is not None:
            shift = f" - {positions.offset}" if positions.offset else ""
            source.line(at + 1, f"_q = {scalar}{shift}")
            source.line(at + 1, f"if 0 <= _q < {int(math.prod(select.dims))}:")
        else:
            source.line(
                at + 1, f"for _q in {source.bind(name, positions)}.entries.get({scalar}, ()):"
            )
        if spread is None:
            source.line(at + 2, f"{out}[{index}] = {put}")
        elif spread.element in ints and _identity(spread, positions.uniform):
            # the Python int itself: an int32 value already (ints are kept wrapped)
            source.line(at + 2, f"{out}[{index}] = {ints[spread.element]}")
        else:  # numpy's int32 arithmetic wraps around
            source.line(at + 2, f"_v = {put}")
            source.line(at + 2, "if not -2147483649 < _v < 2147483648: _v = _wrap32(_v)")
            source.line(at + 2, f"{out}[{index}] = _v")
        if own is not None:
            source.line(at + 1, f"{own} = {out}")
        source.line(at, "else:  # shapes other than the declared ones: the steps themselves")
        wanted = [select.scalar] + ([spread.element] if spread else [])
        for index in dict.fromkeys(wanted):  # counter-derived ints these steps read
            if index in ints and index not in arrays:
                source.line(at + 1, f"{namer(index)} = _i32({ints[index]})")
        for original in (select.mask_step, spread.step if spread else None, step):
            if original is not None:
                gen.emit_operation(source, plan, original, namer, at + 1)

    return emit_at
