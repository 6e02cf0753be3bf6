"""Plans compiled to straight-line Python.

For every subgraph that is run as a function (main, IF branches and WHILE
conditions/bodies that are not inlined) we generate the source of one Python
function and ``exec`` it once. Operands become local variables (``v7``),
kernels and constants globals of the function's own namespace (``k0_1``,
``c0_2``: a module dict per function; CPython compiles a function reading
globals faster than one reading a factory's closure cells, greedy's text in
0.39 instead of 0.44 ms, and runs it as fast), so a step costs one kernel
call plus, when its result shape is not proven ahead (``shapes``) and the
operand's dimensions are declared, one shape comparison: no operand
dictionary, no interpreter loop. On the Fibonacci WHILE of
``bench/executor_bench.py`` this takes 2.1 µs per iteration against 5.0 µs
for a generic loop over the same step objects; with the patterns of
``specialize`` (counter in a Python int, FULLY_CONNECTED as ``np.dot``;
``Generator(specialize=False)`` turns them off) about 0.5 µs. Also off
without ``specialize``: dense layers sharing an input as one product
(``shared_input``) and a unary ufunc writing over a fresh ufunc result
(``in_place``).

Two variants of every function are generated: without any deadline check
(the common case costs nothing), and with one integer comparison against
the execution deadline before each operation (``_dl[0]``, absolute
``time.monotonic_ns()``; a one-element list shared by the nested calls, so
``model.Cancel`` can stop a running execution by setting it to -1). A
subgraph function takes its inputs positionally,
then ``_lt`` (loopTimeoutDuration in ns) and, when checked, ``_dl``, and
returns a tuple of its outputs.

With a tensor-size limit (``Generator(max_tensor_bytes=...)``), a step
whose result shape is not proven ahead is preceded by its ``TensorGuard``
and followed by a size test (``tensor_guard``).

Errors: a kernel exception is turned into GeneralFailure naming the
operation (a MemoryError into RESOURCE_EXHAUSTED_TRANSIENT). The generated code
carries no bookkeeping for that, not even a ``try``: the caller of the main
function (``CompiledModel.run``) hands the exception to ``located``, which
finds the innermost generated frame in its traceback and maps that frame's line
number back to the step that raised (its ``_locations``). A ``try`` around every
body had been an eighth of compiling a small function, paid at every first
preparation.
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np
from nnhal.driver.executor import (
    code_cache,
    control_flow,
    counter_index,
    in_place,
    one_hot,
    row_index,
    shared_input,
    specialize,
)
from nnhal.driver.executor.code_cache import compile_source
from nnhal.driver.executor.fallback_loop import FallbackLoop
from nnhal.driver.executor.plan import Step, StepKind, SubgraphPlan, post_order
from nnhal.driver.executor.release import OPERAND as _OPERAND
from nnhal.driver.executor.release import release_dead
from nnhal.driver.executor.tensor_guard import (
    TensorGuard,
    needs_guard,
    too_big_result,
    unproven_tensors,
)
from nnhal.driver.limits import out_of_memory

from nnhal.errors import (
    DeviceUnavailable,
    GeneralFailure,
    HalError,
    InvalidArgument,
    MissedDeadline,
    OutputInsufficientSize,
    ResourceExhausted,
)
from nnhal.types import OPERAND_TYPE_INFO, Operand, OperandLifeTime

#: HalErrors raised inside generated code that travel up unchanged (an
#: InvalidArgument from a kernel is an execution failure: it is wrapped).
_PASS = (
    GeneralFailure,
    MissedDeadline,
    OutputInsufficientSize,
    ResourceExhausted,
    DeviceUnavailable,
)

_CONSTANTS = (OperandLifeTime.CONSTANT_COPY, OperandLifeTime.CONSTANT_REFERENCE)
_counter = itertools.count()

#: lines of the generated module before the first body line (the def)
_HEADER_LINES = 1


#: the start of every generated function's file name (``_instantiate``)
_FILENAME = "<nnhal plan "


def located(exc: BaseException) -> HalError | None:
    """The HAL error of an exception raised by a line of generated code (``_wrap``), or
    None when no generated function's line raised it (argument binding of the main
    function). HAL errors that travel unchanged (``_PASS``) are the caller's to pass."""
    found = None
    tb = exc.__traceback__
    while tb is not None:  # the innermost generated frame: the step that raised
        if tb.tb_frame.f_code.co_filename.startswith(_FILENAME):
            found = tb
        tb = tb.tb_next
    if found is None:
        return None
    return _wrap(exc, found.tb_frame.f_globals["_locations"], found.tb_lineno)


