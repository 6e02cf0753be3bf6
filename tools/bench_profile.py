"""Where an execution's time goes: per operation, and condition / body / branches.

``profile_operations`` compiles the model again with every kernel wrapped in
a timer (``time.perf_counter_ns`` around each call) and without the
executor's specialisations (a specialised counter or dense layer has no
kernel call to time), runs it, and attributes the time of each operation to
the role of its subgraph: ``main``, ``condition`` or ``body`` of a WHILE,
``branch`` of an IF. What is not inside any kernel is ``control`` (loop
bookkeeping, loop timeout checks, IF dispatch, plus the timers' own cost,
about 0.1 µs per call, which is why the profile is a breakdown and not a
latency). Transport is measured by the suite as the difference between the
gRPC and the in-process ``prepared`` medians.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np


class _Timed:
    """A kernel (or a late binding's kernels) adding its time to ``totals[key]``."""

    def __init__(self, totals: dict, key: str) -> None:
        self.totals = totals
        self.key = key
        totals.setdefault(key, [0, 0])

    def wrap(self, kernel):
        slot = self.totals[self.key]
        clock = time.perf_counter_ns

        def timed(*args):
            t0 = clock()
            try:
                return kernel(*args)
            finally:
                slot[0] += clock() - t0
                slot[1] += 1

        return timed


class _TimedLate:
    def __init__(self, late, timer: _Timed) -> None:
        self._late = late
        self._timer = timer
        self.positions = late.positions

    def bind(self, *values):
        return self._timer.wrap(self._late.bind(*values))


def _roles(plans) -> dict[int, str]:
    roles = {0: "main"}
    for plan in plans.values():
        for step in plan.steps:
            if step.kind.value == "WHILE":
                roles.setdefault(step.refs[0], "condition")
                roles.setdefault(step.refs[1], "body")
            elif step.kind.value == "IF":
                for ref in step.refs:
                    roles.setdefault(ref, "branch")
    return roles


def profile_operations(
    model, inputs, *, loop_timeout_ns: int, runs: int = 3, compile=None
) -> dict:
    """Per-operation and per-role time of one execution (the fastest of ``runs``).
    ``compile(model)``: an unspecialised compiled model (default ``compile_model``; the
    bench harness gives its device's, with op-package kernels)."""
    from nnhal.driver.executor import compile_model
    from nnhal.driver.executor.model import CompiledModel

    if compile is None:
        base = compile_model(model, specialize=False)
    else:
        base = compile(model)
    model = base.model  # after any op-package rewrite rules
    roles = _roles(base.plans)
    best: dict | None = None
    for _ in range(max(1, runs)):
        totals: dict[str, list[int]] = {}
        where: dict[str, int] = {}
        plans = {}
        for number, plan in base.plans.items():
            steps = []
            for step in plan.steps:
                if step.kind.value != "operation":
                    steps.append(step)
                    continue
                timer = _Timed(totals, step.location)
                where[step.location] = number
                if step.late is not None:
                    steps.append(replace(step, late=_TimedLate(step.late, timer)))
                else:
                    steps.append(replace(step, kernel=timer.wrap(step.kernel)))
            plans[number] = replace(plan, steps=steps)
        compiled = CompiledModel(model, plans, specialize=False)
        args = [None if a is None else np.array(a, copy=True) for a in inputs]
        t0 = time.perf_counter_ns()
        compiled.run(args, loop_timeout_ns=loop_timeout_ns)
        wall = time.perf_counter_ns() - t0
        if best is None or wall < best["wall_ns"]:
            best = {"wall_ns": wall, "totals": totals, "where": where}
    assert best is not None
    wall = best["wall_ns"]
    operations = []
    by_role: dict[str, float] = {}
    for location, (ns, calls) in best["totals"].items():
        role = roles.get(best["where"][location], "main")
        by_role[role] = by_role.get(role, 0.0) + ns / 1e3
        operations.append(
            {
                "operation": location,
                "role": role,
                "calls": calls,
                "total_us": ns / 1e3,
                "per_call_us": ns / 1e3 / calls if calls else 0.0,
                "share": ns / wall if wall else 0.0,
            }
        )
    operations.sort(key=lambda o: -o["total_us"])
    kernels = sum(o["total_us"] for o in operations)
    by_role["control"] = max(0.0, wall / 1e3 - kernels)
    return {"wall_us": wall / 1e3, "roles_us": by_role, "operations": operations}
