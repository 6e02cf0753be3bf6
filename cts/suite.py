"""The suite as a Python API: collect the tests of the chosen families, run them.

``Config`` holds what ``nnhal cts`` takes on its command line;
``collect(config)`` gives the ``TestCase`` list (families in run order,
``--filter`` globs applied); ``run_suite(device, address, config)`` runs
them against a connected client ``Device`` and returns a ``Report`` (every
``Result``, the families, the wall time, what the target said about
itself). Tests of this project call ``run_suite`` directly against
in-process servers; the CLI (``nnhal.cts.cli``) adds connecting, printing and
report files.
"""

from __future__ import annotations

import fnmatch
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from nnhal.cts.core import Outcome, Result, TestCase
from nnhal.cts.expectations import Expectations, load_expectations
from nnhal.cts.families import DEFAULT_FAMILIES, FAMILIES, Library, family_module
from nnhal.cts.report import skipped_families
from nnhal.cts.runner import Runner
from nnhal.cts.target import Options, Target

from nnhal.suggest import unknown_names

__all__ = ["Config", "Report", "collect", "run_suite"]


@dataclass
class Config:
    families: tuple[str, ...] = DEFAULT_FAMILIES
    filters: tuple[str, ...] = ()
    jobs: int = 1
    timeout: float = 60.0
    max_timeouts: int = 10
    expectations: str | None = None
    progress: bool = False
    options: Options = field(default_factory=Options)
    #: also fail on families skipped as a whole and on unexpected passes (xpass)
    strict: bool = False

    def __post_init__(self) -> None:
        unknown = [f for f in self.families if f not in FAMILIES]
        if unknown:
            raise ValueError(unknown_names("family", unknown, FAMILIES))


@dataclass
class Report:
    results: list[Result]
    families: tuple[str, ...]
    duration: float
    info: dict[str, Any]
    not_run_reason: str | None = None
    strict: bool = False

    def by_id(self) -> dict[str, Result]:
        return {r.id: r for r in self.results}

    def outcomes(self, family: str | None = None, prefix: str = "") -> dict[str, Outcome]:
        return {
            r.id: r.outcome
            for r in self.results
            if (family is None or r.family == family) and r.id.startswith(prefix)
        }

    def skipped_families(self) -> dict[str, str]:
        """Families every test of which was skipped -> the most frequent reason."""
        return skipped_families(self.results, self.families)

    @property
    def strict_problems(self) -> list[str]:
        """What ``--strict`` fails on beyond failures: whole-family skips and xpasses."""
        found = [f"family {f} skipped whole: {why}" for f, why in self.skipped_families().items()]
        found += [f"{r.id} passed unexpectedly (xpass)" for r in self.results
                  if r.outcome == Outcome.XPASS]  # fmt: skip
        return found

    @property
    def ok(self) -> bool:
        if any(r.outcome.is_problem for r in self.results):
            return False
        return not (self.strict and self.strict_problems)


def collect(config: Config, library: Library | None = None) -> list[TestCase]:
    """Every test of the chosen families (in FAMILIES order), filtered by the globs."""
    families = [f for f in FAMILIES if f in config.families]
    if library is None:
        library = Library.load(config.options.specs, corpus=config.options.corpus)
    cases: list[TestCase] = []
    for name in families:
        module = family_module(name)
        collector = getattr(module, f"collect_{name.replace('-', '_')}", None) or module.collect
        cases.extend(collector(library, config.options))
    if config.filters:
        cases = [c for c in cases if any(fnmatch.fnmatchcase(c.id, g) for g in config.filters)]
    seen: set[str] = set()
    for c in cases:
        if c.id in seen:
            raise ValueError(f"duplicate test id {c.id!r}")
        seen.add(c.id)
    return cases


def run_suite(
    device: Any,
    address: str,
    config: Config,
    *,
    tests: Sequence[TestCase] | None = None,
    on_result: Callable[[Result], None] | None = None,
) -> Report:
    """Run the suite against a connected client Device (``nnhal.client.Device``)."""
    expectations = load_expectations(config.expectations) if config.expectations else Expectations()
    cases = list(tests) if tests is not None else collect(config)
    target = Target(device, address, config.options)
    started = time.monotonic()
    info = target.describe()
    runner = Runner(
        target,
        jobs=config.jobs,
        timeout=config.timeout,
        expectations=expectations,
        progress=config.progress,
        max_timeouts=config.max_timeouts,
        on_result=on_result,
    )
    results = runner.run(cases)
    duration = time.monotonic() - started
    info["duration"] = round(duration, 3)
    info["unusedExpectations"] = [e.pattern for e in expectations.unused()]
    families = tuple(f for f in FAMILIES if f in config.families)
    report = Report(results, families, duration, info, runner.down, config.strict)
    info["skippedFamilies"] = report.skipped_families()
    return report
