"""CompiledModel: a model compiled for the CPU executor, and compile_model.

``compile_model`` builds the plans (``compiler``). How they run is the
executor setting (``EXECUTORS``): by default the first execution interprets
them (``interpreter``) and the second generates the main function
(``codegen``), so a model run once never pays for generated code; the checked
variant is generated the first time an execution comes with a deadline.
``run`` hands back fresh arrays of each output operand's dtype.

``Cancel`` stops a running execution from another thread (the client went
away, its session ended): it runs the checked variant, whose per-operation
deadline test then fails, and ``run`` reports the cancellation.
"""

from __future__ import annotations

import contextvars
import logging
import os
import threading
from collections.abc import Callable, Sequence

import numpy as np
from nnhal.driver.executor import code_cache, verbose
from nnhal.driver.executor.codegen import _PASS, Generator, located
from nnhal.driver.executor.compiler import Checked, compile_plans, output_dtypes
from nnhal.driver.executor.interpreter import Interpreter, StepFailed
from nnhal.driver.executor.operands import map_model_pools
from nnhal.driver.executor.plan import SubgraphPlan
from nnhal.driver.executor.shapes import apply_proofs, prove_shapes
from nnhal.driver.limits import out_of_memory

from nnhal.errors import GeneralFailure, HalError, InvalidArgument
from nnhal.types import LOOP_TIMEOUT_DEFAULT_NS, TIME_POINT_MAX_NS, Model

log = logging.getLogger(__name__)

#: How a compiled model runs its plans:
#: - ``"tiered"`` (the default): its first execution is interpreted (``interpreter``);
#:   from the second on, each variant's code is generated when first needed;
#: - ``"generated"``: the main function's code is generated at compile time (every
#:   execution runs generated code);
#: - ``"interpreted"``: never generated (for tests, and to compare).
#: Set by ``compile_model(executor=...)``, else ``$NNHAL_EXECUTOR``, else the default.
EXECUTORS = ("tiered", "generated", "interpreted")
EXECUTOR_ENV = "NNHAL_EXECUTOR"


def executor_setting(executor: str | None = None) -> str:
    """The executor of models compiled now (``EXECUTORS``); ValueError naming the
    variable for a value that is not one of them."""
    value = executor if executor is not None else os.environ.get(EXECUTOR_ENV) or EXECUTORS[0]
    if value not in EXECUTORS:
        raise ValueError(
            f"executor must be one of {', '.join(EXECUTORS)} (compile_model(executor=...) "
            f"or ${EXECUTOR_ENV}), got {value!r}"
        )
    return value


#: the deadline cell (``[absolute monotonic ns]``, -1 once cancelled) of the execution
#: running in this thread, for kernels that wait on something outside it (op-package
#: workers); None = no deadline and not cancellable
_DEADLINE: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar(
    "nnhal_execution_deadline", default=None
)


def current_deadline() -> int | None:
    """The deadline of the execution this thread is running, read now (it becomes -1
    when the execution is cancelled); None: no deadline."""
    cell = _DEADLINE.get()
    if cell is None or cell[0] >= TIME_POINT_MAX_NS:
        return None
    return cell[0]