def _wrap(exc: BaseException, locations: list[str | None], lineno: int) -> HalError:
    """GeneralFailure for an exception raised by line ``lineno`` of a generated function
    (or the HAL error an exception with ``hal_error(where)`` gives)."""
    line = lineno - _HEADER_LINES - 1
    location = locations[line] if 0 <= line < len(locations) else None
    return step_error(exc, location)


def step_error(exc: BaseException, location: str | None) -> HalError:
    """The HAL error of an exception a step at ``location`` raised (None: outside any
    step): a MemoryError is RESOURCE_EXHAUSTED, an exception with ``hal_error(where)``
    gives its own, anything else is a GeneralFailure naming the step."""
    prefix = location or "execution"
    if isinstance(exc, MemoryError):
        return out_of_memory(prefix, exc)
    hal_error = getattr(exc, "hal_error", None)  # an exception that knows its HAL error
    if hal_error is not None:  # (op-package KernelFault: a worker's timeout, death, raise)
        return hal_error(prefix)
    if isinstance(exc, InvalidArgument):
        # a run-time shape rule's message names its operation already (ctx.fail)
        message = exc.message
        return GeneralFailure(message if message.startswith(prefix) else f"{prefix}: {message}")
    return GeneralFailure(f"{prefix}: kernel failed: {type(exc).__name__}: {exc}")


def _missed(location: str) -> MissedDeadline:
    return MissedDeadline(f"execution deadline passed before {location}", transient=True)


def _shape_fail(location: str, position: int, operand: int, value, dims: tuple) -> GeneralFailure:
    got = list(np.shape(value))
    return GeneralFailure(
        f"{location}: output {position} (operand {operand}) has shape {got}, which "
        f"conflicts with its declared dimensions {list(dims)}"
    )


_GLOBALS: dict[str, object] = {
    "_mono": time.monotonic_ns,
    "_missed": _missed,
    "_shape_fail": _shape_fail,
    "_too_big": too_big_result,
    "_nb": lambda value: getattr(value, "nbytes", 0),
    **control_flow.RUNTIME_HELPERS,
    **specialize.RUNTIME_HELPERS,
    **counter_index.RUNTIME_HELPERS,
}


#: steps of one generated function; longer plans are split (Generator._emit_chunks)
CHUNK_STEPS = 1000
#: operations of an IF branch that is inlined where it is taken (``Generator.inline_branch``)
INLINE_BRANCH_STEPS = 4


def _build(
    fname: str, params: list[str], source: Source, what: str, owner: object
) -> tuple[Callable, str]:
    """Compile ``source`` as function ``fname(params)`` with its bound names; (function, text).
    ``owner``: whose code cache entry it is (``code_cache.compile_source``)."""
    text = "\n".join(
        [f"def {fname}({', '.join(params)}):"] + ["    " + line for line in source.lines]
    )
    function = _instantiate(text, list(source.closure), list(source.closure.values()), what, owner)
    return function, text


def _instantiate(
    text: str, names: list[str], values: list[object], what: str, owner: object
) -> Callable:
    """The function of ``text`` with the closure ``names`` bound to ``values``."""
    filename = f"{_FILENAME}{next(_counter)}: {what}>"
    namespace = dict(_GLOBALS)
    namespace.update(zip(names, values))
    exec(compile_source(text, filename, owner), namespace)  # noqa: S102 (our own source)
    # taken out of its own namespace: a function in the dict it reads would be a cycle,
    # keeping a released model's kernels and weights until the cyclic collector ran
    return namespace.pop(text[4 : text.index("(")])  # "def <name>(...):"


#: a closure variable bound to a step's value: kind, subgraph, operation (``Generator.bind``)
_STEP_VALUE = re.compile(r"(c|k|t|e|g|h|l|r|x|jw|jb|jk|shape_check)(\d+)_(\d+)")
_FUNCTION = re.compile(r"f(\d+)")


