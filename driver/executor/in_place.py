"""A unary numpy function writing its result over its input: ``tanh(ADD(a, b))``.

A kernel that is a numpy ufunc returns a fresh array; when the only reader of
that array is a one-input ufunc (an activation such as TANH), the second can
write into the first's array rather than make one more (``np.tanh(x, x)``:
0.14 µs against 0.17 µs and a free at batch 1). The
generated code (``Generator.emit_operation``) does it for a step whose

- kernel is a one-input numpy ufunc, on a float32 or float16 operand of known
  rank (a ufunc over 0-d arrays gives a numpy scalar) whose result operand has
  the same type,
- input is the result of an earlier step of the same subgraph whose kernel is
  a numpy ufunc (its array belongs to this run of the plan, of the operand's
  dtype), not computed in a loop's first iteration only
  (``specialize.invariant_steps``: later iterations read it again),
- and input nobody else reads: one reader, and no subgraph output.
"""

from __future__ import annotations

import numpy as np
from nnhal.driver.executor.plan import Step, StepKind, SubgraphPlan

from nnhal.types import OperandType

_FLOATS = (OperandType.TENSOR_FLOAT32, OperandType.TENSOR_FLOAT16)


def _ufunc(step: Step, inputs: int | None = None) -> bool:
    kernel = step.kernel
    if step.kind is not StepKind.OPERATION or step.late is not None:
        return False
    if not isinstance(kernel, np.ufunc) or kernel.nout != 1 or len(step.outputs) != 1:
        return False
    return inputs is None or (kernel.nin == inputs and len(step.kernel_inputs) == inputs)


def _facts(plan: SubgraphPlan) -> tuple[dict[int, Step], dict[int, int]]:
    """(operand -> producing step, operand -> reads), once per plan."""
    cached = plan.__dict__.get("_in_place_facts")
    if cached is None:
        producers: dict[int, Step] = {}
        reads: dict[int, int] = {}
        for step in plan.steps:
            for index in step.outputs:
                producers[index] = step
            for index in step.inputs:
                reads[index] = reads.get(index, 0) + 1
        for index in plan.subgraph.outputIndexes:
            reads[index] = reads.get(index, 0) + 1
        cached = (producers, reads)
        plan.__dict__["_in_place_facts"] = cached
    return cached


def reusable_input(plan: SubgraphPlan, step: Step, first_only: set[int]) -> int | None:
    """The operand ``step`` may write its result into, or None (see the module docstring).

    ``first_only``: indexes of the steps computed in a loop's first iteration only.
    """
    if not _ufunc(step, 1):
        return None
    operands = plan.subgraph.operands
    x = step.kernel_inputs[0]
    kind = operands[x].type
    if kind not in _FLOATS or operands[step.outputs[0]].type != kind:
        return None
    if not operands[x].dimensions:  # rank unknown: a 0-d result is a numpy scalar, no array
        return None
    producers, reads = _facts(plan)
    producer = producers.get(x)
    if producer is None or not _ufunc(producer) or producer.index in first_only:
        return None
    if reads.get(x, 0) != 1 or x in plan.subgraph.inputIndexes:
        return None
    return x
