"""The support rule: which of main's operations this device can run, and why not.

An ordinary operation is supported when the backend says so. An IF or WHILE is
supported only when the backend accepts the operation itself (profile,
operand types) *and* every operation of every subgraph it references is
supported, transitively through nested IF/WHILE (hal13.md §3.4).

Each referenced subgraph is decided once (memoized), in post-order over the
subgraph reference graph, which is walked with an explicit stack: no
recursion, and a reference cycle (validation rejects those before we get here)
is reported as a reason instead of looping. A subgraph's verdict is its first
unsupported operation, with the path down to the operation that is the cause:

    operation 0 (WHILE) -> body subgraph 2, operation 1 (IF) -> then subgraph 3,
    operation 0 (FULLY_CONNECTED): excluded by profile 'no-fc'

Verdicts are links (operation, subgraph it names), spelt out only for main's
operations, so 10 000-deep nesting costs linear time and memory; a path of
more than ``MAX_REASON_HOPS`` hops shows its two ends around
"... (N more nested levels)".

Subgraph numbers are those of the messages everywhere: 0 = main, k =
``Model.referenced[k-1]``. Only main's operations are reported.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nnhal.driver.backends import Backend, OpQuery
from nnhal.driver.ops.registry import OperandInfo

from nnhal.types import (
    OPERAND_TYPE_INFO,
    Model,
    Operand,
    OperandLifeTime,
    OperationType,
    Subgraph,
    operation_name,
)

#: (subgraph number, operation index) -> the backend's question for that operation
QueryFor = Callable[[int, int], OpQuery]

#: which inputs of IF / WHILE name subgraphs, and the role word used in reasons
_SUBGRAPH_ROLES: dict[int, tuple[tuple[int, str], ...]] = {
    OperationType.IF: ((1, "then"), (2, "else")),
    OperationType.WHILE: ((0, "cond"), (1, "body")),
}


def subgraph_at(model: Model, number: int) -> Subgraph:
    return model.main if number == 0 else model.referenced[number - 1]


def where(number: int, op_index: int) -> str:
    return f"subgraph {number}, operation {op_index}"


def light_operand_info(operand: Operand) -> OperandInfo:
    """An OperandInfo from the operand's description alone (no constant value)."""
    info = OPERAND_TYPE_INFO.get(operand.type)
    is_tensor = info is not None and not info.is_scalar
    dims = tuple(operand.dimensions)
    # positional (type, dimensions, scale, zeroPoint, extraParams, value, omitted): the
    # keywords had cost a third of the construction, once per IF/WHILE operand
    return OperandInfo(
        operand.type,
        None if (is_tensor and not dims) else dims,
        operand.scale,
        operand.zeroPoint,
        operand.extraParams,
        None,
        operand.lifetime == OperandLifeTime.NO_VALUE,
    )


def light_query(model: Model, number: int, op_index: int, extensions: Any = None) -> OpQuery:
    """A query built from operand descriptions only (used for IF/WHILE)."""
    subgraph = subgraph_at(model, number)
    op = subgraph.operations[op_index]
    return OpQuery(
        type=op.type,
        inputs=tuple(light_operand_info(subgraph.operands[i]) for i in op.inputs),
        outputs=tuple(light_operand_info(subgraph.operands[i]) for i in op.outputs),
        relaxed=model.relaxComputationFloat32toFloat16,
        where=where(number, op_index),
        extensions=extensions,
    )


def referenced_subgraphs(model: Model, number: int, op_index: int) -> list[tuple[str, int | None]]:
    """(role, subgraph number) for each subgraph an IF/WHILE names; None if the reference is bad."""
    subgraph = subgraph_at(model, number)
    op = subgraph.operations[op_index]
    refs: list[tuple[str, int | None]] = []
    for position, role in _SUBGRAPH_ROLES.get(op.type, ()):
        target = None
        if position < len(op.inputs) and 0 <= op.inputs[position] < len(subgraph.operands):
            operand = subgraph.operands[op.inputs[position]]
            offset = operand.location.offset
            if operand.lifetime == OperandLifeTime.SUBGRAPH and 0 <= offset < len(model.referenced):
                target = offset + 1
        refs.append((role, target))
    return refs


#: a failure: ("reason", ": why") at the operation itself, or ("link", role, target)
#: when the cause is inside the subgraph ``target`` an IF/WHILE names
Failure = tuple

#: a reason shows at most this many nesting hops (half at each end)
MAX_REASON_HOPS = 64