class _Unresolved(Exception):
    """A closure name a recipe cannot rebind: the function is generated again."""


class Source:
    """The body of one generated function, with the step behind each line."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.locations: list[str | None] = []
        self.closure: dict[str, object] = {}
        self.location: str | None = None
        self._uid = 0

    def line(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)
        self.locations.append(self.location)

    def bind(self, name: str, value: object) -> str:
        """A closure variable; the same name always holds the same object."""
        self.closure.setdefault(name, value)
        return name

    def fresh(self, stem: str) -> str:
        self._uid += 1
        return f"{stem}{self._uid}"


class Namer:
    """Python expression for each operand of one subgraph instance."""

    def __init__(
        self,
        source: Source,
        plan: SubgraphPlan,
        prefix: str,
        overrides: dict[int, str] | None = None,
    ) -> None:
        self.source = source
        self.plan = plan
        self.prefix = prefix
        self.overrides = overrides or {}

    def __call__(self, index: int) -> str:
        name = self.overrides.get(index)
        if name is not None:
            return name
        operand = self.plan.subgraph.operands[index]
        if operand.lifetime == OperandLifeTime.NO_VALUE:
            return "None"
        if operand.lifetime in _CONSTANTS:
            return self.source.bind(f"c{self.plan.index}_{index}", self.plan.constants[index])
        return f"{self.prefix}{index}"


class Generator:
    """Generates (once) the function of each subgraph, in one variant."""

    def __init__(
        self,
        plans: dict[int, SubgraphPlan],
        checked: bool,
        specialize: bool = True,
        max_tensor_bytes: int | None = None,
        recipes: dict[int, tuple[str, tuple[str, ...], list]] | None = None,
        owner: object = code_cache.CURRENT,
    ) -> None:
        self.plans = plans
        self.checked = checked
        #: the client the compiled code is kept for (``code_cache.set_owner``): by default
        #: the one preparing now; a generator made during an execution is given the
        #: preparation's (an execution's context names no client)
        self.owner = code_cache.owner() if owner is code_cache.CURRENT else owner
        #: subgraph -> (text, closure names, line locations) of its function, generated
        #: for plans of an identical model in this variant (``CompiledModel``); the
        #: function is rebuilt from them with this model's values, and new ones added
        self.recipes = recipes
        #: Limits.max_tensor_bytes (None: no size checks)
        self.max_tensor_bytes = max_tensor_bytes
        #: apply nnhal.driver.executor.specialize (off: every step calls its kernel)
        self.specialize = specialize
        self.functions: dict[int, Callable] = {}
        self.sources: dict[int, str] = {}
        #: subgraph -> indexes of its steps a loop computes in its first iteration only
        #: (``control_flow._hoist``): their results are never written in place
        self.first_only: dict[int, set[int]] = {}
        #: subgraph -> the generic loops its function calls (generated when first taken)
        self.fallbacks: dict[int, list[FallbackLoop]] = {}
        self._chunk_sources: dict[int, list[str]] = {}

    # -- driving ---------------------------------------------------------

    def function(self, number: int) -> Callable:
        """The function of subgraph ``number`` (generating what it calls first)."""
        for dependency in self._order(number):
            if dependency not in self.functions:
                self.functions[dependency] = self._generate(dependency)
        return self.functions[number]

    def inlined(self, number: int) -> bool:
        """WHILE conditions/bodies without WHILE of their own are inlined in the loop."""
        return not self.plans[number].has_while

    def inline_branch(self, number: int) -> bool:
        """IF branches of at most ``INLINE_BRANCH_STEPS`` operations (no IF or WHILE of
        their own, no input listed twice) become lines where they are taken: a function
        of a line or two had cost more to compile than its lines inline, and a call
        per execution (``control_flow.emit_if``)."""
        plan = self.plans[number]
        inputs = plan.subgraph.inputIndexes
        return (
            len(plan.steps) <= INLINE_BRANCH_STEPS
            and all(step.kind is StepKind.OPERATION for step in plan.steps)
            and len(set(inputs)) == len(inputs)
        )

    def _calls(self, number: int) -> list[int]:
        """Subgraphs whose functions the code of ``number`` calls."""
        called: list[int] = []
        for step in self.plans[number].steps:
            if step.kind is StepKind.IF:
                called.extend(r for r in step.refs if not self.inline_branch(r))
            elif step.kind is StepKind.WHILE:
                for ref in step.refs:
                    if self.inlined(ref):
                        called.extend(
                            r
                            for inner in self.plans[ref].steps
                            if inner.kind is StepKind.IF
                            for r in inner.refs
                            if not self.inline_branch(r)
                        )
                    else:
                        called.append(ref)
        return called

    def _order(self, root: int) -> list[int]:
        """Subgraphs still to generate from ``root``, callees before callers."""
        return post_order([root], self._calls, done=self.functions)

    def call(self, source: Source, number: int, args: list[str]) -> str:
        """Expression calling the function of subgraph ``number``."""
        name = source.bind(f"f{number}", self.functions[number])
        tail = ["_lt", "_dl"] if self.checked else ["_lt"]
        return f"{name}({', '.join(args + tail)})"

    # -- one function ------------------------------------------------------

    def _generate(self, number: int) -> Callable:
        recipe = self.recipes.get(number) if self.recipes is not None else None
        if recipe is not None:
            try:
                return self._rebuild(number, *recipe)
            except _Unresolved:
                pass
        plan = self.plans[number]
        subgraph = plan.subgraph
        source = Source()
        namer = Namer(source, plan, "v")
        chunked = len(plan.steps) > CHUNK_STEPS
        params = [namer(i) for i in subgraph.inputIndexes]
        if len(set(params)) != len(params) or any(not p.startswith("v") for p in params):
            # duplicated (or odd) inputs: take them by position, then name them
            positional = [f"_a{k}" for k in range(len(params))]
            prologue = [(p, a) for p, a in zip(params, positional) if p.startswith("v")]
            params = positional
        else:
            prologue = []
        params += ["_lt", "_dl"] if self.checked else ["_lt"]

        for target, value in prologue:
            source.line(0, f"{target} = {value}")
        outputs = [namer(i) for i in subgraph.outputIndexes]
        if chunked:
            defined = params + [target for target, _ in prologue]
            self._emit_chunks(source, plan, number, defined, outputs)
        else:
            starts = []
            for position, step in enumerate(plan.steps):
                starts.append(len(source.lines))
                self.emit_step(source, plan, namer, 0, position, step)
            release_dead(source.lines, source.locations, starts, set(outputs))
        source.location = f"subgraph {number} outputs"
        source.line(0, f"return ({''.join(o + ', ' for o in outputs)})")
        source.location = None
        source.bind("_locations", source.locations)  # read by ``located``

        fname = f"subgraph_{number}{'_checked' if self.checked else ''}"
        function, text = _build(fname, params, source, f"subgraph {number}", self.owner)
        self.sources[number] = "\n\n".join([*self._chunk_sources.pop(number, []), text])
        if self.recipes is not None and not chunked:
            self.recipes[number] = (text, tuple(source.closure), source.locations)
        return function

    def _rebuild(self, number: int, text: str, names: tuple[str, ...], locations: list) -> Callable:
        """The function of ``number`` from a recipe: the same text, this model's values.

        The text is a function of the model alone (the recipe's key says so), and a
        closure name says which value it stands for: ``k2_5`` is the kernel of
        operation 5 of subgraph 2, ``c0_8`` the constant operand 8 of main, and so on.
        """
        values = [self._closure_value(name, locations) for name in names]
        function = _instantiate(text, list(names), values, f"subgraph {number}", self.owner)
        self.sources[number] = text
        return function

    def _closure_value(self, name: str, locations: list) -> object:
        """The value ``name`` stands for in these plans (see ``Generator.bind``)."""
        if name == "_locations":
            return locations
        found = _STEP_VALUE.fullmatch(name)
        if found is not None:
            kind, number, index = found.group(1), int(found.group(2)), int(found.group(3))
            plan = self.plans[number]
            if kind == "c":
                return plan.constants[index]
            step = plan.steps[index]
            if step.index != index:
                raise _Unresolved(name)
            return self.bind(kind, plan, step)
        found = _FUNCTION.fullmatch(name)
        if found is not None:
            return self.functions[int(found.group(1))]
        raise _Unresolved(name)

    def bind(self, kind: str, plan: SubgraphPlan, step: Step) -> object:
        """The closure value of ``kind`` for ``step``: what ``emit_operation`` binds."""
        if kind == "k":
            return step.kernel
        if kind == "l":
            return step.late.bind
        if kind == "g":
            return TensorGuard(step, plan.subgraph.operands, self.max_tensor_bytes)
        if kind == "shape_check":
            return input_shape_check(plan, step)
        if kind == "h":
            return one_hot.table(plan, step)
        if kind == "r":
            return row_index.rows(plan, step)
        if kind in ("jw", "jb", "jk"):
            joint = self.joint(plan, step)
            if joint is None or (kind != "jk" and joint.steps[0] is not step):
                raise _Unresolved(kind)
            if kind == "jk":
                return shared_input.columns(joint, step)
            return joint.weights if kind == "jw" else joint.bias
        if kind == "x":  # a counter loop's generic loop (``fallback_loop``)
            loop = FallbackLoop(self, plan, step)
            self.fallbacks.setdefault(plan.index, []).append(loop)
            return loop
        fast = specialize.fast_fully_connected(step)
        if fast is None:
            raise _Unresolved(kind)
        return fast[0] if kind == "t" else fast[1]

    def _emit_chunks(
        self, source: Source, plan: SubgraphPlan, number: int, defined: list[str], outputs
    ) -> None:
        """Main-body lines calling one generated function per CHUNK_STEPS steps.

        CPython compiles one function in time growing with the square of its length (its
        locals and closure cells), so a long plan becomes a chain of chunk functions, each
        taking the operands it reads from earlier chunks (or the subgraph inputs) and
        returning those later chunks (or the outputs) read. Operand names are ``v<index>``
        and written once, so reads and writes are found by name.
        """
        tail = ["_lt", "_dl"] if self.checked else ["_lt"]
        steps = plan.steps
        count = len(steps)
        spans = [range(s, min(s + CHUNK_STEPS, count)) for s in range(0, count, CHUNK_STEPS)]
        pieces = []  # (chunk source, names it writes, names it reads)
        for span in spans:
            chunk = Source()
            namer = Namer(chunk, plan, "v")
            starts = []
            for position in span:
                starts.append(len(chunk.lines))
                self.emit_step(chunk, plan, namer, 0, position, steps[position])
            written = (namer(i) for p in span for i in steps[p].outputs)
            writes = {name for name in written if _OPERAND.fullmatch(name)}
            reads = set(_OPERAND.findall("\n".join(chunk.lines)))
            pieces.append((chunk, writes, reads, starts))
        known = set(defined)  # the function's parameters and prologue names
        for _, writes, _, _ in pieces:
            known |= writes
        needed_later = {o for o in outputs if _OPERAND.fullmatch(o)}
        live_out: list[list[str]] = [[] for _ in pieces]
        for k in range(len(pieces) - 1, -1, -1):
            chunk, writes, reads, _ = pieces[k]
            live_out[k] = sorted(writes & needed_later)
            needed_later |= (reads & known) - writes
        texts = []
        for k, (chunk, writes, reads, starts) in enumerate(pieces):
            ins = sorted((reads & known) - writes)
            release_dead(chunk.lines, chunk.locations, starts, set(live_out[k]))
            chunk.location = None
            chunk.line(0, f"return ({''.join(o + ', ' for o in live_out[k])})")
            chunk.bind("_locations", chunk.locations)
            fname = f"subgraph_{number}_part{k}{'_checked' if self.checked else ''}"
            function, text = _build(
                fname, ins + tail, chunk, f"subgraph {number} part {k}", self.owner
            )
            texts.append(text)
            call = f"{source.bind(f'_part{k}', function)}({', '.join(ins + tail)})"
            targets = "".join(o + ", " for o in live_out[k])
            source.line(0, f"{targets} = {call}" if targets else call)
        self._chunk_sources[number] = texts

    # -- steps -------------------------------------------------------------

    def emit_steps(
        self,
        source: Source,
        plan: SubgraphPlan,
        namer: Namer,
        depth: int,
        replace: dict[int, Callable[[int], None]] | None = None,
    ) -> None:
        """Lines of every step; ``replace`` maps a step's position to its own emitter."""
        for position, step in enumerate(plan.steps):
            self.emit_step(source, plan, namer, depth, position, step, replace)

    def emit_step(
        self,
        source: Source,
        plan: SubgraphPlan,
        namer: Namer,
        depth: int,
        position: int,
        step: Step,
        replace: dict[int, Callable[[int], None]] | None = None,
    ) -> None:
        """The lines of one step (``emit_steps``' body)."""
        source.location = step.location
        if self.checked:
            source.line(depth, f"if _mono() > _dl[0]: raise _missed({step.location!r})")
        missing = None
        if step.kind is not StepKind.OPERATION:
            missing = control_flow.no_value_input(step, namer)
        if missing is not None:
            source.line(depth, f"raise _no_input({step.location!r}, {missing[0]}, {missing[1]})")
        elif replace and position in replace:
            replace[position](depth)
        elif step.kind is StepKind.OPERATION:
            self.emit_operation(source, plan, step, namer, depth)
        elif step.kind is StepKind.IF:
            control_flow.emit_if(self, source, plan, step, namer, depth)
        else:
            control_flow.emit_while(self, source, plan, step, namer, depth)

    def emit_operation(
        self, source: Source, plan: SubgraphPlan, step: Step, namer: Namer, depth: int
    ) -> None:
        args = ", ".join(namer(i) for i in step.kernel_inputs)
        fast = specialize.fast_fully_connected(step) if self.specialize else None
        joint = self.joint(plan, step) if fast is not None else None
        if joint is not None:
            shared_input.emit(source, plan, joint, step, namer, depth)
            self.emit_shape_checks(source, plan, step, [namer(step.outputs[0])], depth)
            return
        if fast is not None:
            wt, bias = fast
            x = namer(step.kernel_inputs[0])
            w = source.bind(f"t{plan.index}_{step.index}", wt)
            out = namer(step.outputs[0])
            source.line(depth, f"{out} = _dot({x}, {w})")
            if bias is not None:
                b = source.bind(f"e{plan.index}_{step.index}", bias)
                source.line(depth, f"_addto({out}, {b}, {out})")
            self.emit_shape_checks(source, plan, step, [out], depth)
            return
        if step.late is not None:
            binder = source.bind(f"l{plan.index}_{step.index}", self.bind("l", plan, step))
            scalars = ", ".join(namer(step.inputs[p]) for p in step.late.positions)
            call = f"{binder}({scalars})({args})"
        else:
            kernel = source.bind(f"k{plan.index}_{step.index}", self.bind("k", plan, step))
            call = f"{kernel}({args})"
        outputs = [namer(i) for i in step.outputs]
        target = outputs[0] if len(outputs) == 1 else ", ".join(outputs)
        unproven = unproven_tensors(step, plan.subgraph.operands, self.max_tensor_bytes)
        if needs_guard(step, unproven):
            name = source.bind(f"g{plan.index}_{step.index}", self.bind("g", plan, step))
            source.line(depth, f"{name}({', '.join(namer(i) for i in step.inputs)})")
        check = self.bind("shape_check", plan, step)
        if check is not None:
            source.line(
                depth, f"{source.bind(f'shape_check{plan.index}_{step.index}', check)}({args})"
            )
        reuse = None
        if self.specialize and check is None and not unproven:
            reuse = in_place.reusable_input(plan, step, self.first_only.get(plan.index, set()))
        if reuse is not None:  # a unary ufunc over a fresh array nobody else reads
            x = namer(reuse)
            source.line(depth, f"{kernel}({x}, {x})")
            source.line(depth, f"{target} = {x}")
        else:
            source.line(depth, f"{target} = {call}")
        for position in unproven:
            out = outputs[position]
            source.line(
                depth,
                f"if _nb({out}) > {self.max_tensor_bytes}: raise _too_big({step.location!r}, "
                f"{position}, {step.outputs[position]}, {out}, {self.max_tensor_bytes})",
            )
        self.emit_shape_checks(source, plan, step, outputs, depth)

    def joint(self, plan: SubgraphPlan, step: Step) -> shared_input.Joint | None:
        """The FULLY_CONNECTED steps ``step`` shares its product with (``shared_input``),
        or None. Not in a plan split into chunks: the product would not reach a later one."""
        if not self.specialize or len(plan.steps) > CHUNK_STEPS:
            return None
        return shared_input.joints(plan, specialize.fast_fully_connected).get(step.index)

    def emit_shape_checks(
        self, source: Source, plan: SubgraphPlan, step: Step, names: list[str], depth: int
    ) -> None:
        """Fail when a result conflicts with a declared axis of its operand (OP_FAILED)."""
        for position, (index, name) in enumerate(zip(step.outputs, names)):
            if position in step.proven:
                continue  # shapes.prove_shapes showed it cannot conflict
            test = shape_test(plan.subgraph.operands[index], name)
            if test is not None:
                dims = tuple(plan.subgraph.operands[index].dimensions)
                source.line(
                    depth,
                    f"if {test}: raise _shape_fail({step.location!r}, {position}, {index}, "
                    f"{name}, {dims!r})",
                )


def input_shape_check(plan: SubgraphPlan, step: Step) -> Callable | None:
    """The operation's own shape rule (``prepare``) on the shapes its tensor inputs have at
    run time, for a step with an input whose declared shape is not fully known.

    With known shapes ``prepare`` ran at compile time; with an unknown axis or rank it
    could not decide, and a kernel handed shapes it cannot combine (e.g. [3] and [4] to a
    broadcasting op) would fail inside numpy. Raises InvalidArgument (the step's
    GENERAL_FAILURE, naming it) instead.
    """
    ctx = step.context
    if ctx is None or ctx.op.prepare is None or not step.kernel_inputs:
        return None
    operands = plan.subgraph.operands
    if all(_known(operands[i]) for i in step.kernel_inputs):
        return None
    slots = [
        (p, step.kernel_inputs.index(i))
        for p, i in enumerate(step.inputs)
        if i in step.kernel_inputs
    ]
    prepare, infos = ctx.op.prepare, list(ctx.inputs)
    positions = [k for _, k in slots]
    # The rule depends only on the inputs' shapes (types and constants are fixed), so
    # the shapes last found valid are remembered: in a loop body the same shapes come
    # back every iteration, and re-running the rule (a dataclass copy per input) had
    # cost 120 µs per LSTM step. Set only after the rule passed, in one assignment.
    last: list[tuple | None] = [None]

    def check(*arrays: object) -> None:
        key = tuple(getattr(arrays[k], "shape", arrays[k]) for k in positions)
        if key == last[0]:
            return
        actual = list(infos)
        for p, k in slots:
            value = arrays[k]
            if value is not None and p < len(actual):
                actual[p] = replace(actual[p], dimensions=tuple(np.shape(value)))
        prepare(replace(ctx, inputs=actual))
        last[0] = key

    return check


def _known(operand: Operand) -> bool:
    if operand.lifetime == OperandLifeTime.NO_VALUE:
        # always None at run time, as it was to the compile-time rule (an LSTM's
        # omitted peepholes had made every step re-check its shapes)
        return True
    dims = operand.dimensions
    info = OPERAND_TYPE_INFO.get(operand.type)
    return (info is not None and info.is_scalar) or (bool(dims) and all(dims))


def declared_dims(operand: Operand) -> tuple[tuple[int, ...], bool] | None:
    """(declared dimensions, all of them known) of a result its declared shape can
    conflict with; None for scalars, extension types and unknown ranks (nothing to test)."""
    info = OPERAND_TYPE_INFO.get(operand.type)
    dims = tuple(operand.dimensions)
    if info is None or info.is_scalar or not dims:
        return None
    return dims, all(dims)


def shape_test(operand: Operand, name: str) -> str | None:
    """A Python test that is true when ``name``'s shape conflicts with the declared dims."""
    declared = declared_dims(operand)
    if declared is None:
        return None
    dims, known = declared
    if known:
        return f"{name}.shape != {dims!r}"
    parts = [f"len({name}.shape) != {len(dims)}"]
    parts += [f"{name}.shape[{axis}] != {d}" for axis, d in enumerate(dims) if d]
    return " or ".join(parts)
