"""The conformance suite as a pytest plugin: ``pytest --pyargs nnhal.cts --cts-target ADDR``.

Installed with nnhal (entry point ``pytest11``, under this module's name, so
``-p nnhal.cts.pytest_plugin`` also works with plugin autoloading off);
``nnhal cts`` runs the same session through ``pytest.main``. The plugin does
nothing in a session that does not ask for the suite (the ``nnhal.cts``
folder, or ``nnhal.cts.suite.run_suite``'s in-process run).

- options: ``nnhal.cts.pytest_options`` (``--cts-target``, ``--cts-families``,
  ``--cts-expectations``, ...);
- collection: the ``nnhal.cts`` folder is one ``CtsSuite`` collector, its
  tests ``CtsItem`` objects (``nnhal.cts.pytest_items``), so ``-k``, ``-x``,
  ``--lf``, ``-n`` (pytest-xdist), ``--junitxml`` and other plugins work on
  them; time limits are pytest-timeout's, known failures xfail markers;
- reports: every CtsItem report carries the test id, family, coverage and
  message (``cts_*`` attributes, which xdist sends to the controller), where
  the ``Recorder`` (``nnhal.cts.recorder``) turns them into results, prints
  the per-family table and the families skipped whole, and writes the JSON
  report and the coverage table; ``--cts-strict`` fails the session on a
  family skipped whole.

The session's controller connects to the target (and the oracle) before the
first test, so a wrong address is a usage error at once and the JSON report
can name the target; each test process keeps its own connection.

PYTEST_DONT_REWRITE: the plugin holds no assertions to rewrite. Every pytest
session imports it (the entry point), unrewritten when pytest finds no file
list of nnhal's (an editable install); ``nnhal cts`` or ``run_suite`` called
inside such a session names it again with ``-p``, and pytest would warn
"Module already imported so cannot be rewritten" in that run's summary.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from nnhal.cts.pytest_items import (
    CTS_DIR,
    NODE_ID,
    STATE,
    CtsItem,
    CtsSuite,
    RunState,
    find_given,
    message_of,
)
from nnhal.cts.pytest_options import add_options
from nnhal.cts.recorder import Recorder

__all__ = ["RECORDER"]

#: the controller's Recorder (absent in xdist workers and sessions without the suite)
RECORDER = pytest.StashKey[Recorder]()


def pytest_addoption(parser: pytest.Parser) -> None:
    add_options(parser)


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _suite_requested(config: pytest.Config) -> bool:
    """The session was given the nnhal.cts folder (or is run_suite's)."""
    if find_given(config) is not None:
        return True
    for arg in config.args:
        path = arg.split("::", 1)[0]
        if path == "nnhal.cts":  # --pyargs
            return True
        try:
            if Path(path).resolve() == CTS_DIR:
                return True
        except OSError:
            continue
    return False


def pytest_configure(config: pytest.Config) -> None:
    state = RunState(config)
    config.stash[STATE] = state
    if _is_worker(config) or not _suite_requested(config):
        return
    recorder = Recorder()
    config.stash[RECORDER] = recorder
    config.pluginmanager.register(recorder, "nnhal-cts-recorder")  # gets every report
    given = find_given(config)
    if given is not None:
        given.state, given.recorder = state, recorder


def pytest_unconfigure(config: pytest.Config) -> None:
    state = config.stash.get(STATE, None)
    if state is not None:
        state.close()


def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    recorder = config.stash.get(RECORDER, None)
    if recorder is None:
        return
    from nnhal.cts.families import FAMILIES

    state = config.stash[STATE]
    suite = state.suite_config()  # wrong --cts-* options: a usage error before anything runs
    recorder.families = tuple(f for f in FAMILIES if f in suite.families)
    recorder.coverage_to = config.getoption("cts_coverage")
    if config.option.collectonly:
        return
    target = state.target()
    recorder.info.update(target.describe())
    oracle = target.options.oracle
    if oracle is not None and "fuzz" in suite.families:
        from nnhal.cts.families.fuzz import same_implementation

        if same_implementation(target.device, oracle):
            print(
                "nnhal cts: warning: the fuzz oracle reports the same version string and type "
                "as the target (the same implementation cannot catch its own kernel bugs; name "
                "another endpoint: `nnhal cts --oracle ADDR`, pytest --cts-oracle ADDR)",
                file=sys.stderr,
                flush=True,
            )


@pytest.hookimpl(tryfirst=True)
def pytest_collect_directory(path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if path.resolve() != CTS_DIR:
        return None
    return CtsSuite.from_parent(parent, path=path, nodeid=NODE_ID)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if isinstance(item, CtsItem):
        report.cts_id = item.case.id
        report.cts_family = item.case.family
        report.cts_coverage = [list(pair) for pair in item.case.coverage]
        report.cts_message = message_of(item, call.excinfo)
        report.cts_trouble = item.trouble if call.when == "call" else None
        report.cts_expectation = item.expectation
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    recorder = config.stash.get(RECORDER, None)
    if recorder is None:
        return
    if config.option.collectonly:
        return
    suite = config.stash[STATE].suite_config()
    expectations = _expectations(suite)
    if expectations is not None:
        recorder.info["unusedExpectations"] = [
            e.pattern for e in expectations.entries if e.pattern not in recorder.used_expectations
        ]
    recorder.write_files(config.getoption("cts_json_report"))
    if suite.strict and recorder.strict_problems() and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _expectations(suite: Any) -> Any:
    if not suite.expectations:
        return None
    from nnhal.cts.expectations import load_expectations

    return load_expectations(suite.expectations)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    recorder = config.stash.get(RECORDER, None)
    if recorder is None or config.option.collectonly:
        return
    recorder.terminal_summary(terminalreporter.write_line, config.stash[STATE].suite_config())
