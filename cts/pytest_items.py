"""The suite's tests as pytest items, and the target they run against.

- ``CtsSuite``: the collector pytest gets for the ``nnhal.cts`` package folder
  (``pytest --pyargs nnhal.cts``); it collects the chosen families' ``TestCase``
  objects (``nnhal.cts.suite.collect``) and yields one ``CtsItem`` each, named
  by the test id (node id ``nnhal.cts::generated/add/base/0``). Each item
  carries its family as a keyword (``-k burst``), its own time limit as a
  pytest-timeout marker, and an xfail marker when the expectations file lists
  it.
- ``CtsItem``: runs ``case.run(target)``; a ``Skip`` is a pytest skip, a
  ``Failure`` (or an unexpected HAL error) a failure reported by its message,
  anything else a failure with the traceback (a bug of the suite).
- ``RunState``: one per pytest process (each xdist worker has its own): the
  connection to the target and the oracle, opened at the first test, and the
  liveness record. After a test timed out or hit a transport fault it asks
  the target ``getStatus`` with a short deadline; no answer means the target
  is down (hung or dead), and every later test fails at once with "not run"
  and why, instead of waiting out its own time limit. ``--cts-max-timeouts``
  tests timing out in one process has the same effect.
- ``Given``: what ``nnhal.cts.suite.run_suite`` hands an in-process session (a
  connected device, its Config, optionally the exact tests), registered as a
  plugin object (``find_given``).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from nnhal.cts.core import Failure, Skip, TestCase

__all__ = ["CTS_DIR", "NODE_ID", "CtsItem", "CtsSuite", "Given", "RunState", "find_given"]

#: the ``nnhal.cts`` package folder: the path pytest is given to run the suite
CTS_DIR = Path(__file__).resolve().parent
#: the suite collector's node id (the items' ids are ``nnhal.cts::<test id>``)
NODE_ID = "nnhal.cts"
#: the time limit of a test without its own when pytest-timeout was given none
DEFAULT_TIMEOUT_S = 60.0
#: how long the liveness probe waits for getStatus
PROBE_TIMEOUT_S = 3.0


@dataclass(eq=False)  # a plugin object: hashed by identity
class Given:
    """An in-process run's target, settings and (optionally) exact tests."""

    config: Any  # nnhal.cts.suite.Config
    device: Any
    address: str
    tests: Sequence[TestCase] | None = None
    #: filled by the run: the RunState of the session (why tests were not run, ...)
    state: Any = None
    #: filled by the run: the controller's Recorder
    recorder: Any = None


def find_given(config: pytest.Config) -> Given | None:
    """run_suite's Given, when this session is one of its runs."""
    for plugin in config.pluginmanager.get_plugins():
        if isinstance(plugin, Given):
            return plugin
    return None


class NotRun(Failure):
    """The target was found down before this test: it is failed without being run."""


