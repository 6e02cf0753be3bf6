"""The verbose trace of an execution: every operation's inputs and outputs as it runs.

``CompiledModel.run(inputs, trace=print)`` runs the model through plans whose
kernels are wrapped to report each call, one line per operation executed
(an operation inside a WHILE body reports at every iteration), in execution
order. The traced run is generated without the specialized patterns
(``nnhal.driver.executor.specialize``), so every operation of the model shows
as itself; it is for looking, not for timing. ``nnhal run MODEL --trace``
prints it.

A tensor shows its dtype and shape, and its values when it has at most
``VALUES_SHOWN`` elements, else its minimum, maximum and mean.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np
from nnhal.driver.executor.plan import Step, StepKind, SubgraphPlan

#: tensors of at most this many elements are printed whole
VALUES_SHOWN = 8

Emit = Callable[[str], Any]


def describe(value: Any) -> str:
    """``float32[2,3] [...]`` or ``float32[1,64] min=.. max=.. mean=..``."""
    if value is None:
        return "no value"
    array = np.asarray(value)
    head = f"{array.dtype}[{','.join(str(d) for d in array.shape)}]"
    if array.size <= VALUES_SHOWN:
        return f"{head} {array.ravel().tolist()}"
    if array.dtype == np.bool_:
        return f"{head} true={int(array.sum())} of {array.size}"
    numbers = array.astype(np.float64)
    return f"{head} min={numbers.min():.6g} max={numbers.max():.6g} mean={numbers.mean():.6g}"


def _traced_kernel(step: Step, kernel: Callable, emit: Emit) -> Callable:
    def traced(*args: Any) -> Any:
        result = kernel(*args)
        outputs = result if len(step.outputs) > 1 else (result,)
        inputs = ", ".join(describe(a) for a in args)
        shown = ", ".join(describe(o) for o in outputs)
        emit(f"{step.location}: ({inputs}) -> ({shown})")
        return result

    return traced


class _TracedLate:
    """A ``LateBinding`` whose kernels report their calls (same ``bind`` and ``positions``)."""

    def __init__(self, step: Step, emit: Emit) -> None:
        assert step.late is not None
        self.late = step.late
        self.positions = step.late.positions
        self.step = step
        self.emit = emit

    def bind(self, *values: Any) -> Callable:
        return _traced_kernel(self.step, self.late.bind(*values), self.emit)


def _traced_step(step: Step, emit: Emit) -> Step:
    if step.kind is not StepKind.OPERATION:
        return step
    if step.late is not None:
        return replace(step, late=_TracedLate(step, emit))  # type: ignore[arg-type]
    assert step.kernel is not None
    return replace(step, kernel=_traced_kernel(step, step.kernel, emit))


def traced_plans(plans: dict[int, SubgraphPlan], emit: Emit) -> dict[int, SubgraphPlan]:
    """Copies of ``plans`` whose operations report to ``emit`` when they run."""
    return {
        number: replace(plan, steps=[_traced_step(s, emit) for s in plan.steps])
        for number, plan in plans.items()
    }


def input_lines(inputs: Sequence[Any]) -> list[str]:
    return [f"main input {k}: {describe(v)}" for k, v in enumerate(inputs)]
