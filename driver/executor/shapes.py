"""Shapes known ahead of execution, so the generated code can skip shape checks.

Every operation result is checked against the declared dimensions of its
operand (a conflict is the reference's OP_FAILED). That check costs a shape
comparison per step; in a small WHILE body it is a noticeable share of an
iteration. Here we prove, at compile time, which results cannot conflict:

- constants have their value's shape; main inputs with fully specified
  dimensions have exactly those (request validation guarantees it);
- an operation whose tensor inputs all have known shapes gets its output
  shapes from the registry's ``prepare``; a fully known result compatible
  with the declared dimensions needs no runtime check;
- a result with fully specified declared dimensions has exactly those after
  its check (proven or run), so later steps may rely on them;
- IF and WHILE results are proven when every way of producing them (both
  branches; the initial value and the body output) has the same known shape;
- a referenced subgraph's input is assumed to have its declared (fully
  specified) dimensions only when every call site provably passes them.
  Call sites depend on callers' shapes and loop bodies on themselves, so the
  assumptions are refined to a fixpoint: start optimistic, drop any that a
  call site cannot prove, recompute, until nothing changes.

This trusts kernels to produce the shapes their ``prepare`` announces (the
op tests check that). ``NNHAL_STRICT_SHAPES=1`` turns the proofs off, so
every result is checked at run time.

A ``prepare`` that rejects the shapes an operation is certain to receive
(InvalidArgument) makes compilation fail: such a model can never run.
"""

from __future__ import annotations

import os
from dataclasses import replace

from nnhal.driver.executor.plan import Step, StepKind, SubgraphPlan, post_order
from nnhal.driver.executor.tensor_guard import check_proven
from nnhal.driver.ops.registry import ValueNotConstant

from nnhal.errors import InvalidArgument
from nnhal.types import OPERAND_TYPE_INFO, Operand

Shape = tuple[int, ...]


def strict_shapes() -> bool:
    return os.environ.get("NNHAL_STRICT_SHAPES", "") not in ("", "0")


#: operand types holding an array of known dtype (the shapes proven here)
_TENSOR_TYPES = frozenset(
    code
    for code, info in OPERAND_TYPE_INFO.items()
    if not info.is_scalar and info.dtype is not None
)


def _tensor(operand: Operand) -> bool:
    return operand.type in _TENSOR_TYPES


def _declared_full(operand: Operand) -> Shape | None:
    dims = tuple(operand.dimensions)
    if _tensor(operand) and dims and all(dims):
        return dims
    return None


def _compatible(declared: tuple[int, ...], shape: Shape) -> bool:
    if not declared:
        return True
    return len(declared) == len(shape) and all(d in (0, s) for d, s in zip(declared, shape))


def _known(shape) -> Shape | None:
    if shape is None:
        return None
    shape = tuple(map(int, shape))
    return shape if not shape or min(shape) > 0 else None


