"""Specialisations the code generator applies where a generic loop cannot.

Two patterns, each recognised at compile time from the plans and each with an
exact fallback:

- **Counter loops** (``find_counter``): a WHILE whose condition is a single
  LESS / LESS_EQUAL / GREATER / GREATER_EQUAL between a carried
  ``TENSOR_INT32 [1]`` counter and a loop-invariant ``TENSOR_INT32 [1]``
  bound (an input-only state, a state the body passes through unchanged, or a
  constant of the condition), and whose body advances the counter by
  ``ADD``/``SUB`` of a constant with activation NONE. The counter then lives
  in a Python ``int``: no numpy call for the condition or the increment,
  int32 wrap-around kept (``_wrap32``), and one fresh ``int32 [1]`` array
  made when the loop ends -- or at the top of every iteration when other
  body steps read the counter (``materialize``; still cheaper than LESS,
  indexing and ADD on arrays).
  The generated code checks at loop entry that the counter and bound really
  are ``int32`` arrays of shape ``(1,)``; otherwise the generic loop runs.
  The loop timeout and the per-operation deadline checks stay where the
  generic loop has them.
- **Small dense layers** (``fast_fully_connected``): FULLY_CONNECTED on a
  declared ``[batch, size]`` float32 input with constant float32 weights and
  bias and activation NONE becomes ``np.dot(x, Wt)`` (plus the bias when it
  is not all zeros): ``np.dot`` reaches BLAS with a fraction of
  ``np.matmul``'s dispatch cost on tiny operands (0.44 µs against 1.27 µs
  for [1,2]x[2,2]) and computes bit-identical results. An all-zero bias is
  not added, so a result of -0.0 keeps its sign (the generic kernel's
  ``+= 0`` turns it into +0.0; both compare equal). The bias is kept as
  ``[1, units]``: numpy adds operands of one shape without its broadcasting
  machinery, a third of the cost at batch 1. Several such layers on one
  ``[1, size]`` input become one product (``shared_input``).
- **Counter arithmetic** (``scalar_steps``): in a counter loop, ADD/SUB/MUL,
  DIV by a nonzero constant and comparisons of int32 [1] values derived from
  the counter run on Python ints (int32 wrap-around kept); an IF whose
  condition is such a comparison branches on a Python bool; a SLICE whose
  begin is built from the counter slices with Python ints
  (``counter_index``); a SELECT under an EQUAL of the counter and a constant
  writes only where the mask holds (``one_hot``); the index an ARGMAX picks from one
  row is such an int, and a GATHER of a constant table at such an int is one of the
  table's rows made ahead (``row_index``); a value other steps read as a tensor is
  made an array once.
- **Loop-invariant steps** (``invariant_steps``): a body operation whose
  inputs never change between iterations runs in the first iteration only
  (at its place, so errors and deadline checks stay where they were).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from nnhal.driver.executor import counter_index, one_hot, row_index
from nnhal.driver.executor.plan import Step, StepKind, SubgraphPlan
from nnhal.driver.ops import fully_connected

from nnhal.types import OperandLifeTime, OperandType

_CONSTANTS = (OperandLifeTime.CONSTANT_COPY, OperandLifeTime.CONSTANT_REFERENCE)

#: comparison operation -> Python operator
COMPARISONS = {"LESS": "<", "LESS_EQUAL": "<=", "GREATER": ">", "GREATER_EQUAL": ">="}


def _wrap32(value: int) -> int:
    """``value`` wrapped to int32 as numpy's int32 ADD/SUB does."""
    return (value + 2**31) % 2**32 - 2**31


_I32_ONE = np.zeros(1, np.int32)
_B8_ONE = np.zeros(1, np.bool_)


def _i32(value: int) -> np.ndarray:
    # a copy of a one-element template, then the value: half of np.array([value], int32)'s
    # cost, paid once per iteration by a loop whose body reads its counter as an array
    # (out of int32's range raises OverflowError as np.array does; callers wrap first)
    array = _I32_ONE.copy()
    array[0] = value
    return array


def _counter_ok(value: object) -> bool:
    """True for an int32 array of shape (1,): what a counter loop may hold in an int."""
    return type(value) is np.ndarray and value.shape == (1,) and value.dtype == np.int32


