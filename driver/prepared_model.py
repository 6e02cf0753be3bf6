"""The emulated IPreparedModel: one execution from request memory to request memory.

``PreparedModel.execute`` is the body shared by every execution path (sync,
async, fenced, burst: the service decides how to call it):

1. ``validate_request`` (unless the caller did); a deadline already past on
   arrival is MISSED_DEADLINE_PERSISTENT; ``loopTimeoutDuration`` defaults to 2 s
   and is clamped to the HAL maximum of 15 s (with a warning): the rules of
   ``nnhal.driver.deadlines``, applied here once per execution;
2. inputs are read from the request pools as numpy views (no copy; marked
   read-only because the driver must not modify input memory);
3. the compiled model runs (it checks the deadline and the loop timeout);
4. each output is checked against the request: a shape incompatible with the
   request's dimensions is GENERAL_FAILURE, a buffer too small is
   OUTPUT_INSUFFICIENT_SIZE with one OutputShape per output; then the outputs
   are written into the request pools.

Everything built at construction is immutable, so any number of executions
may run concurrently on one prepared model.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from nnhal.driver.deadlines import deadline_or_none, effective_loop_timeout
from nnhal.driver.executor.model import Cancel
from nnhal.driver.limits import out_of_memory, tensor_reason

from nnhal.errors import (
    GeneralFailure,
    HalError,
    InvalidArgument,
    MissedDeadline,
    OutputInsufficientSize,
    ResourceExhausted,
)
from nnhal.types import (
    NO_TIMING,
    OPERAND_TYPE_INFO,
    ExecutionPreference,
    Model,
    Operand,
    OperandType,
    OutputShape,
    Priority,
    Request,
    RequestArgument,
    Timing,
    combine_dimensions,
    element_count,
    operation_name,
    type_name,
)
from nnhal.validation import validate_request

log = logging.getLogger("nnhal.driver")

_BOOL_TYPES = frozenset({OperandType.BOOL, OperandType.TENSOR_BOOL8})


@dataclass(frozen=True)
class _IoSpec:
    """What execute needs to know about one main input or output, computed once."""

    position: int  # index in Request.inputs / Request.outputs
    operand: int  # operand index in main
    type: int
    dims: tuple[int, ...]
    is_scalar: bool
    dtype: np.dtype | None
    itemsize: int

    @classmethod
    def of(cls, position: int, operand_index: int, operand: Operand) -> _IoSpec:
        info = OPERAND_TYPE_INFO.get(operand.type)
        # frozen: the fields written once into the new instance's dict (the generated
        # __init__ had been most of describing a prepared model's inputs and outputs)
        spec = object.__new__(cls)
        spec.__dict__.update(
            position=position,
            operand=operand_index,
            type=operand.type,
            dims=tuple(operand.dimensions),
            is_scalar=info is not None and info.is_scalar,
            dtype=None if info is None else info.dtype,
            itemsize=0 if info is None else info.byte_size,
        )
        return spec

    def label(self, kind: str) -> str:
        return f"{kind} {self.position} (operand {self.operand}, {type_name(self.type)})"


class PreparedModel:
    """A compiled model ready for executions."""

    def __init__(
        self,
        model: Model,
        compiled,  # nnhal.driver.executor.CompiledModel
        *,
        preference: int = ExecutionPreference.FAST_SINGLE_ANSWER,
        priority: int = Priority.MEDIUM,
        max_tensor_bytes: int | None = None,
    ) -> None:
        self.model = model
        self.compiled = compiled
        self.preference = preference
        self.priority = priority
        #: Limits.max_tensor_bytes for the request's inputs (None: unchecked)
        self.max_tensor_bytes = max_tensor_bytes
        main = model.main
        self._inputs = tuple(
            _IoSpec.of(i, k, main.operands[k]) for i, k in enumerate(main.inputIndexes)
        )
        self._outputs = tuple(
            _IoSpec.of(i, k, main.operands[k]) for i, k in enumerate(main.outputIndexes)
        )
        self._needs_value = _inputs_needing_a_value(main)
        # the last request layout's input plan and accepted output check (_read_inputs,
        # _checked_outputs)
        self._last_input_plan: tuple[tuple[RequestArgument, ...], tuple] | None = None
        self._last_outputs: tuple[tuple[RequestArgument, ...], tuple, tuple] | None = None
        #: the service's memo of request layouts seen and accepted
        #: (``nnhal.driver.request_layouts``)
        self.request_layouts: dict = {}

    def execute(
        self,
        request: Request,
        pool_views: Sequence[memoryview],
        *,
        measure: bool = False,
        deadline_ns: int | None = None,
        loop_timeout_ns: int | None = None,
        allow_unspecified_output: bool = True,
        cancel: Cancel | None = None,
        validated: bool = False,
    ) -> tuple[tuple[OutputShape, ...], Timing]:
        """Run one request; raises a HalError (OutputInsufficientSize carries the shapes).

        ``cancel``: lets another thread stop the run (``nnhal.driver.executor.model.Cancel``).
        ``validated``: the caller has validated ``request`` against this model already
        (``validate_request``, as here otherwise). The deadline and loop timeout are
        normalised here (``nnhal.driver.deadlines``), once per execution."""
        entered = time.monotonic_ns()
        if not validated:
            validate_request(
                request, self.model, allow_unspecified_output=allow_unspecified_output
            )
        deadline_ns = deadline_or_none(deadline_ns)
        if deadline_ns is not None and entered >= deadline_ns:
            raise MissedDeadline("execute: the deadline had passed on arrival", transient=False)
        loop_timeout = effective_loop_timeout(loop_timeout_ns)
        if len(pool_views) != len(request.pools):
            raise InvalidArgument(
                f"request has {len(request.pools)} pools but {len(pool_views)} were mapped"
            )

        inputs = self._read_inputs(request.inputs, pool_views)
        started = time.monotonic_ns()
        try:
            results = self.compiled.run(
                inputs, deadline_ns=deadline_ns, loop_timeout_ns=loop_timeout, cancel=cancel
            )
        except HalError:
            raise
        except MemoryError as exc:
            raise out_of_memory("execution", exc) from exc
        except Exception as exc:  # a kernel bug must not kill the service thread
            log.exception("execution failed")
            raise GeneralFailure(f"execution failed: {type(exc).__name__}: {exc}") from exc
        finished = time.monotonic_ns()

        shapes, arrays = self._checked_outputs(request, results)
        for spec, arg, array in zip(self._outputs, request.outputs, arrays):
            if not arg.hasNoValue:
                _write(spec, arg, array, pool_views)
        if not measure:
            return shapes, NO_TIMING
        left = time.monotonic_ns()
        # Integer division of nested intervals keeps timeOnDevice <= timeInDriver.
        return shapes, Timing(
            timeOnDevice=(finished - started) // 1000, timeInDriver=(left - entered) // 1000
        )

    # ------------------------------------------------------------------

    def _read_inputs(
        self, arguments: tuple[RequestArgument, ...], views: Sequence[memoryview]
    ) -> list[np.ndarray | None]:
        """One read-only array per input (None: no value). What a read needs to know of the
        model and the argument is checked once per layout: clients repeat one request
        layout (the service hands back the same decoded arguments for it:
        ``request_layouts``), so the plan of the last one is kept. It is found by identity,
        and the entry holds the arguments it was made for, so a kept plan only ever serves
        those very arguments; the pools are checked on every read."""
        last = self._last_input_plan
        if last is not None and last[0] is arguments:
            return [_read(step, views) for step in last[1]]
        for spec, arg in zip(self._inputs, arguments):
            if arg.hasNoValue and spec.operand in self._needs_value:
                raise InvalidArgument(
                    f"{spec.label('input')} has no value (hasNoValue) but "
                    f"{self._needs_value[spec.operand]} requires one"
                )
        plan, inputs = [], []
        for spec, arg in zip(self._inputs, arguments):  # in this order: the first error wins
            step = self._plan_input(spec, arg)
            inputs.append(_read(step, views))
            plan.append(step)
        self._last_input_plan = (arguments, tuple(plan))  # one assignment: safe across threads
        return inputs

    def _plan_input(self, spec: _IoSpec, arg: RequestArgument) -> _Read | None:
        """Everything about reading one input that depends on the model and the argument
        alone, checked now; what depends on the pools is checked by ``_read``."""
        if arg.hasNoValue:
            return None
        if spec.dtype is None:
            raise InvalidArgument(f"{spec.label('input')}: this type has no data layout to read")
        if spec.is_scalar:
            dims: tuple[int, ...] = ()
        else:
            dims = tuple(arg.dimensions) or spec.dims
            if not dims or not all(dims):
                raise InvalidArgument(
                    f"{spec.label('input')}: dimensions {list(dims)} are not fully specified "
                    f"(give them in the model or in the request)"
                )
        count = element_count(dims)
        need = count * spec.itemsize
        if self.max_tensor_bytes is not None and need > self.max_tensor_bytes:
            raise ResourceExhausted(
                tensor_reason(spec.label("input"), spec.type, dims, need, self.max_tensor_bytes),
                transient=False,
            )
        loc = arg.location
        if loc.length != need:
            raise InvalidArgument(
                f"{spec.label('input')}: location length is {loc.length} bytes; dimensions "
                f"{list(dims)} need {need} bytes"
            )
        return _Read(
            spec, loc.poolIndex, loc.offset, need, count, spec.dtype, dims,
            spec.type in _BOOL_TYPES,
        )  # fmt: skip

    def _checked_outputs(
        self, request: Request, results: Sequence[np.ndarray]
    ) -> tuple[tuple[OutputShape, ...], list[np.ndarray]]:
        """``_check_outputs``, whose verdict is a function of the output arguments and the
        results' shapes and dtypes alone: the last accepted one is kept (the arguments by
        identity, as ``_read_inputs``) and the check runs again for anything else."""
        arrays = [np.asarray(result) for result in results]
        key = tuple([(array.shape, array.dtype) for array in arrays])
        last = self._last_outputs
        if last is not None and last[0] is request.outputs and last[1] == key:
            return last[2], arrays
        shapes, arrays = self._check_outputs(request, arrays)
        self._last_outputs = (request.outputs, key, shapes)
        return shapes, arrays

    def _check_outputs(
        self, request: Request, results: Sequence[np.ndarray]
    ) -> tuple[tuple[OutputShape, ...], list[np.ndarray]]:
        if len(results) != len(self._outputs):
            raise GeneralFailure(
                f"the executor returned {len(results)} outputs; the model has {len(self._outputs)}"
            )
        shapes: list[OutputShape] = []
        arrays: list[np.ndarray] = []
        short: list[str] = []
        for spec, arg, result in zip(self._outputs, request.outputs, results):
            array = np.asarray(result)
            if spec.dtype is not None and array.dtype != spec.dtype:
                raise GeneralFailure(
                    f"{spec.label('output')}: the executor produced {array.dtype} data; "
                    f"expected {spec.dtype}"
                )
            shape = array.shape  # a tuple of ints
            for source, dims in (("model", spec.dims), ("request", tuple(arg.dimensions))):
                if dims and dims != shape and combine_dimensions(dims, shape) is None:
                    raise GeneralFailure(
                        f"{spec.label('output')}: computed dimensions {list(shape)} are not "
                        f"compatible with the {source}'s dimensions {list(dims)}"
                    )
            need = array.nbytes
            sufficient = arg.hasNoValue or arg.location.length >= need
            if not sufficient:
                short.append(
                    f"{spec.label('output')} needs {need} bytes for dimensions {list(shape)}; "
                    f"the request gives {arg.location.length}"
                )
            shapes.append(OutputShape(dimensions=shape, isSufficient=sufficient))
            arrays.append(array)
        if short:
            raise OutputInsufficientSize("; ".join(short), tuple(shapes))
        return tuple(shapes), arrays


def _inputs_needing_a_value(main) -> dict[int, str]:
    """Main inputs a request may not omit: read by an operation position that is not
    optional (IF/WHILE and custom operations: every position), with the first such reader."""
    from nnhal.driver.ops import registry

    inputs = frozenset(main.inputIndexes)  # a request gives values to these alone
    needs: dict[int, str] = {}
    for k, op in enumerate(main.operations):
        if inputs.isdisjoint(op.inputs):
            continue
        definition = registry.lookup(op.type)
        args = definition.inputs if definition is not None else ()
        for pos, index in enumerate(op.inputs):
            if index in needs or index not in inputs:
                continue
            if definition is not None and definition.variadic:
                tail = len(op.inputs) - (len(args) - 1)
                arg = args[0] if pos < tail else args[1 + pos - tail]
            else:
                arg = args[pos] if pos < len(args) else None
            if arg is None or not arg.optional:
                name = f" ({arg.name})" if arg is not None else ""
                needs[index] = f"operation {k} ({operation_name(op.type)}) input {pos}{name}"
    return needs


@dataclass(frozen=True, slots=True)
class _Read:
    """One input's read, checked against the model and its argument (``_plan_input``)."""

    spec: _IoSpec
    pool: int
    offset: int
    need: int  # bytes
    count: int  # elements
    dtype: np.dtype
    dims: tuple[int, ...]
    boolean: bool  # any non-zero byte is true