class RunState:
    """The target of this process, opened at the first test, and whether it is down."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.down: str | None = None
        self.timeouts = 0
        self._target: Any = None
        self._suite: Any = None
        self._stack = ExitStack()

    def given(self) -> Given | None:
        return find_given(self.config)

    def suite_config(self) -> Any:
        """The run's nnhal.cts.suite.Config: run_suite's, else from the --cts-* options."""
        given = self.given()
        if given is not None:
            return given.config
        if self._suite is None:
            from nnhal.cts.pytest_options import config_from_options

            self._suite = config_from_options(self.config)
        return self._suite

    def connect(self, address: str, what: str) -> Any:
        from nnhal.client import connect

        opt = self.config.getoption
        device = opt("cts_device") if what == "--cts-target" else None
        try:
            return self._stack.enter_context(
                connect(address, timeout=opt("cts_connect_timeout"), device=device)
            )
        except Exception as e:  # noqa: BLE001 - any failure to connect is the user's to fix
            raise pytest.UsageError(f"{what} {address}: {e}") from None

    def target(self) -> Any:
        """The Target of this process (``nnhal.cts.target.Target``), connected on first use."""
        if self._target is not None:
            return self._target
        from nnhal.cts.target import Target

        given = self.given()
        if given is not None:
            self._target = Target(given.device, given.address, given.config.options)
            return self._target
        address = self.config.getoption("cts_target")
        if not address:
            raise pytest.UsageError(NO_TARGET)
        options = self.suite_config().options
        oracle = self.config.getoption("cts_oracle")
        if oracle:
            options.oracle = self.connect(oracle, "--cts-oracle")
        self._target = Target(self.connect(address, "--cts-target"), address, options)
        return self._target

    def check_alive(self, after: str) -> None:
        """Record the target as down unless getStatus answers within PROBE_TIMEOUT_S."""
        if self.down is None and not self.target().alive(PROBE_TIMEOUT_S):
            self.down = (
                f"the target stopped answering (getStatus got no reply within "
                f"{PROBE_TIMEOUT_S:g} s) after {after}"
            )

    def timed_out(self, test_id: str) -> None:
        self.timeouts += 1
        self.check_alive(f"{test_id} timed out")
        limit = self.config.getoption("cts_max_timeouts")
        if self.down is None and self.timeouts >= limit:
            self.down = f"{self.timeouts} tests timed out (--cts-max-timeouts {limit})"

    def close(self) -> None:
        self._stack.close()


NO_TARGET = (
    "the conformance suite needs a target: --cts-target HOST:PORT (a running `nnhal serve` "
    "or any server speaking nnhal's proto), or run `nnhal cts`, which starts the in-process "
    "driver"
)


def _default_limit(config: pytest.Config) -> float | None:
    """The time limit to mark tests without their own with: DEFAULT_TIMEOUT_S unless
    pytest-timeout has one from its option, ini or environment (or is not loaded)."""
    if not config.pluginmanager.hasplugin("timeout"):
        return None
    given = (
        config.getoption("timeout", None) is not None
        or config.getini("timeout")
        or os.environ.get("PYTEST_TIMEOUT")
    )
    return None if given else DEFAULT_TIMEOUT_S


class CtsSuite(pytest.Directory):
    """The ``nnhal.cts`` folder as one collector of every test of the chosen families."""

    def collect(self) -> Iterator[pytest.Item]:
        from nnhal.cts.expectations import Expectations, load_expectations
        from nnhal.cts.suite import collect

        state: RunState = self.config.stash[STATE]
        given = state.given()
        config = state.suite_config()
        if given is not None and given.tests is not None:
            cases = list(given.tests)
        else:
            cases = collect(config)
        if hasattr(self.config, "workerinput"):
            # an xdist worker (each collects the same order): long tests first, so that they
            # overlap the rest instead of ending the run alone
            cases.sort(key=lambda c: not c.slow)
        try:
            expectations = (
                load_expectations(config.expectations) if config.expectations else Expectations()
            )
        except ValueError as e:  # an unreadable file
            raise pytest.UsageError(str(e)) from None
        default_limit = _default_limit(self.config)
        for case in cases:
            item = CtsItem.from_parent(self, name=case.id, case=case)
            limit = case.timeout if case.timeout is not None else default_limit
            if limit is not None:
                item.add_marker(pytest.mark.timeout(limit))
            entry = expectations.match(case.id)
            if entry is not None:
                where = f"{expectations.source}:{entry.line}"
                item.expectation = entry.pattern
                item.add_marker(
                    pytest.mark.xfail(
                        reason=f"expected failure ({where}{': ' + entry.reason if entry.reason else ''})",
                        strict=config.strict,
                    )
                )
            yield item


class CtsItem(pytest.Item):
    """One conformance test (a ``TestCase``) against the process's target."""

    def __init__(self, *, case: TestCase, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case = case
        self.expectation: str | None = None
        #: why the test did not give a verdict: "timeout", "transport", "not-run", "harness"
        self.trouble: str | None = None
        self.extra_keyword_matches.add(case.family)

    def runtest(self) -> None:
        from nnhal.errors import DeviceUnavailable, HalError

        state: RunState = self.config.stash[STATE]
        if state.down is not None:
            self.trouble = "not-run"
            raise NotRun(f"not run: {state.down}")
        target = state.target()
        try:
            note = self.case.run(target)
        except Skip as e:
            pytest.skip(str(e))
        except Failure:
            raise
        except DeviceUnavailable as e:
            self.trouble = "transport"
            state.check_alive(f"a transport fault in {self.case.id}")
            raise Failure(f"transport fault: {e}") from e
        except HalError as e:  # a call the test did not expect to fail
            raise Failure(f"unexpected {e}") from e
        except pytest.fail.Exception:
            # the suite never calls pytest.fail: this is pytest-timeout's time limit
            self.trouble = "timeout"
            state.timed_out(self.case.id)
            raise
        except Exception:
            self.trouble = "harness"  # a bug of the test or the suite
            raise
        if note:
            self.user_properties.append(("note", note))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style=None) -> Any:
        if isinstance(excinfo.value, Failure):
            return str(excinfo.value)  # the HAL rule broken: a traceback would add nothing
        if self.trouble == "timeout":
            return f"{TIMED_OUT}: {excinfo.value}"
        return super().repr_failure(excinfo, style=style)  # a bug of the suite: the traceback

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, self.case.id


#: where each pytest process keeps its RunState
STATE = pytest.StashKey[RunState]()


TIMED_OUT = (
    "no result within the time limit: the target hung (or the test is too slow for its "
    "limit: --timeout S)"
)


def message_of(item: CtsItem, excinfo: pytest.ExceptionInfo[BaseException] | None) -> str:
    """The one message a result carries: the failure's, the skip's reason, ''."""
    if excinfo is None:
        return ""
    value = excinfo.value
    if isinstance(value, Failure):
        return str(value)
    if isinstance(value, pytest.skip.Exception):
        return value.msg
    if item.trouble == "timeout":
        return f"{TIMED_OUT}: {value}"
    frames = excinfo.traceback
    where = f" (at {frames[-1].path.name}:{frames[-1].lineno + 1})" if len(frames) else ""
    return f"harness error: {type(value).__name__}: {value}{where}"