class SupportChecker:
    """Decides support for main's operations; one instance per model and question."""

    def __init__(
        self,
        model: Model,
        backend: Backend,
        query_for: QueryFor | None = None,
        name_of: Callable[[int], str] = operation_name,
    ) -> None:
        self.model = model
        #: anything with ``supports(OpQuery)``: a device's SupportPipeline, or a backend
        self.backend = backend
        self.query_for: QueryFor = query_for or (lambda n, j: light_query(model, n, j))
        #: how reasons name operations (op packages name their extension operations)
        self.name_of = name_of
        #: subgraph number -> None (all supported) or (operation index, its failure).
        #: Links, not strings: a reason spelt out per subgraph would cost O(depth^2).
        self._verdicts: dict[int, tuple[int, Failure] | None] = {}

    def check(self) -> tuple[list[bool], dict[int, str]]:
        """One bool per main operation, and a reason for every False."""
        self._decide_referenced()
        supported: list[bool] = []
        reasons: dict[int, str] = {}
        for index, op in enumerate(self.model.main.operations):
            failure = self._operation_failure(0, index)
            supported.append(failure is None)
            if failure is not None:
                reasons[index] = (
                    f"operation {index} ({self.name_of(op.type)}){self._render(failure)}"
                )
        return supported, reasons

    # ------------------------------------------------------------------

    def _render(self, failure: Failure) -> str:
        """The reason's tail: the path of links down to the cause (long paths elided)."""
        hops: list[str] = []
        while failure[0] == "link":
            _, role, target = failure
            verdict = self._verdicts[target]
            assert verdict is not None
            index, failure = verdict
            op = subgraph_at(self.model, target).operations[index]
            hops.append(
                f" -> {role} subgraph {target}, operation {index} ({self.name_of(op.type)})"
            )
        if len(hops) > MAX_REASON_HOPS:
            half = MAX_REASON_HOPS // 2
            skipped = len(hops) - 2 * half
            hops = [*hops[:half], f" -> ... ({skipped} more nested levels)", *hops[-half:]]
        return "".join(hops) + failure[1]

    def _children(self, number: int) -> list[int]:
        subgraph = subgraph_at(self.model, number)
        out = []
        for index, op in enumerate(subgraph.operations):
            if op.type in _SUBGRAPH_ROLES:
                out.extend(
                    t for _, t in referenced_subgraphs(self.model, number, index) if t is not None
                )
        return out

    def _decide_referenced(self) -> None:
        """Decide every subgraph reachable from main, children before parents."""
        # Iterative DFS; state: 1 = on the current path, 2 = decided.
        state: dict[int, int] = {0: 1}
        stack: list[tuple[int, list[int]]] = [(0, self._children(0))]
        while stack:
            number, pending = stack[-1]
            if pending:
                child = pending.pop()
                if state.get(child) is None:
                    state[child] = 1
                    stack.append((child, self._children(child)))
                # state 1 = a reference cycle: left undecided, reported by _operation_failure
                continue
            stack.pop()
            state[number] = 2
            if number != 0:
                self._verdicts[number] = self._subgraph_failure(number)

    def _subgraph_failure(self, number: int) -> tuple[int, Failure] | None:
        subgraph = subgraph_at(self.model, number)
        for index in range(len(subgraph.operations)):
            failure = self._operation_failure(number, index)
            if failure is not None:
                return index, failure
        return None

    def _operation_failure(self, number: int, index: int) -> Failure | None:
        """None when supported, else why: at the operation, or a link to a subgraph."""
        ok, reason = self.backend.supports(self.query_for(number, index))
        if not ok:
            return ("reason", f": {reason or 'not supported'}")
        op = subgraph_at(self.model, number).operations[index]
        if op.type not in _SUBGRAPH_ROLES:
            return None
        for role, target in referenced_subgraphs(self.model, number, index):
            if target is None:
                return ("reason", f": the {role} operand is not a valid subgraph reference")
            if target not in self._verdicts:
                # Only reachable through a reference cycle (never for a validated model).
                return ("reason", f" -> {role} subgraph {target}: subgraph reference cycle")
            if self._verdicts[target] is not None:
                return ("link", role, target)
        return None


def explain_support(
    model: Model,
    backend: Backend,
    query_for: QueryFor | None = None,
    name_of: Callable[[int], str] = operation_name,
) -> tuple[list[bool], dict[int, str]]:
    """Support for each of main's operations, with a reason for every False."""
    return SupportChecker(model, backend, query_for, name_of).check()