class _Inference:
    def __init__(self, plans: dict[int, SubgraphPlan]) -> None:
        self.plans = plans
        self.order = post_order(
            plans, lambda n: (ref for step in plans[n].steps for ref in step.refs)
        )
        #: subgraph -> assumed shape of each input (None: nothing assumed)
        self.assumed: dict[int, list[Shape | None]] = {
            n: [_declared_full(p.subgraph.operands[i]) for i in p.subgraph.inputIndexes]
            for n, p in plans.items()
        }
        self.static: dict[int, dict[int, Shape]] = {}
        self.proven: dict[tuple[int, int], frozenset[int]] = {}
        #: prepare's InvalidArgument per step (only the final round counts:
        #: earlier rounds may rest on assumptions that get dropped)
        self.errors: list[InvalidArgument] = []

    def run(self) -> None:
        while True:
            self.static, self.proven, self.errors = {}, {}, []
            for number in self.order:
                self._subgraph(self.plans[number])
            if not self._refine():
                return

    def _refine(self) -> bool:
        """Drop the input assumptions a call site cannot prove; True if any dropped."""
        changed = False

        def require(target: int, position: int, sources: list[Shape | None]) -> None:
            nonlocal changed
            want = self.assumed[target][position]
            if want is not None and any(s != want for s in sources):
                self.assumed[target][position] = None
                changed = True

        for number, plan in self.plans.items():
            static = self.static[number]
            for step in plan.steps:
                if step.kind is StepKind.IF:
                    for branch in step.refs:
                        for k, arg in enumerate(step.inputs[3:]):
                            require(branch, k, [static.get(arg)])
                elif step.kind is StepKind.WHILE:
                    cond, body = step.refs
                    body_sg = self.plans[body].subgraph
                    body_static = self.static[body]
                    carried = len(body_sg.outputIndexes)
                    for k, arg in enumerate(step.inputs[2:]):
                        sources = [static.get(arg)]
                        if k < carried:
                            sources.append(body_static.get(body_sg.outputIndexes[k]))
                        require(cond, k, sources)
                        require(body, k, sources)
        return changed

    def _subgraph(self, plan: SubgraphPlan) -> None:
        subgraph = plan.subgraph
        operands = subgraph.operands
        static: dict[int, Shape] = {}
        #: operands whose known shape is their declared dimensions: an operation reading
        #: only those (and scalars) is asked about its own context as it is
        declared: set[int] = set()
        for index, shape in zip(subgraph.inputIndexes, self.assumed[plan.index]):
            if shape is not None:
                static[index] = shape
                declared.add(index)  # assumed: the declared, fully specified dimensions
        for index, value in plan.constants.items():
            operand = operands[index]
            if operand.type in _TENSOR_TYPES:
                static[index] = shape = tuple(value.shape)
                if shape and shape == tuple(operand.dimensions):
                    declared.add(index)
        for step in plan.steps:
            candidates = self._candidates(plan, step, static, declared)
            proven = set()
            for position, index in enumerate(step.outputs):
                operand = operands[index]
                shape = candidates[position] if position < len(candidates) else None
                dims = tuple(operand.dimensions)
                if (
                    shape is not None
                    and operand.type in _TENSOR_TYPES
                    and (shape == dims or _compatible(dims, shape))
                ):
                    proven.add(position)
                    static[index] = shape
                    if shape == dims and dims:  # (a rank-0 result of unknown declared rank
                        declared.add(index)  # is described with dimensions None)
                else:
                    full = _declared_full(operand)
                    if full is not None:  # the runtime check guarantees it
                        static[index] = full
                        declared.add(index)
            self.proven[(plan.index, step.index)] = frozenset(proven)
        self.static[plan.index] = static

    def _candidates(
        self, plan: SubgraphPlan, step: Step, static: dict[int, Shape], declared: set[int]
    ) -> list[Shape | None]:
        """The shape each output must have, when every way to produce it agrees.
        ``declared``: the operands whose known shape is their declared dimensions."""
        if step.kind is StepKind.IF:
            result = []
            for k in range(len(step.outputs)):
                shapes = {
                    self.static[b].get(self.plans[b].subgraph.outputIndexes[k]) for b in step.refs
                }
                result.append(shapes.pop() if len(shapes) == 1 else None)
            return result
        if step.kind is StepKind.WHILE:
            body = self.plans[step.refs[1]]
            result = []
            for k in range(len(step.outputs)):
                shapes = {
                    static.get(step.inputs[2 + k]),
                    self.static[body.index].get(body.subgraph.outputIndexes[k]),
                }
                result.append(shapes.pop() if len(shapes) == 1 else None)
            return result
        ctx = step.context
        if ctx is None or ctx.op.prepare is None:
            return []
        inputs = []
        changed = False
        # tensors (kernel inputs) all known as declared: the context describes them already
        for info, index in (
            () if declared.issuperset(step.kernel_inputs) else zip(ctx.inputs, step.inputs)
        ):
            dims = static.get(index)
            if (
                info.omitted
                or dims == info.dimensions
                or not _tensor(plan.subgraph.operands[index])
            ):
                inputs.append(info)
            else:
                inputs.append(replace(info, dimensions=dims))
                changed = True
        try:
            # most shapes are the declared ones: the step's own context then serves as is
            # (a dataclass copy per input and step had been a fifth of the proofs' cost)
            shapes = ctx.op.prepare(replace(ctx, inputs=inputs) if changed else ctx)
        except ValueNotConstant:
            # a scalar only known at run time leaves the decision to the runtime
            return []
        except InvalidArgument as exc:
            # shapes that can never work make the model invalid
            self.errors.append(exc)
            return []
        except Exception:  # noqa: BLE001  (a prepare that cannot decide: runtime checks do)
            return []
        return [_known(s) for s in shapes or []]


def prove_shapes(
    plans: dict[int, SubgraphPlan], max_tensor_bytes: int | None = None
) -> dict[tuple[int, int], frozenset[int]]:
    """Set ``Step.proven`` on every step of ``plans`` (nothing proven when strict);
    returns what it set, (subgraph, operation) -> positions (``apply_proofs``).

    Raises the InvalidArgument of an operation whose ``prepare`` rejects the
    shapes it is certain to get (e.g. inputs that cannot be broadcast), and
    RESOURCE_EXHAUSTED_PERSISTENT for a proven result above ``max_tensor_bytes``.
    """
    inference = _Inference(plans)
    inference.run()
    if inference.errors:
        raise inference.errors[0]
    if max_tensor_bytes is not None:
        check_proven(plans, inference.static, max_tensor_bytes)
    if strict_shapes():
        return {}
    apply_proofs(plans, inference.proven)
    return inference.proven


def apply_proofs(
    plans: dict[int, SubgraphPlan], proven: dict[tuple[int, int], frozenset[int]]
) -> None:
    """Set ``Step.proven`` from proofs made for plans of an identical model."""
    empty: frozenset[int] = frozenset()
    for number, plan in plans.items():
        for step in plan.steps:
            step.proven = proven.get((number, step.index), empty)