#: names the generated code uses (module globals of each generated function)
RUNTIME_HELPERS: dict[str, object] = {
    "_wrap32": _wrap32,
    "_i32": _i32,
    "_counter_ok": _counter_ok,
    "_dot": np.dot,
    "_addto": np.add,
}


@dataclass(frozen=True)
class CounterLoop:
    """What ``find_counter`` recognised in one WHILE."""

    counter: int  # state slot of the counter
    bound: int | None  # state slot of the bound, or None when it is a constant
    bound_value: int | None  # the constant bound
    operator: str  # Python comparison
    counter_first: bool  # LESS(counter, bound) rather than LESS(bound, counter)
    step: int  # index of the body's ADD/SUB step
    delta: int  # what one iteration adds to the counter
    materialize: bool = False  # other body steps read the counter: an array per iteration
    #: body steps computed on Python ints (position -> ScalarStep), see ``scalar_steps``
    scalars: dict = field(default_factory=dict)
    #: operands of those steps that are also needed as arrays
    arrays: frozenset = frozenset()


def _is_i32_1(plan: SubgraphPlan, index: int) -> bool:
    operand = plan.subgraph.operands[index]
    dims = tuple(operand.dimensions)
    return operand.type == OperandType.TENSOR_INT32 and dims in ((1,), (0,), ())


def _constant_int(plan: SubgraphPlan, index: int) -> int | None:
    operand = plan.subgraph.operands[index]
    if operand.lifetime not in _CONSTANTS:
        return None
    value = plan.constants.get(index)
    if value is None or value.shape not in ((1,), ()) or value.dtype != np.int32:
        return None
    return int(value.reshape(-1)[0])


def _reads(steps: list[Step], index: int) -> int:
    return sum(step.inputs.count(index) for step in steps)


def find_counter(
    cond_plan: SubgraphPlan, body_plan: SubgraphPlan, n_carried: int
) -> CounterLoop | None:
    """The counter pattern of a WHILE (condition, body), or None."""
    cond, body = cond_plan.subgraph, body_plan.subgraph
    if len(cond_plan.steps) != 1:
        return None
    test = cond_plan.steps[0]
    operator = COMPARISONS.get(test.name)
    if (
        test.kind is not StepKind.OPERATION
        or operator is None
        or test.outputs[0] != cond.outputIndexes[0]
    ):
        return None
    a, b = test.inputs[:2]
    ins = list(cond.inputIndexes)
    for counter_operand, bound_operand, first in ((a, b, True), (b, a, False)):
        if counter_operand not in ins or ins.count(counter_operand) != 1:
            continue
        k = ins.index(counter_operand)
        if k >= n_carried or not _is_i32_1(cond_plan, counter_operand):
            continue
        bound_slot: int | None = None
        bound_value = _constant_int(cond_plan, bound_operand)
        if bound_value is None:
            if bound_operand not in ins or bound_operand == counter_operand:
                continue
            j = ins.index(bound_operand)
            if not _is_i32_1(cond_plan, bound_operand) or not _invariant(body, j, n_carried):
                continue
            bound_slot = j
        found = _body_increment(body_plan, k)
        if found is None:
            continue
        step, delta, _ = found
        scalars, arrays = scalar_steps(body_plan, body.inputIndexes[k], step)
        materialize = body.inputIndexes[k] in arrays
        return CounterLoop(
            k, bound_slot, bound_value, operator, first, step, delta, materialize, scalars, arrays
        )
    return None


def _invariant(body, slot: int, n_carried: int) -> bool:
    """An input-only state, or one the body hands back unchanged."""
    if slot >= n_carried:
        return True
    return body.outputIndexes[slot] == body.inputIndexes[slot]


def _body_increment(body_plan: SubgraphPlan, k: int) -> tuple[int, int, bool] | None:
    """(step index, delta, read elsewhere) of the body's ``counter' = ADD/SUB(counter, c)``."""
    body = body_plan.subgraph
    counter_in, counter_out = body.inputIndexes[k], body.outputIndexes[k]
    if list(body.inputIndexes).count(counter_in) != 1:
        return None
    if counter_in in body.outputIndexes or list(body.outputIndexes).count(counter_out) != 1:
        return None
    for position, step in enumerate(body_plan.steps):
        if step.outputs != (counter_out,):
            continue
        if step.kind is not StepKind.OPERATION or step.name not in ("ADD", "SUB"):
            return None
        if step.late is not None or len(step.inputs) != 3 or step.inputs[0] != counter_in:
            return None
        delta = _constant_int(body_plan, step.inputs[1])
        activation = body_plan.constants.get(step.inputs[2])
        if delta is None or activation is None or int(activation.reshape(-1)[0]) != 0:
            return None
        if step.inputs[1] == counter_in or _reads(body_plan.steps, counter_out):
            return None
        others = _reads(body_plan.steps, counter_in) > 1
        return position, (delta if step.name == "ADD" else -delta), others
    return None