def _read(step: _Read | None, views: Sequence[memoryview]) -> np.ndarray | None:
    """A read-only array of one input (None: no value); its bytes must lie in its pool."""
    if step is None:
        return None
    view = views[step.pool]
    offset, need = step.offset, step.need
    if offset + need > view.nbytes:
        raise InvalidArgument(
            f"{step.spec.label('input')}: bytes {offset}..{offset + need} are outside "
            f"pool {step.pool} ({view.nbytes} bytes)"
        )
    if not step.boolean:
        # read-only from the start: the driver must not modify input memory (and one
        # constructor call, where frombuffer, reshape and the flag were three)
        return np.ndarray(step.dims, step.dtype, view.toreadonly(), offset)
    array = np.frombuffer(view, dtype=np.uint8, count=step.count, offset=offset) != 0
    array = array.reshape(step.dims)
    array.flags.writeable = False
    return array


def _write(
    spec: _IoSpec, arg: RequestArgument, array: np.ndarray, views: Sequence[memoryview]
) -> None:
    need = array.nbytes
    if need == 0:
        return
    loc = arg.location
    view = views[loc.poolIndex]
    if loc.offset + need > view.nbytes:
        raise InvalidArgument(
            f"{spec.label('output')}: bytes {loc.offset}..{loc.offset + need} are outside "
            f"pool {loc.poolIndex} ({view.nbytes} bytes)"
        )
    if view.readonly:
        raise GeneralFailure(f"{spec.label('output')}: pool {loc.poolIndex} is read-only")
    source = array if array.flags.c_contiguous else np.ascontiguousarray(array)
    if view.format == "B" and view.ndim == 1:  # the pools' views: bytes, one copy
        try:
            view[loc.offset : loc.offset + need] = memoryview(source).cast("B")
            return
        except (TypeError, ValueError, NotImplementedError):
            pass  # a dtype the buffer protocol cannot describe: through numpy
    target = np.frombuffer(view, dtype=np.uint8, count=need, offset=loc.offset)
    target[...] = source.reshape(-1).view(np.uint8)