class Cancel:
    """A cancellable execution: ``cancel(reason)`` from any thread stops it at its next
    operation (or WHILE iteration) with a GeneralFailure giving the reason.

    It is the deadline cell the generated checked code compares against
    (``_dl[0]``): cancelling sets the deadline to -1, so an execution that is
    never cancelled pays only the checked variant's comparison per operation.
    """

    __slots__ = ("cell", "reason")

    def __init__(self) -> None:
        self.cell = [TIME_POINT_MAX_NS]
        self.reason: str | None = None

    def cancel(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
        self.cell[0] = -1

    @property
    def cancelled(self) -> bool:
        return self.reason is not None


def compile_model(
    model: Model,
    *,
    pool_views: list[memoryview] | None = None,
    specialize: bool = True,
    max_tensor_bytes: int | None = None,
    checked: Checked | None = None,
    recipes: dict | None = None,
    executor: str | None = None,
) -> CompiledModel:
    """Compile an already validated model (``specialize=False``: no ``specialize`` patterns).

    Raises InvalidArgument when an operation is rejected by its registry
    checks (or is not supported), GeneralFailure for internal failures.
    ``max_tensor_bytes`` (``Limits``; None = unchecked): a result proven above it is
    RESOURCE_EXHAUSTED_PERSISTENT now, the others are checked at run time
    (``tensor_guard``). ``checked``: what the device's analysis of this very model
    established (``compiler.Checked``: the operations whose checks passed, and the
    operand descriptions), reused rather than made again. ``recipes``: where the
    generated functions' texts are kept for an identical model compiled alike (the
    caller's store, keyed by the variant: see ``CompiledModel``); None: none kept.
    ``executor``: one of ``EXECUTORS`` (None: ``$NNHAL_EXECUTOR``, else ``"tiered"``).
    """
    try:
        mode = executor_setting(executor)
    except ValueError as exc:  # the driver's configuration, not the model
        raise GeneralFailure(str(exc)) from None
    if pool_views is None:
        pool_views = map_model_pools(model)
    try:
        plans = compile_plans(model, pool_views, checked)
        if checked is not None and checked.proven is not None:
            proofs = checked.proven
            apply_proofs(plans, proofs)
        else:
            proofs = prove_shapes(plans, max_tensor_bytes)
    except HalError:
        raise
    except MemoryError as exc:
        raise out_of_memory("compilation", exc) from exc
    except Exception as exc:  # a malformed model the validator let through
        raise GeneralFailure(f"cannot compile model: {type(exc).__name__}: {exc}") from exc
    compiled = CompiledModel(
        model,
        plans,
        specialize=specialize,
        max_tensor_bytes=max_tensor_bytes,
        recipes=recipes,
        executor=mode,
    )
    compiled.proofs = proofs
    return compiled


def _outside_steps(exc: Exception) -> HalError:
    """The HAL error of an exception no generated step raised: a HalError itself, a
    MemoryError as RESOURCE_EXHAUSTED, an exception naming its own (``hal_error``, e.g.
    an op-package KernelFault), anything else GENERAL_FAILURE."""
    if isinstance(exc, HalError):
        return exc
    if isinstance(exc, MemoryError):
        return out_of_memory("execution", exc)
    hal_error = getattr(exc, "hal_error", None)
    if hal_error is not None:
        return hal_error("execution")
    return GeneralFailure(f"execution failed: {type(exc).__name__}: {exc}")


class CompiledModel:
    """Plans of every subgraph plus their generated functions; reusable and thread-safe."""

    def __init__(
        self,
        model: Model,
        plans: dict[int, SubgraphPlan],
        *,
        specialize: bool = True,
        max_tensor_bytes: int | None = None,
        recipes: dict | None = None,
        executor: str = "generated",
    ) -> None:
        self.model = model
        self.plans = plans
        #: (subgraph, operation) -> the output positions whose shapes were proven
        self.proofs: dict[tuple[int, int], frozenset[int]] = {}
        self._specialize = specialize
        self._max_tensor_bytes = max_tensor_bytes
        self._n_inputs = len(model.main.inputIndexes)
        self._dtypes = output_dtypes(model)
        self._lock = threading.Lock()
        #: (checked, specialize) -> {subgraph: recipe} (``Generator.recipes``), or None
        self._recipes = recipes
        #: one of ``EXECUTORS``; "interpreted" from then on if generating code failed
        self.executor = executor_setting(executor)
        #: executions that started without generated code for their variant (the tiered
        #: executor interprets the first and generates the code at the second)
        self.executions = 0
        #: the client preparing (``code_cache.set_owner``): the code generated for this
        #: model later, during its executions, is kept for that client alone
        self._owner = code_cache.owner()
        #: checked -> the generator of that variant, once made
        self._generators: dict[bool, Generator] = {}
        #: checked -> the generated main function of that variant, once made
        self._mains: dict[bool, Callable] = {}
        self._interpreters: dict[bool, Interpreter] = {}
        if self.executor == "generated":
            try:
                self._generated(False)
            except HalError:
                raise
            except Exception as exc:  # generated code that does not compile: our bug
                raise GeneralFailure(f"cannot generate code: {type(exc).__name__}: {exc}") from exc

    def _variant(self, checked: bool) -> dict | None:
        if self._recipes is None:
            return None
        return self._recipes.setdefault((checked, self._specialize), {})

    def _generator(self, checked: bool) -> Generator:
        """The generator of one variant (made once; call with the lock held or at init)."""
        gen = self._generators.get(checked)
        if gen is None:
            gen = self._generators[checked] = Generator(
                self.plans,
                checked=checked,
                specialize=self._specialize,
                max_tensor_bytes=self._max_tensor_bytes,
                recipes=self._variant(checked),
                owner=self._owner,
            )
        return gen

    def _generated(self, checked: bool) -> Callable:
        """The generated main function of one variant, generated on first use."""
        main = self._mains.get(checked)  # built once, then read without the lock
        if main is not None:
            return main
        with self._lock:
            main = self._mains.get(checked)
            if main is None:
                main = self._mains[checked] = self._generator(checked).function(0)
            return main

    def _interpreter(self, checked: bool) -> Interpreter:
        found = self._interpreters.get(checked)
        if found is None:
            found = self._interpreters.setdefault(
                checked,
                Interpreter(self.plans, checked=checked, max_tensor_bytes=self._max_tensor_bytes),
            )
        return found

    def _runner(self, checked: bool) -> Callable:
        """What runs this execution: the generated main function of the variant, or the
        interpreter's (the first execution of a tiered model, every one of an
        interpreted model, all after generating code failed)."""
        main = self._mains.get(checked)
        if main is not None:
            return main
        self.executions += 1  # (a race only interprets one execution more)
        if self.executor == "interpreted" or (self.executor == "tiered" and self.executions == 1):
            return self._interpret(checked)
        try:
            return self._generated(checked)
        except Exception as exc:  # our bug: the interpreter runs the model instead
            log.warning(
                "cannot generate code for a compiled model (%s: %s); interpreting it from now on",
                type(exc).__name__,
                exc,
                exc_info=True,
            )
            self.executor = "interpreted"
            return self._interpret(checked)

    def _interpret(self, checked: bool) -> Callable:
        interpreter = self._interpreter(checked)
        if checked:
            return lambda *args: interpreter.run(0, args[:-2], args[-2], args[-1])
        return lambda *args: interpreter.run(0, args[:-1], args[-1])

    def _traced_main(self, trace: Callable[[str], object], *, checked: bool) -> Callable:
        plans = verbose.traced_plans(self.plans, trace)
        generator = Generator(
            plans,
            checked=checked,
            specialize=False,
            max_tensor_bytes=self._max_tensor_bytes,
            owner=self._owner,
        )
        return generator.function(0)

    def source(self, subgraph: int = 0, *, checked: bool = False) -> str:
        """The Python source generated for one subgraph (0 = main), as it runs.

        Each subgraph compiles to one straight-line function: a line per
        operation calling its bound kernel (``k<subgraph>_<operation>``), IF as
        ``if``/``else``, WHILE as a loop with its timeout test, and the
        specialized patterns inlined. ``checked=True`` gives the variant used
        when an execution has a deadline or can be cancelled (a deadline test
        before every operation). Subgraphs that are inlined into their caller
        get a function of their own here only for reading, and the generic loop
        behind each counter loop (``fallback_loop``) follows its function.
        Generates the code if no execution has (the executions of an interpreted
        model still do not run it).
        """
        self._generated(checked)
        with self._lock:
            gen = self._generator(checked)
            gen.function(subgraph)  # inlined subgraphs get a function on demand
        texts = [gen.sources[subgraph]]
        for loop in gen.fallbacks.get(subgraph, ()):
            loop.generate()
            texts.append(loop.text)
        return "\n\n".join(texts)

    def run(
        self,
        inputs: Sequence[np.ndarray | None],
        *,
        deadline_ns: int | None = None,
        loop_timeout_ns: int = LOOP_TIMEOUT_DEFAULT_NS,
        cancel: Cancel | None = None,
        trace: Callable[[str], object] | None = None,
    ) -> list[np.ndarray]:
        """Execute main; one fresh array per main output, with its runtime shape.

        ``inputs``: one array per main input (None = no value), of the operand
        dtype. ``deadline_ns``: absolute ``time.monotonic_ns()`` (None: none), checked
        before each operation. ``loop_timeout_ns``: loopTimeoutDuration of each WHILE.
        Both as ``nnhal.driver.deadlines`` normalises them (``PreparedModel.execute`` does,
        once per execution): no default or clamp is applied here.
        ``cancel``: makes the run cancellable (always the checked variant).
        ``trace``: called with one line per operation as it runs, giving its inputs
        and outputs (``nnhal.driver.executor.verbose``; slow, for debugging).
        Raises MissedDeadline(transient=True) or GeneralFailure.
        """
        if len(inputs) != self._n_inputs:
            raise InvalidArgument(
                f"the model has {self._n_inputs} inputs; {len(inputs)} values given"
            )
        if cancel is not None:
            if deadline_ns is not None and not cancel.cancelled:
                cancel.cell[0] = deadline_ns
            extra = (loop_timeout_ns, cancel.cell)
        elif deadline_ns is None:
            extra = (loop_timeout_ns,)
        else:
            extra = (loop_timeout_ns, [deadline_ns])
        if trace is not None:
            function = self._traced_main(trace, checked=len(extra) == 2)
            for line in verbose.input_lines(inputs):
                trace(line)
        else:
            function = self._runner(len(extra) == 2)
        # kernels that wait outside this thread (op-package workers) read the cell too
        deadline_token = _DEADLINE.set(extra[1]) if len(extra) == 2 else None
        # IEEE results (inf, nan) are what NNAPI computes: no numpy warnings
        token = _fp_ignore()
        try:
            outputs = function(*inputs, *extra)
        except Exception as exc:
            # what a step raised, as the HAL error naming it: the interpreter named it
            # already (``StepFailed``); the generated code has no try of its own
            # (``codegen.located``); the HAL errors that travel unchanged
            cause: BaseException | None = exc
            if isinstance(exc, StepFailed):
                error, cause = exc.error, exc.__cause__
            else:
                error = exc if isinstance(exc, _PASS) else located(exc)
            if error is None:  # outside any step (argument binding, recursion...)
                error = _outside_steps(exc)
                if error is not exc:
                    raise error from exc
            if cancel is not None and cancel.cancelled:
                raise GeneralFailure(f"execution cancelled: {cancel.reason}") from None
            if error is exc:
                raise
            raise error from cause
        finally:
            _fp_restore(token)
            if deadline_token is not None:
                _DEADLINE.reset(deadline_token)
        return self._finish(outputs, inputs)

    def _finish(self, outputs: tuple, inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        """Fresh, writable arrays of the operand dtypes; copy only what needs it.

        Kernels return fresh arrays, so this is normally a few attribute reads;
        a view, a read-only array, a wrong dtype, an input handed back or an
        output listed twice is copied.
        """
        result: list[np.ndarray] = []
        for value, dtype in zip(outputs, self._dtypes):
            if value is None:
                raise GeneralFailure(f"main output {len(result)} was not computed")
            if (
                type(value) is not np.ndarray
                or value.base is not None
                or (value.dtype is not dtype and dtype is not None)
                or not value.flags.writeable
                or _among(value, inputs)
                or _among(value, result)
            ):
                try:
                    value = np.array(value, dtype=dtype)
                except Exception as exc:
                    raise GeneralFailure(
                        f"main output {len(result)}: cannot convert the result to "
                        f"{dtype}: {type(exc).__name__}: {exc}"
                    ) from exc
            result.append(value)
        return result


def _among(value: object, values: Sequence[object]) -> bool:
    for other in values:
        if other is value:
            return True
    return False


def _fast_fp_state():
    """(enter, exit) functions that make numpy ignore floating-point errors.

    numpy >= 2 keeps the ufunc error state in a context variable; setting it
    directly costs a quarter of ``np.errstate``'s microsecond per execution.
    """
    try:
        from numpy._core.umath import _extobj_contextvar, _make_extobj

        ignore = _make_extobj(all="ignore")
        var = _extobj_contextvar

        def enter():
            return var.set(ignore)

        return enter, var.reset
    except Exception:  # noqa: BLE001  (older numpy: the public context manager)

        def enter_public():
            state = np.errstate(all="ignore")
            state.__enter__()
            return state

        return enter_public, lambda state: state.__exit__(None, None, None)


_fp_ignore, _fp_restore = _fast_fp_state()
