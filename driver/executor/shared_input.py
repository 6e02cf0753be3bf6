"""Small dense layers that read one input: one ``np.dot`` for all of them.

A recurrent body often applies several FULLY_CONNECTED to the same state (a
decoder's output projection and its hidden-state update, an RNN's gates):
each is ``np.dot(x, Wt)`` plus its bias (``specialize.fast_fully_connected``),
0.7 µs of dispatch and allocation per layer at batch 1 whatever its size. The
steps of one subgraph that all

- run as ``fast_fully_connected``,
- read the same input operand, declared ``[1, size]`` (batch 1: every part of
  the joint result is a contiguous row, as a kernel's own result would be),
- either all add a bias or none does (a layer without one keeps the sign of a
  -0.0 result, as ``fast_fully_connected`` keeps it),
- and whose weights take at most ``MAX_BYTES`` together,

become one ``np.dot`` with the weights side by side (and one bias add), made
where the first of them stands; each step's result is its columns of that
product, a view taken at the step's own place. Results are the same sums in
another BLAS call, so they may differ from the separate products by the
order of summation (up to about two float32 epsilons of the sum of the terms'
magnitudes, which NNAPI's float32 tolerance allows); integers computed from
them (an ARGMAX) follow the floats.

Views are what some kernels hand back as well; ``CompiledModel._finish`` and the
WHILE results copy what is not an array of its own.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from nnhal.driver.executor.plan import Step, StepKind, SubgraphPlan

#: largest joint weight matrix (bytes): beyond a few hundred units a layer's own product
#: costs far more than a call, and the joint copy would only take memory
MAX_BYTES = 1 << 18


@dataclass(frozen=True)
class Joint:
    """FULLY_CONNECTED steps sharing their input, as one product."""

    steps: tuple[Step, ...]  # in plan order: the first computes the product
    columns: tuple[tuple[int, int], ...]  # each step's [start, stop) of the product
    weights: np.ndarray  # [size, total units], read-only
    bias: np.ndarray | None  # [1, total units], read-only, or None


def joints(plan: SubgraphPlan, fast) -> dict[int, Joint]:
    """Step index -> its ``Joint`` for every member (``fast``: ``fast_fully_connected``).

    Computed once per plan (the unchecked and checked variants both ask).
    """
    cached = plan.__dict__.get("_joints")
    if cached is None:
        cached = _find(plan, fast)
        plan.__dict__["_joints"] = cached
    return cached


def _find(plan: SubgraphPlan, fast) -> dict[int, Joint]:
    groups: dict[tuple[int, bool], list[tuple[Step, tuple]]] = {}
    operands = plan.subgraph.operands
    for step in plan.steps:
        if step.kind is not StepKind.OPERATION or step.name != "FULLY_CONNECTED":
            continue
        found = fast(step)
        if found is None:
            continue
        x = step.kernel_inputs[0]
        dims = tuple(operands[x].dimensions)
        if len(dims) != 2 or dims[0] != 1:
            continue
        groups.setdefault((x, found[1] is None), []).append((step, found))
    result: dict[int, Joint] = {}
    for members in groups.values():
        if len(members) < 2:
            continue
        weights = [found[0] for _, found in members]
        if sum(w.nbytes for w in weights) > MAX_BYTES:
            continue
        joint_weights = np.ascontiguousarray(np.concatenate(weights, axis=1))
        joint_weights.flags.writeable = False
        biases = [found[1] for _, found in members]
        bias = None
        if biases[0] is not None:
            bias = np.concatenate(biases, axis=1)
            bias.flags.writeable = False
        columns, start = [], 0
        for w in weights:
            columns.append((start, start + w.shape[1]))
            start += w.shape[1]
        joint = Joint(tuple(s for s, _ in members), tuple(columns), joint_weights, bias)
        for step, _ in members:
            result[step.index] = joint
    return result


def emit(source, plan: SubgraphPlan, joint: Joint, step: Step, namer, depth: int) -> None:
    """The lines of one member: the product where the first stands, then its columns."""
    first = joint.steps[0]
    product = f"{namer(first.outputs[0])}j"  # one per inlined copy of the plan
    if step is first:
        w = source.bind(f"jw{plan.index}_{first.index}", joint.weights)
        source.line(depth, f"{product} = _dot({namer(step.kernel_inputs[0])}, {w})")
        if joint.bias is not None:
            b = source.bind(f"jb{plan.index}_{first.index}", joint.bias)
            source.line(depth, f"_addto({product}, {b}, {product})")
    # the index as a bound tuple of slices: Python builds none per call (0.06 against 0.10 µs)
    key = source.bind(f"jk{plan.index}_{step.index}", columns(joint, step))
    source.line(depth, f"{namer(step.outputs[0])} = {product}[{key}]")


def columns(joint: Joint, step: Step) -> tuple[slice, slice]:
    """The index of ``step``'s columns in the joint product."""
    start, stop = joint.columns[joint.steps.index(step)]
    return (slice(None), slice(start, stop))