def fast_fully_connected(step: Step) -> tuple[np.ndarray, np.ndarray | None] | None:
    """(Wt, bias or None) when FULLY_CONNECTED can run as ``np.dot(x, Wt)``.

    Computed once per step (the transposed copy of a large weight matrix is costly, and
    the unchecked and checked variants of a plan both ask).
    """
    cached = step.__dict__.get("_fast_fully_connected", _UNKNOWN)
    if cached is _UNKNOWN:
        cached = _fast_fully_connected(step)
        step.__dict__["_fast_fully_connected"] = cached
    return cached


_UNKNOWN = object()


def _fast_fully_connected(step: Step) -> tuple[np.ndarray, np.ndarray | None] | None:
    ctx = step.context
    if step.name != "FULLY_CONNECTED" or step.late is not None or ctx is None:
        return None
    if len(ctx.inputs) != 4 or any(info.omitted for info in ctx.inputs):
        return None
    x, w, b, act = ctx.inputs
    f32 = OperandType.TENSOR_FLOAT32
    if x.type != f32 or w.type != f32 or b.type != f32 or ctx.outputs[0].type != f32:
        return None
    if w.value is None or b.value is None or act.value is None or int(act.value) != 0:
        return None
    if w.value.ndim != 2 or x.dimensions is None or len(x.dimensions) != 2:
        return None
    if x.dimensions[1] != w.value.shape[1] or b.value.shape != (w.value.shape[0],):
        return None
    wt = fully_connected.transposed_weights(w.value)
    if wt.flags.owndata:
        wt.flags.writeable = False
    # [1, units], the rank of the product: added to a [1, units] product the operands
    # have one shape and numpy takes its contiguous loop (0.18 µs, where the [units]
    # vector's broadcast costs 0.63 µs); for larger batches it broadcasts as before
    bias = b.value.astype(np.float32).reshape(1, -1)
    bias.flags.writeable = False
    return wt, (None if not bias.any() else bias)


# ---------------------------------------------------------------------------
# int32 [1] arithmetic on the counter, in Python ints
# ---------------------------------------------------------------------------

_INT_ARITH = {"ADD": "+", "SUB": "-", "MUL": "*", "DIV": "//"}  # int32 DIV floors
_INT_COMPARE = {**COMPARISONS, "EQUAL": "==", "NOT_EQUAL": "!="}


@dataclass(frozen=True)
class ScalarStep:
    """``output = left OP right`` on Python ints (operands or int constants)."""

    output: int
    operator: str
    left: int | str  # operand index (a Python-int value) or "c<value>" for a constant
    right: int | str
    boolean: bool  # a comparison (TENSOR_BOOL8 result)


def _scalar_dims(plan: SubgraphPlan, index: int, type_: int) -> bool:
    operand = plan.subgraph.operands[index]
    return operand.type == type_ and tuple(operand.dimensions) in ((1,), (0,), ())


