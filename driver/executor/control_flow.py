"""IF and WHILE: the executor-owned control-flow operations (hal13.md §3).

Both are emitted as Python control flow inside the generated function of the
subgraph that contains them (see ``codegen``):

- IF reads its condition (NO_VALUE or missing at run time is a
  GeneralFailure naming the IF, as the reference's OP_FAILED) and calls the
  chosen branch's function with the outer operands as its inputs, or runs
  its lines there when the branch is small (``Generator.inline_branch``). A
  constant condition picks the branch at compile time.
- WHILE becomes a ``while True`` loop over local state variables. A
  condition or body without a WHILE of its own is inlined into the loop (its
  steps become lines of the loop), otherwise its function is called. Body
  outputs replace the state by swapping references, never by copying; since
  each kernel returns a fresh array, shapes may change from one iteration to
  the next. After the condition says true, the loop timeout
  (loopTimeoutDuration, measured from the start of the WHILE) is one integer
  comparison against ``time.monotonic_ns()``: MissedDeadline(transient=True).
  A loop that runs zero times gives copies of the initial values, so the
  caller never holds an alias of an input or a constant.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from nnhal.driver.executor import counter_index, one_hot, row_index, specialize
from nnhal.driver.executor.plan import StepKind

from nnhal.errors import GeneralFailure, MissedDeadline

if TYPE_CHECKING:
    from nnhal.driver.executor.codegen import Generator, Namer, Source
    from nnhal.driver.executor.plan import Step, SubgraphPlan


def _no_condition(location: str, operand: int) -> GeneralFailure:
    return GeneralFailure(f"{location}: condition operand {operand} has no value")


def _no_input(location: str, position: int, operand: int) -> GeneralFailure:
    return GeneralFailure(
        f"{location}: input {position} (operand {operand}) has no value; the subgraph it is"
        " passed to would read a missing value"
    )


def no_value_input(step: Step, namer: Namer) -> tuple[int, int] | None:
    """(position, operand) of an IF/WHILE value input that is NO_VALUE, else None.

    Like a NO_VALUE IF condition (the CTS model if_no_value) the model is valid and
    executing the operation fails; without this a branch or body would hand None to
    its operations' kernels.
    """
    first = 3 if step.kind.value == "IF" else 2
    for position in range(first, len(step.inputs)):
        if namer(step.inputs[position]) == "None":
            return position, step.inputs[position]
    return None


def _loop_timeout(location: str, timeout_ns: int) -> MissedDeadline:
    return MissedDeadline(
        f"{location}: loop ran longer than loopTimeoutDuration ({timeout_ns} ns)",
        transient=True,
    )


def _copy(value):
    return None if value is None else np.array(value, copy=True)


#: names the generated code uses (module globals of each generated function)
RUNTIME_HELPERS: dict[str, object] = {
    "_no_condition": _no_condition,
    "_no_input": _no_input,
    "_loop_timeout": _loop_timeout,
    "_copy": _copy,
}


def _targets(names: list[str]) -> str:
    """Left-hand side unpacking a tuple (``a,`` for one name)."""
    return "".join(f"{n}, " for n in names).rstrip()


def _assign(targets: list[str], values: list[str]) -> str:
    """``targets = values`` for names and expressions: a plain assignment for one (less
    to compile than a tuple packed and unpacked), a tuple assignment for more."""
    if len(targets) == 1:
        return f"{targets[0]} = {values[0]}"
    return f"{_targets(targets)} = {_targets(values)}"


def emit_if(
    gen: Generator,
    source: Source,
    plan: SubgraphPlan,
    step: Step,
    namer: Namer,
    depth: int,
    verdict: str | None = None,
) -> None:
    """The IF; ``verdict``: a Python bool expression standing for the condition."""
    then_ref, else_ref = step.refs
    args = [namer(i) for i in step.inputs[3:]]
    outputs = [namer(i) for i in step.outputs]
    target = _targets(outputs)
    condition = step.inputs[0]
    constant = plan.constants.get(condition)
    location = step.location

    def branch(ref: int, at: int) -> None:
        if gen.inline_branch(ref):
            _emit_branch(gen, source, ref, args, outputs, at)
            source.location = location
        else:
            source.line(at, f"{target} = {gen.call(source, ref, args)}")

    if constant is not None and constant.size >= 1:
        # A constant condition: the branch is known now.
        branch(then_ref if bool(constant.reshape(-1)[0]) else else_ref, depth)
    elif verdict is not None:  # a condition computed on Python ints (specialize)
        source.line(depth, f"if {verdict}:")
        branch(then_ref, depth + 1)
        source.line(depth, "else:")
        branch(else_ref, depth + 1)
    else:
        name = namer(condition)
        if name == "None":  # NO_VALUE: the model is valid, executing it fails
            source.line(depth, f"raise _no_condition({location!r}, {condition})")
            return
        source.line(depth, f"if {name} is None: raise _no_condition({location!r}, {condition})")
        source.line(depth, f"if {name}[0]:")
        branch(then_ref, depth + 1)
        source.line(depth, "else:")
        branch(else_ref, depth + 1)
    gen.emit_shape_checks(source, plan, step, outputs, depth)


def _emit_branch(
    gen: Generator, source: Source, ref: int, args: list[str], outputs: list[str], depth: int
) -> None:
    """The steps of a small IF branch where it is taken (``Generator.inline_branch``): the
    lines its function would hold, on the IF's operands, its results bound to the IF's
    outputs. A result a step writes is written under the output's name directly; as with
    the call, a result may also be an input or a constant (no copy either way)."""
    from nnhal.driver.executor.codegen import Namer  # codegen imports this module

    branch_plan = gen.plans[ref]
    subgraph = branch_plan.subgraph
    inputs, results = subgraph.inputIndexes, subgraph.outputIndexes
    overrides = dict(zip(inputs, args))
    written = {index for step in branch_plan.steps for index in step.outputs}
    rest = []
    for index, name in zip(results, outputs):
        if index in written and results.count(index) == 1:
            overrides[index] = name
        else:
            rest.append((name, index))
    names = Namer(source, branch_plan, source.fresh("i") + "_", overrides)
    gen.emit_steps(source, branch_plan, names, depth)
    if rest:
        source.line(depth, _assign([name for name, _ in rest], [names(i) for _, i in rest]))


def emit_while(
    gen: Generator, source: Source, plan: SubgraphPlan, step: Step, namer: Namer, depth: int
) -> None:
    cond_ref, body_ref = step.refs
    cond_plan, body_plan = gen.plans[cond_ref], gen.plans[body_ref]
    initial = [namer(i) for i in step.inputs[2:]]
    uid = source.fresh("w")
    state = [f"{uid}s{k}" for k in range(len(initial))]
    n_carried = len(body_plan.subgraph.outputIndexes)  # m + k

    source.line(depth, _assign(state, initial))
    counter = None
    if gen.specialize and gen.inlined(cond_ref) and gen.inlined(body_ref):
        counter = specialize.find_counter(cond_plan, body_plan, n_carried)
    if counter is None:
        _emit_loop(gen, source, step, state, uid, depth)
    else:
        # the counter in a Python int when its values are int32 [1] arrays
        checks = [state[counter.counter]]
        if counter.bound is not None:
            checks.append(state[counter.bound])
        guard = " and ".join(f"_counter_ok({s})" for s in checks)
        source.line(depth, f"if {guard}:")
        _emit_counter_loop(gen, source, step, state, uid, depth + 1, counter)
        source.line(depth, "else:")  # the generic loop, generated when first taken
        loop = source.bind(f"x{plan.index}_{step.index}", gen.bind("x", plan, step))
        tail = ["_lt", "_dl"] if gen.checked else ["_lt"]
        source.line(depth + 1, f"{_targets(state[:n_carried])} = {loop}({', '.join(state + tail)})")

    # results: the final input-output values; never an alias of an initial value
    outputs = [namer(i) for i in step.outputs]
    for name, final, first in zip(outputs, state, initial):
        source.line(depth, f"{name} = {final} if {final} is not {first} else _copy({final})")
    gen.emit_shape_checks(source, plan, step, outputs, depth)


def _emit_loop(
    gen: Generator, source: Source, step: Step, state: list[str], uid: str, depth: int
) -> None:
    """The generic loop: condition and body on the state variables."""
    from nnhal.driver.executor.codegen import Namer  # codegen imports this module

    cond_ref, body_ref = step.refs
    cond_plan, body_plan = gen.plans[cond_ref], gen.plans[body_ref]
    location = step.location
    limit = f"{uid}t"
    n_carried = len(body_plan.subgraph.outputIndexes)  # m + k
    hoisted = (
        _hoist(gen, source, body_plan, step, uid, depth, set()) if gen.inlined(body_ref) else {}
    )
    source.line(depth, f"{limit} = _mono() + _lt")
    source.line(depth, "while True:")
    inner = depth + 1

    # condition
    if gen.inlined(cond_ref):
        cond_namer = Namer(
            source, cond_plan, f"{uid}c", dict(zip(cond_plan.subgraph.inputIndexes, state))
        )
        gen.emit_steps(source, cond_plan, cond_namer, inner)
        verdict = cond_namer(cond_plan.subgraph.outputIndexes[0])
        source.location = location
    else:
        verdict = f"{uid}c"
        source.line(inner, f"{verdict}, = {gen.call(source, cond_ref, state)}")
    source.line(inner, f"if not {verdict}[0]: break")
    source.line(inner, f"if _mono() > {limit}: raise _loop_timeout({location!r}, _lt)")

    # body: its outputs become the next state (references swapped, no copy)
    if gen.inlined(body_ref):
        body_namer = Namer(
            source, body_plan, f"{uid}b", dict(zip(body_plan.subgraph.inputIndexes, state))
        )
        replace = {p: emit(body_namer) for p, emit in hoisted.items()}
        gen.emit_steps(source, body_plan, body_namer, inner, replace)
        source.location = location
        results = [body_namer(i) for i in body_plan.subgraph.outputIndexes]
        source.line(inner, _assign(state[:n_carried], results))
    else:
        source.line(inner, f"{_targets(state[:n_carried])} = {gen.call(source, body_ref, state)}")


def _emit_counter_loop(
    gen: Generator,
    source: Source,
    step: Step,
    state: list[str],
    uid: str,
    depth: int,
    counter: specialize.CounterLoop,
) -> None:
    """The loop with its counter in a Python int (``specialize.find_counter``)."""
    from nnhal.driver.executor.codegen import Namer  # codegen imports this module

    cond_ref, body_ref = step.refs
    cond_plan, body_plan = gen.plans[cond_ref], gen.plans[body_ref]
    location = step.location
    limit, count = f"{uid}t", f"{uid}i"
    n_carried = len(body_plan.subgraph.outputIndexes)
    source.line(depth, f"{count} = int({state[counter.counter]}[0])")
    if counter.bound is None:
        bound = str(counter.bound_value)
    else:
        bound = f"{uid}n"
        source.line(depth, f"{bound} = int({state[counter.bound]}[0])")
    test = (count, bound) if counter.counter_first else (bound, count)
    taken = {counter.step, *counter.scalars}
    hoisted = _hoist(gen, source, body_plan, step, uid, depth, taken)
    for scalar in counter.scalars.values():
        select = scalar[0] if isinstance(scalar, tuple) else scalar
        own = one_hot.owned(uid, select) if isinstance(select, one_hot.OneHotSelect) else None
        if own is not None:
            source.line(depth, f"{own} = None")
    source.line(depth, f"{limit} = _mono() + _lt")
    inner = depth + 1
    source.location = cond_plan.steps[0].location
    if gen.checked:  # the deadline test comes before the condition's
        source.line(depth, "while True:")
        source.line(inner, f"if _mono() > _dl[0]: raise _missed({source.location!r})")
        source.line(inner, f"if not {test[0]} {counter.operator} {test[1]}: break")
    else:  # (a comparison of two ints cannot raise: no line of its own needed)
        source.line(depth, f"while {test[0]} {counter.operator} {test[1]}:")
    source.location = location
    source.line(inner, f"if _mono() > {limit}: raise _loop_timeout({location!r}, _lt)")

    # a body step before the counter's own ADD that computes the same value (t + 1 as a
    # write position): its int is taken rather than computed again
    same = _same_as_advance(body_plan, counter, f"{uid}j")

    def advance(at: int) -> None:
        """Nothing where the ADD stands: no other step reads its result (``find_counter``)
        and the steps after it read the counter itself, so it is computed at the end of
        the iteration, right into the counter (one line fewer to compile)."""

    if counter.materialize:  # other body steps read the counter as an array
        source.line(inner, f"{state[counter.counter]} = _i32({count})")
    body_namer = Namer(
        source, body_plan, f"{uid}b", dict(zip(body_plan.subgraph.inputIndexes, state))
    )
    counter_in = body_plan.subgraph.inputIndexes[counter.counter]
    ints = {counter_in: count}
    ints.update(
        {s.output: f"{uid}j{s.output}" for s in counter.scalars.values() if hasattr(s, "output")}
    )
    replace = {p: emit(body_namer) for p, emit in hoisted.items()}
    replace[counter.step] = advance
    elements: dict[int, list[str]] = {}  # index vector -> its elements' expressions
    advances = _advances(body_plan, counter) if _advance_in_range(counter) else set()
    for position, scalar in counter.scalars.items():
        if isinstance(scalar, counter_index.VectorStep):
            emitter = counter_index.emit_vector(
                source, scalar, ints, elements, counter.arrays, body_namer
            )
        elif isinstance(scalar, counter_index.SliceStep):
            emitter = counter_index.emit_slice(
                gen, source, body_plan, scalar, ints, elements, body_namer
            )
        elif isinstance(scalar, row_index.RowArgmax):
            emitter = row_index.emit_argmax(
                gen, source, body_plan, scalar, ints, counter.arrays, body_namer
            )
        elif isinstance(scalar, row_index.RowGather):
            emitter = row_index.emit_gather(gen, source, body_plan, scalar, ints, body_namer)
        elif isinstance(scalar, one_hot.Absorbed):
            emitter = one_hot.emit_absorbed
        elif isinstance(scalar, (one_hot.OneHotSelect, tuple)):
            emitter = one_hot.emit(
                gen, source, body_plan, scalar, ints, counter.arrays, body_namer, uid
            )
        else:
            # the counter's next value, or an int32 floored by a constant: in range
            in_range = scalar.output in advances or _quotient_in_range(scalar)
            emitter = _scalar_emitter(source, scalar, ints, counter.arrays, body_namer, in_range)
        replace[position] = emitter
    for position, body_step in enumerate(body_plan.steps):
        if body_step.kind is StepKind.IF and body_step.inputs[0] in ints:
            replace[position] = _if_emitter(gen, source, body_plan, body_step, body_namer, ints)
    gen.emit_steps(source, body_plan, body_namer, inner, replace)
    if same is not None:
        source.line(inner, f"{count} = {same}")
    else:
        source.line(inner, f"{count} += {counter.delta}")
        if not _advance_in_range(counter):
            source.line(
                inner, f"if not -2147483649 < {count} < 2147483648: {count} = _wrap32({count})"
            )
    source.location = location
    others = [k for k in range(n_carried) if k != counter.counter]
    if others:
        results = [body_namer(body_plan.subgraph.outputIndexes[k]) for k in others]
        source.line(inner, _assign([state[k] for k in others], results))
    source.line(depth, f"{state[counter.counter]} = _i32({count})")


_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
#: the comparison read with the counter on the left (``bound < counter``: ``counter > bound``)
_FLIPPED = {"<": ">", "<=": ">=", ">": "<", ">=": "<="}


def _advance_in_range(counter: specialize.CounterLoop) -> bool:
    """Whether ``counter + delta`` stays an int32 wherever the body runs: the loop's own
    test bounds the counter there (``counter < n`` with an int32 ``n`` leaves room for
    + 1), so the wrap test after the ADD would never fire and is not generated."""
    operator = counter.operator if counter.counter_first else _FLIPPED[counter.operator]
    delta = counter.delta
    if delta > 0:
        highest = _INT32_MAX if counter.bound_value is None else counter.bound_value
        if operator == "<":
            return highest - 1 + delta <= _INT32_MAX
        return operator == "<=" and highest + delta <= _INT32_MAX
    if delta < 0:
        lowest = _INT32_MIN if counter.bound_value is None else counter.bound_value
        if operator == ">":
            return lowest + 1 + delta >= _INT32_MIN
        return operator == ">=" and lowest + delta >= _INT32_MIN
    return True


def _advance_forms(body_plan, counter: specialize.CounterLoop) -> set[tuple]:
    """(operator, left, right) of a ``ScalarStep`` computing ``counter + delta``."""
    counter_in = body_plan.subgraph.inputIndexes[counter.counter]
    forms = {("+", counter_in, f"c{counter.delta}"), ("-", counter_in, f"c{-counter.delta}")}
    forms.add(("+", f"c{counter.delta}", counter_in))
    return forms


def _advances(body_plan, counter: specialize.CounterLoop) -> set[int]:
    """Outputs of the scalar steps that are ``counter + delta`` (a write position t + 1):
    in range wherever the counter's own ADD is (``_advance_in_range``)."""
    forms = _advance_forms(body_plan, counter)
    return {
        scalar.output
        for scalar in counter.scalars.values()
        if isinstance(scalar, specialize.ScalarStep)
        and (scalar.operator, scalar.left, scalar.right) in forms
    }


