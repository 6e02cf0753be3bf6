"""The suite as a Python API: collect the tests of the chosen families, run them.

``Config`` holds the settings of a run; ``collect(config)`` gives the
``TestCase`` list (families in run order, ``filters`` globs applied: the
Python API's selection; on the command line pytest's ``-k`` selects);
``run_suite(device, address, config)`` runs them as a pytest session in
this process (``nnhal.cts.pytest_plugin``) against a connected client
``Device`` and returns a ``Report`` (every ``Result``, the families, the
wall time, what the target said about itself). Tests of this project call
``run_suite`` against in-process servers; ``nnhal cts`` and
``pytest --pyargs nnhal.cts`` run the same session from the command line.
"""

from __future__ import annotations

import fnmatch
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from nnhal.cts.core import Outcome, Result, TestCase
from nnhal.cts.families import DEFAULT_FAMILIES, FAMILIES, Library, family_module
from nnhal.cts.report import skipped_families
from nnhal.cts.target import Options

from nnhal.suggest import unknown_names

__all__ = ["Config", "Report", "collect", "run_suite"]


@dataclass
class Config:
    families: tuple[str, ...] = DEFAULT_FAMILIES
    #: globs over test ids (the Python API's selection)
    filters: tuple[str, ...] = ()
    #: seconds: the time limit of a test without its own (pytest-timeout)
    timeout: float = 60.0
    #: after this many tests timed out the rest fail as not run
    max_timeouts: int = 10
    expectations: str | None = None
    options: Options = field(default_factory=Options)
    #: listed tests that pass fail (strict xfail), and so does a family skipped whole
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
    pytest_args: Sequence[str] = (),
) -> Report:
    """Run the suite against a connected client Device (``nnhal.client.Device``) as a pytest
    session in this process; ``tests`` replaces the collected ones, ``pytest_args`` are added
    to the session's (e.g. ``["-x"]``). Exceptions of the session's own setup propagate."""
    import pytest
    from nnhal.cts.pytest_items import CTS_DIR, Given

    if tests is None:
        tests = collect(config)
    if not tests:
        raise ValueError("no tests to run (check the families and filters)")
    given = Given(config, device, address, list(tests))
    args = [
        str(CTS_DIR),
        "-p", "nnhal.cts.pytest_plugin",
        # the session is the suite's alone: no ini file, conftest or cache of the caller's
        "-c", os.devnull, "--rootdir", os.getcwd(), "--noconftest", "-p", "no:cacheprovider",
        "-p", "no:xdist", "-q", "-s",
        "--timeout", f"{config.timeout:g}",
        "--cts-max-timeouts", str(config.max_timeouts),
        *pytest_args,
    ]  # fmt: skip
    started = time.monotonic()
    code = pytest.main(args, plugins=[given])
    duration = time.monotonic() - started
    recorder, state = given.recorder, given.state
    if recorder is None or code in (pytest.ExitCode.INTERNAL_ERROR, pytest.ExitCode.USAGE_ERROR):
        raise RuntimeError(f"the conformance session could not run (pytest exit status {code})")
    families = tuple(f for f in FAMILIES if f in config.families)
    info = {**recorder.info, "duration": round(duration, 3)}
    report = Report(recorder.ordered(), families, duration, info, state.down, config.strict)
    info["skippedFamilies"] = report.skipped_families()
    return report
