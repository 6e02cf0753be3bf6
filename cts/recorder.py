"""The run's results, gathered from pytest's reports, and what is printed and written at its end.

The ``Recorder`` lives in the process that reports (the xdist controller, or
the only process): every ``CtsItem`` report carries ``cts_id``, ``cts_family``,
``cts_coverage``, ``cts_message``, ``cts_trouble`` and ``cts_expectation``
(set by the plugin's ``pytest_runtest_makereport`` where the test ran; they
travel with xdist's reports), and the recorder turns each test's phases into one
``nnhal.cts.core.Result``: passed, failed, skipped, xfail, xpass, timeout
(pytest-timeout's limit), error (not run because the target was down, or a
setup/teardown error).

At the end of the session it prints, in pytest's terminal summary, the table
of outcomes per family, the line naming every family skipped as a whole
(``--cts-strict`` fails the run on it), expectations that matched no
problem, and the coverage table when asked; it writes the JSON report and
the coverage file (``nnhal.cts.report``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from nnhal.cts.core import Outcome, Result

__all__ = ["Recorder"]


def _outcome(report: pytest.TestReport) -> Outcome:
    xfail = hasattr(report, "wasxfail")
    if report.when != "call":
        if report.skipped:
            return Outcome.XFAIL if xfail else Outcome.SKIPPED
        return Outcome.ERROR
    if report.passed:
        return Outcome.XPASS if xfail else Outcome.PASSED
    if report.skipped:
        return Outcome.XFAIL if xfail else Outcome.SKIPPED
    if "[XPASS(strict)]" in str(report.longrepr):
        return Outcome.XPASS
    trouble = report.cts_trouble
    if trouble == "timeout":
        return Outcome.TIMEOUT
    return Outcome.ERROR if trouble else Outcome.FAILED


class Recorder:
    """One Result per conformance test of the session, in the order they finished."""

    def __init__(self, families: tuple[str, ...] = ()) -> None:
        self.results: dict[str, Result] = {}
        self.families = families
        #: --cts-coverage: "-" prints the table, else the file it goes to
        self.coverage_to: str | None = None
        #: expectation patterns that matched a test that did not skip
        self.used_expectations: set[str] = set()
        self.info: dict[str, Any] = {}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Registered as a plugin of the session: every report comes here."""
        self.add(report)

    def add(self, report: pytest.TestReport) -> None:
        test_id = getattr(report, "cts_id", None)
        if test_id is None:
            return
        if report.when == "setup" and report.passed:
            return  # the call's report says how the test went
        if report.when == "teardown" and not report.failed:
            return
        outcome = _outcome(report)
        message = report.cts_message
        if outcome == Outcome.XFAIL:
            message = f"{report.wasxfail}: {message}" if message else report.wasxfail
        elif outcome == Outcome.XPASS:
            reason = getattr(report, "wasxfail", "") or str(report.longrepr)
            message = f"passed, but listed as an {reason}"
        elif outcome == Outcome.ERROR and report.when != "call" and not message:
            message = report.longreprtext.strip().splitlines()[-1] if report.longreprtext else ""
        self.results[test_id] = Result(
            test_id,
            report.cts_family,
            outcome,
            message,
            report.duration,
            tuple(tuple(p) for p in report.cts_coverage),
        )
        expectation = getattr(report, "cts_expectation", None)
        if expectation and outcome != Outcome.SKIPPED:
            self.used_expectations.add(expectation)

    def ordered(self) -> list[Result]:
        """The results by family (run order), then as they finished."""
        rank = {f: i for i, f in enumerate(self.families)}
        return sorted(self.results.values(), key=lambda r: rank.get(r.family, len(rank)))

    # ---- the end of the session ----

    def skipped_families(self) -> dict[str, str]:
        from nnhal.cts.report import skipped_families

        return skipped_families(self.ordered(), self.families)

    def strict_problems(self) -> list[str]:
        """What --cts-strict fails on beyond failed tests: families skipped whole."""
        return [f"family {f} skipped whole: {why}" for f, why in self.skipped_families().items()]

    def terminal_summary(self, write_line: Any, config: Any) -> None:
        from nnhal.cts.report import coverage_table, family_table, skipped_families_line

        results = self.ordered()
        if not results:
            return
        write_line(family_table(results, self.families))
        whole = skipped_families_line(results, self.families)
        if whole:
            write_line(f"nnhal cts: {whole}")
        unused = self.info.get("unusedExpectations")
        if unused:
            write_line(f"nnhal cts: expectations that matched no problem: {', '.join(unused)}")
        if config.strict:
            for problem in self.strict_problems():
                write_line(f"STRICT {problem}")
        if self.coverage_to == "-":
            write_line(coverage_table(results, self.families))

    def write_files(self, json_path: str | None) -> None:
        from nnhal.cts.report import coverage_table, write_json

        results = self.ordered()
        if self.coverage_to and self.coverage_to != "-":
            Path(self.coverage_to).write_text(
                coverage_table(results, self.families) + "\n", encoding="utf-8"
            )
        if json_path:
            info = {
                **self.info,
                "families": list(self.families),
                "skippedFamilies": self.skipped_families(),
            }
            write_json(json_path, results, self.families, info)