def _quotient_in_range(scalar: specialize.ScalarStep) -> bool:
    """``x // c`` of an int32 ``x`` by a constant ``c`` other than -1 (and 0, which
    ``scalar_steps`` leaves to the kernel): its magnitude is at most ``x``'s, so it
    is an int32 too (only INT32_MIN // -1 leaves the range)."""
    right = scalar.right
    return (
        scalar.operator == "//"
        and not isinstance(scalar.left, str)
        and isinstance(right, str)
        and int(right[1:]) not in (0, -1)
    )


def _same_as_advance(body_plan, counter: specialize.CounterLoop, stem: str) -> str | None:
    """The int variable of a ``ScalarStep`` placed before the counter's ADD/SUB that is
    ``counter + delta`` (or ``counter - -delta``), or None."""
    forms = _advance_forms(body_plan, counter)
    for position, scalar in counter.scalars.items():
        if position > counter.step or not isinstance(scalar, specialize.ScalarStep):
            continue
        if (scalar.operator, scalar.left, scalar.right) in forms:
            return f"{stem}{scalar.output}"
    return None


def _scalar_emitter(source, scalar, ints, arrays, namer, in_range: bool = False):
    """Emits ``specialize.ScalarStep``: one Python int operation (and its array if needed)."""

    def side(x) -> str:
        return x[1:] if isinstance(x, str) else ints[x]

    def emit(at: int) -> None:
        out = ints[scalar.output]
        source.line(at, f"{out} = {side(scalar.left)} {scalar.operator} {side(scalar.right)}")
        if not scalar.boolean and not in_range:
            source.line(at, f"if not -2147483649 < {out} < 2147483648: {out} = _wrap32({out})")
        if scalar.output in arrays:
            maker = "_b8" if scalar.boolean else "_i32"
            source.line(at, f"{namer(scalar.output)} = {maker}({out})")

    return emit