def scalar_steps(
    body_plan: SubgraphPlan, counter_in: int, counter_step: int
) -> tuple[dict[int, ScalarStep], frozenset[int]]:
    """Body steps on int32 [1] values derived from the counter, and which need arrays.

    A step qualifies when it is ADD/SUB/MUL (activation NONE), DIV by a nonzero
    constant, or a comparison, and each input is the counter, an earlier
    qualifying result or an int32 constant of shape [1]; or when it is an index
    vector or a SLICE at such a begin (``counter_index``), or a SELECT under a one-hot
    mask of such a value (``one_hot``); an ARGMAX of one row gives such a value, and a
    GATHER of a constant table at one is a row (``row_index``). Values that other
    steps (or the body outputs) read are materialized as arrays as well.
    """
    ints: dict[int, object] = {counter_in: False}  # operand -> is boolean (or VECTOR)
    lengths: dict[int, int] = {}  # vector operand -> its element count
    steps: dict[int, object] = {}
    for position, step in enumerate(body_plan.steps):
        if position == counter_step or step.kind is not StepKind.OPERATION or step.late:
            continue
        vector = counter_index.vector_step(body_plan, step, ints)
        if vector is not None:
            steps[position] = vector
            ints[vector.output] = counter_index.VECTOR
            lengths[vector.output] = len(vector.constants)
            continue
        sliced = counter_index.slice_step(body_plan, step, ints, lengths)
        if sliced is not None:
            steps[position] = sliced
            continue
        picked = row_index.argmax_step(body_plan, step)
        if picked is not None:
            steps[position] = picked
            ints[picked.output] = False
            continue
        row = row_index.gather_step(body_plan, step, ints)
        if row is not None:
            steps[position] = row
            continue
        arith, compare = _INT_ARITH.get(step.name), _INT_COMPARE.get(step.name)
        if (arith is None and compare is None) or len(step.outputs) != 1:
            continue
        if arith is not None:
            activation = body_plan.constants.get(step.inputs[2]) if len(step.inputs) == 3 else None
            if activation is None or int(activation.reshape(-1)[0]) != 0:
                continue
        elif len(step.inputs) != 2:
            continue
        sides: list[int | str] = []
        for operand in step.inputs[:2]:
            if ints.get(operand) is False:
                sides.append(operand)
            elif (value := _constant_int(body_plan, operand)) is not None:
                sides.append(f"c{value}")
            else:
                break
        if len(sides) != 2 or all(isinstance(x, str) for x in sides):
            continue
        if arith == "//" and (not isinstance(sides[1], str) or sides[1] == "c0"):
            continue  # only a nonzero constant divisor (numpy gives 0 for x // 0)
        out = step.outputs[0]
        want = OperandType.TENSOR_INT32 if arith else OperandType.TENSOR_BOOL8
        if not _scalar_dims(body_plan, out, want):
            continue
        steps[position] = ScalarStep(out, arith or compare, sides[0], sides[1], arith is None)
        ints[out] = arith is None
    for position, step in enumerate(body_plan.steps):
        found = {} if position in steps else one_hot.find(body_plan, position, ints)
        if found and not steps.keys() & found.keys():
            steps.update(found)
    # which of these values other steps or the body outputs read as arrays
    arrays: set[int] = set(body_plan.subgraph.outputIndexes) & set(ints)
    for position, step in enumerate(body_plan.steps):
        if position in steps or position == counter_step:
            continue
        reads = step.inputs
        if step.kind is StepKind.IF and ints.get(step.inputs[0]) is True:
            reads = step.inputs[1:]  # the condition is used as a Python bool
        arrays.update(i for i in reads if i in ints)
    return steps, frozenset(arrays)


def _b8(value: bool) -> np.ndarray:
    array = _B8_ONE.copy()  # as _i32
    array[0] = value
    return array


RUNTIME_HELPERS["_b8"] = _b8


# ---------------------------------------------------------------------------
# loop-invariant steps of a WHILE body
# ---------------------------------------------------------------------------


class _Unset:
    """The value of a hoisted result before the loop's first iteration computed it."""

    def __repr__(self) -> str:
        return "_UNSET"


RUNTIME_HELPERS["_UNSET"] = _Unset()


def invariant_steps(body_plan: SubgraphPlan, n_carried: int, skip: set[int]) -> list[int]:
    """Positions of body operations whose inputs never change from one iteration to the next.

    Inputs that do not change: the body's constants, its input-only states and
    the states it hands back unchanged, and results of earlier such steps. The
    generated loop computes these steps in the first iteration only (at their
    place, so a failure or a deadline is seen exactly where the generic loop
    sees it, and a loop that runs zero times computes nothing).
    """
    body = body_plan.subgraph
    fixed: set[int] = {
        index
        for index, operand in enumerate(body.operands)
        if operand.lifetime in _CONSTANTS or operand.lifetime == OperandLifeTime.NO_VALUE
    }
    for slot, index in enumerate(body.inputIndexes):
        if list(body.inputIndexes).count(index) == 1 and _invariant(body, slot, n_carried):
            fixed.add(index)
    positions = []
    for position, step in enumerate(body_plan.steps):
        if position in skip or step.kind is not StepKind.OPERATION or not step.pure:
            continue
        if step.outputs and all(i in fixed for i in step.inputs):
            positions.append(position)
            fixed.update(step.outputs)
    return positions
