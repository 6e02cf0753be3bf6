"""The generic loop behind a counter loop, generated the first time it is taken.

A WHILE whose counter ``specialize.find_counter`` recognised runs over a Python
int while its counter (and bound) are int32 ``[1]`` arrays at run time
(``_counter_ok``); any other value (another dtype or shape, an omitted input)
takes the generic loop over arrays (``control_flow._emit_loop``). Executions
of the models the counter loop was made for never take it, yet generating and
compiling it beside the counter loop had been 11-14% of preparing a loop model.
So the function's ``else:`` branch calls a ``FallbackLoop`` instead: the
first call generates that same loop as a function of its own (the WHILE's
state in, the carried values out), every call runs it. Its lines, the step
named by a failure and the deadline and loop-timeout checks are those the loop
had inline; only the function holding them differs.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING

from nnhal.errors import GeneralFailure

if TYPE_CHECKING:
    from nnhal.driver.executor.codegen import Generator
    from nnhal.driver.executor.plan import Step, SubgraphPlan


class FallbackLoop:
    """``(state..., _lt[, _dl]) -> carried state``: the generic loop of one WHILE step."""

    __slots__ = ("_function", "_gen", "_lock", "_plan", "_step", "text")

    def __init__(self, gen: Generator, plan: SubgraphPlan, step: Step) -> None:
        # weakly: the generator's functions hold this loop, and a cycle would keep a
        # released model's kernels and weights alive until the cyclic collector ran
        # (preparing rnn again had taken 0.28 instead of 0.16 ms, the memory churned).
        # The model's CompiledModel holds its generators while any of its runs lasts.
        self._gen = weakref.ref(gen)
        self._plan = plan
        self._step = step
        self._function: Callable | None = None
        self._lock = threading.Lock()
        #: the generated source, once generated
        self.text: str | None = None

    def __call__(self, *args: object) -> tuple:
        function = self._function
        if function is None:
            function = self.generate()
        return function(*args)

    def generate(self) -> Callable:
        """The loop's function, generated once (also to read its ``text``)."""
        with self._lock:
            if self._function is None:
                gen = self._gen()
                if gen is None:  # not reached: runs go through the CompiledModel
                    raise GeneralFailure(f"{self._step.location}: the compiled model is gone")
                self._function, self.text = _generate(gen, self._plan, self._step)
            return self._function


def _generate(gen: Generator, plan: SubgraphPlan, step: Step) -> tuple[Callable, str]:
    # the generator's own helpers (codegen and control_flow import this module)
    from nnhal.driver.executor.codegen import Source, _build
    from nnhal.driver.executor.control_flow import _emit_loop

    body_plan = gen.plans[step.refs[1]]
    state = [f"s{k}" for k in range(len(step.inputs) - 2)]
    carried = state[: len(body_plan.subgraph.outputIndexes)]
    source = Source()
    _emit_loop(gen, source, step, state, "w", 0)
    source.line(0, f"return ({''.join(name + ', ' for name in carried)})")
    source.bind("_locations", source.locations)  # read by ``codegen.located``
    tail = ["_lt", "_dl"] if gen.checked else ["_lt"]
    variant = "_checked" if gen.checked else ""
    fname = f"while_{plan.index}_{step.index}_generic{variant}"
    what = f"subgraph {plan.index} operation {step.index} generic loop"
    return _build(fname, state + tail, source, what, gen.owner)