def _if_emitter(gen, source, plan, step, namer, ints):
    def emit(at: int) -> None:
        emit_if(gen, source, plan, step, namer, at, verdict=ints[step.inputs[0]])

    return emit


def _hoist(gen, source, body_plan, step, uid, depth, taken: set[int]) -> dict:
    """Loop-invariant body steps (``specialize.invariant_steps``): position -> emitter factory.

    Their results start as ``_UNSET`` before the loop; the step runs where it
    stands, in the first iteration only.
    """
    if not gen.specialize:
        return {}
    from nnhal.driver.executor.codegen import Namer  # codegen imports this module

    n_carried = len(body_plan.subgraph.outputIndexes)
    positions = specialize.invariant_steps(body_plan, n_carried, taken)
    if not positions:
        return {}
    first_only = gen.first_only.setdefault(body_plan.index, set())
    first_only.update(body_plan.steps[p].index for p in positions)
    names = Namer(source, body_plan, f"{uid}b")
    for position in positions:
        for index in body_plan.steps[position].outputs:
            source.line(depth, f"{names(index)} = _UNSET")

    def factory(position: int):
        body_step = body_plan.steps[position]

        def bind(namer):
            def emit(at: int) -> None:
                source.line(at, f"if {namer(body_step.outputs[0])} is _UNSET:")
                gen.emit_operation(source, body_plan, body_step, namer, at + 1)

            return emit

        return bind

    return {position: factory(position) for position in positions}
