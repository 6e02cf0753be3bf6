"""Compiled plans: what the compiler knows about each subgraph.

A ``SubgraphPlan`` holds the steps of one subgraph in execution order, each
bound to its kernel (or to a ``LateBinding`` when a scalar parameter is only
known at run time), the subgraph's constants decoded once, and the
references of IF / WHILE steps to other subgraphs. The code generator turns
plans into straight-line Python; nothing here runs in the hot path except
``LateBinding.bind``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

import numpy as np
from nnhal.driver.ops.registry import (
    Kernel,
    OpContext,
    OperandInfo,
    OperationDef,
    validate_operation,
)

from nnhal.errors import GeneralFailure, InvalidArgument
from nnhal.types import OPERAND_TYPE_INFO, Subgraph


class StepKind(enum.Enum):
    OPERATION = "operation"  # an ordinary registry operation
    IF = "IF"
    WHILE = "WHILE"


@dataclass
class Step:
    """One operation of a subgraph, ready to run."""

    kind: StepKind
    subgraph: int  # 0 = main, k = referenced[k-1]
    index: int  # operation index inside the subgraph
    name: str  # HAL name ("ADD", "WHILE", ...)
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    #: operand indexes handed to the kernel (tensor-typed inputs, in order)
    kernel_inputs: tuple[int, ...] = ()
    kernel: Kernel | None = None
    late: LateBinding | None = None
    #: IF: (then, else); WHILE: (cond, body) -- subgraph numbers
    refs: tuple[int, ...] = ()
    #: the compile-time context of an ordinary operation (for prepare)
    context: OpContext | None = None
    #: output positions whose shape is proven at compile time: no runtime check
    proven: frozenset[int] = frozenset()
    #: the operation's ``OperationDef.pure``: False = never hoisted out of a loop
    pure: bool = True

    @property
    def where(self) -> str:
        return f"subgraph {self.subgraph}, operation {self.index}"

    @property
    def location(self) -> str:
        return f"{self.name} ({self.where})"


@dataclass
class SubgraphPlan:
    """The compiled form of one subgraph."""

    index: int
    subgraph: Subgraph
    steps: list[Step] = field(default_factory=list)
    #: operand index -> decoded value (read-only), decoded once at compile time
    constants: dict[int, np.ndarray] = field(default_factory=dict)

    @property
    def has_while(self) -> bool:
        return any(step.kind is StepKind.WHILE for step in self.steps)


#: cached kernels per late-bound step (distinct runtime scalar values seen)
_LATE_CACHE_LIMIT = 64


class LateBinding:
    """Binds a kernel at run time for a step whose scalar inputs are not constants.

    An activation or axis may be a model input or computed by another
    operation; its value is only known when the step runs. ``bind`` rebuilds
    the context with the runtime values, validates it (a bad value is an
    execution failure, not an invalid model) and returns the kernel. Kernels
    are cached per tuple of scalar values, so a loop whose scalar stays the
    same binds once.
    """

    def __init__(
        self,
        op: OperationDef,
        ctx: OpContext,
        positions: tuple[int, ...],
    ) -> None:
        self.op = op
        self.ctx = ctx
        self.positions = positions  # op input positions of the runtime scalars
        self._cache: dict[tuple, Kernel] = {}

    @property
    def location(self) -> str:
        return f"{self.ctx.name} ({self.ctx.where})"

    def bind(self, *values) -> Kernel:
        key = tuple(_scalar_key(v) for v in values)
        kernel = self._cache.get(key)
        if kernel is not None:
            return kernel
        inputs = list(self.ctx.inputs)
        for position, value in zip(self.positions, values):
            inputs[position] = _runtime_info(inputs[position], value)
        ctx = OpContext(self.op, inputs, self.ctx.outputs, self.ctx.relaxed, self.ctx.where)
        try:
            validate_operation(ctx)
            kernel = self.op.kernel(ctx)
        except InvalidArgument as exc:
            raise GeneralFailure(f"{exc.message} (value given at execution time)") from exc
        except Exception as exc:  # a binding bug must not escape as a raw error
            raise GeneralFailure(
                f"{self.location}: cannot bind kernel: {type(exc).__name__}: {exc}"
            ) from exc
        if len(self._cache) >= _LATE_CACHE_LIMIT:
            self._cache.clear()
        self._cache[key] = kernel
        return kernel


def _scalar_key(value) -> object:
    if value is None:
        return None
    array = np.asarray(value)
    return (array.dtype.str, array.shape, array.tobytes())


def _runtime_info(info: OperandInfo, value) -> OperandInfo:
    if value is None:
        return replace(info, omitted=True, value=None)
    type_info = OPERAND_TYPE_INFO.get(info.type)
    dtype = None if type_info is None else type_info.dtype
    array = np.array(value, dtype=dtype)
    if array.size == 1:
        array = array.reshape(())
    array.flags.writeable = False
    return replace(info, value=array, omitted=False)


def post_order(
    roots: Iterable[int], children: Callable[[int], Iterable[int]], done: Iterable[int] = ()
) -> list[int]:
    """Subgraph numbers reachable from ``roots``, every child before its parents.

    Iterative (nesting can be 10 000 deep); numbers in ``done`` are neither
    listed nor walked into.
    """
    order: list[int] = []
    seen = set(done)
    stack = [(n, False) for n in roots]
    while stack:
        number, expanded = stack.pop()
        if number in seen:
            continue
        if expanded:
            seen.add(number)
            order.append(number)
            continue
        stack.append((number, True))
        stack.extend((child, False) for child in children(number) if child not in seen)
    return order
