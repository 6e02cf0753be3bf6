"""Measurement core of ``nnhal bench``: interleaved rounds, statistics, the two-point fit.

- ``run_rounds``: every case once as warm-up, then rounds in which every case
  runs once (so drift and noise from other processes hit all cases alike),
  until ``rounds`` rounds are done, or, with ``min_time``, until at least
  ``min_rounds`` rounds ran and the total time passed ``min_time`` seconds.
- ``Stats``: p50/p90/p95/p99 (linear interpolation), min, max, mean,
  standard deviation and spread ((p90 - p10) / p50) of samples in µs.
- ``two_point_fit``: per-iteration cost and fixed cost per call from the
  medians at two trip counts: ``per = (t2 - t1) / (n2 - n1)``,
  ``fixed = t1 - per * n1``. The fit is *noisy* when ``t2 - t1`` is not larger
  than the noise of the samples at either point (their p90 - p10) -- a
  negative cost is always noisy: the difference the fit rests on is then
  within what the timings scatter by, so its cost (and any ratio to it) is
  no measurement; tables show ``noisy`` instead of such figures.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Stats:
    n: int
    p50: float
    p90: float
    p95: float
    p99: float
    min: float
    max: float
    mean: float
    stdev: float
    spread: float  # (p90 - p10) / p50
    p10: float = 0.0

    @classmethod
    def of(cls, samples: list[float]) -> Stats:
        if not samples:
            raise ValueError("no samples")
        a = np.asarray(samples, np.float64)
        p10, p50, p90, p95, p99 = np.percentile(a, [10, 50, 90, 95, 99])
        return cls(
            n=len(samples),
            p50=float(p50),
            p90=float(p90),
            p95=float(p95),
            p99=float(p99),
            min=float(a.min()),
            max=float(a.max()),
            mean=float(a.mean()),
            stdev=float(statistics.stdev(samples)) if len(samples) > 1 else 0.0,
            spread=float((p90 - p10) / p50) if p50 > 0 else math.inf,
            p10=float(p10),
        )

    def as_dict(self) -> dict:
        return asdict(self)


def forget_preparations(device: Any) -> None:
    """Empty what makes preparing a model seen before cheaper, so that the next
    preparation is a model's first: the device's kept check results and the process's
    compiled generated code (the benchmark's own process)."""
    from nnhal.driver.executor import code_cache

    analyses = getattr(device, "analyses", None)
    if analyses is not None:
        analyses.clear()
    code_cache.clear()


def time_call(fn: Callable[[], object]) -> tuple[float, object]:
    """(µs, result) of one call."""
    t0 = time.perf_counter_ns()
    result = fn()
    return (time.perf_counter_ns() - t0) / 1e3, result


def run_rounds(
    cases: dict[str, Callable[[], object]],
    *,
    rounds: int = 5,
    warmup: int = 1,
    min_time: float | None = None,
    min_rounds: int = 3,
    max_rounds: int = 10_000,
    progress: Callable[[], None] | None = None,
) -> tuple[dict[str, list[float]], dict[str, object]]:
    """Samples (µs) per case, interleaved; and the warm-up result of each case."""
    first: dict[str, object] = {}
    for key, fn in cases.items():
        for _ in range(max(1, warmup)):
            first[key] = fn()
    samples: dict[str, list[float]] = {key: [] for key in cases}
    started = time.perf_counter()
    done = 0
    while True:
        for key, fn in cases.items():
            samples[key].append(time_call(fn)[0])
        done += 1
        if progress is not None:
            progress()
        if min_time is None:
            if done >= rounds:
                break
        elif done >= max_rounds or (
            done >= min_rounds and time.perf_counter() - started >= min_time
        ):
            break
    return samples, first


@dataclass(frozen=True)
class Fit:
    per_iteration_us: float
    fixed_us: float
    points: tuple[tuple[int, float], ...]  # (iterations, median µs)
    noise_us: float = 0.0  # the larger p90 - p10 of the samples at the two points
    noisy: bool = False  # t2 - t1 <= noise_us: the cost is not measured

    def as_dict(self) -> dict:
        return {
            "per_iteration_us": self.per_iteration_us,
            "fixed_us": self.fixed_us,
            "points": [list(p) for p in self.points],
            "noise_us": self.noise_us,
            "noisy": self.noisy,
        }


def two_point_fit(
    points: list[tuple[int, float]], noise: dict[int, float] | None = None
) -> Fit | None:
    """The fit through the fewest and the most iterations (None without two distinct counts).

    ``noise``: per iteration count, how far the samples there scatter (µs, p90 - p10);
    the fit is noisy when the rise between its two points is not larger than that, and
    whenever it is not positive.
    """
    pts = sorted(points)
    if len(pts) < 2 or pts[0][0] == pts[-1][0]:
        return None
    (n1, t1), (n2, t2) = pts[0], pts[-1]
    per = (t2 - t1) / (n2 - n1)
    scatter = max((noise or {}).get(n1, 0.0), (noise or {}).get(n2, 0.0))
    return Fit(per, t1 - per * n1, tuple(pts), scatter, t2 - t1 <= scatter)
