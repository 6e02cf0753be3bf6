"""What every family shares: test cases, outcomes, and how a test says "no".

A family's ``collect(library, options)`` returns ``TestCase`` objects; each
becomes a pytest item (``nnhal.cts.pytest_items``) that calls
``case.run(target)``. Inside a test:

- ``skip(reason)`` (or ``raise Skip``): the target cannot run this (an
  operation reported unsupported, a capability it does not have). Skipped is
  never failed, and always has a reason.
- ``fail(message)`` / ``check(condition, message)``: the target broke a HAL
  rule; the message says which, with what was expected and what came back.
- ``Problems``: collects several failures (one mutated model after another)
  and raises them together, so one test reports every broken case.

Any other exception is an *error* of the test itself (or a transport fault:
``DeviceUnavailable``), reported as such and never as a pass.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from nnhal.types import Model, OperandType, OperationType

__all__ = [
    "Failure",
    "Outcome",
    "Problems",
    "Result",
    "Skip",
    "TestCase",
    "check",
    "coverage_of",
    "fail",
    "skip",
]


class Outcome(str, enum.Enum):
    PASSED = "passed"
    FAILED = "failed"
    SKIPPED = "skipped"
    XFAIL = "xfail"  # failed, as the expectations file says it will
    XPASS = "xpass"  # passed although the expectations file says it fails
    TIMEOUT = "timeout"  # no answer within the test's time limit (a hung target)
    ERROR = "error"  # the test could not run (transport fault, target down, harness bug)

    @property
    def is_problem(self) -> bool:
        """Outcomes that make ``nnhal cts`` exit non-zero."""
        return self in (Outcome.FAILED, Outcome.TIMEOUT, Outcome.ERROR)


class Skip(Exception):
    """The target cannot run this test; the message says why."""


class Failure(AssertionError):
    """The target broke a HAL rule; the message says which."""


def skip(reason: str) -> None:
    raise Skip(reason)


def fail(message: str) -> None:
    raise Failure(message)


def check(condition: object, message: str | Callable[[], str]) -> None:
    """``fail(message)`` unless ``condition``; a callable message is built only when needed."""
    if not condition:
        raise Failure(message() if callable(message) else message)


class Problems:
    """Failures collected over many sub-cases, raised together by ``raise_if_any``."""

    def __init__(self, limit: int = 20) -> None:
        self.items: list[str] = []
        self.limit = limit
        self.checked = 0

    def add(self, message: str) -> None:
        self.items.append(message)

    def run(self, label: str, fn: Callable[[], Any]) -> None:
        """Run one sub-case; a Failure becomes an item prefixed with ``label``."""
        self.checked += 1
        try:
            fn()
        except Failure as e:
            self.add(f"{label}: {e}")

    def raise_if_any(self, what: str = "cases") -> None:
        if not self.items:
            return
        shown = "; ".join(self.items[: self.limit])
        more = len(self.items) - self.limit
        tail = f"; ... and {more} more" if more > 0 else ""
        raise Failure(f"{len(self.items)} of {self.checked} {what} failed: {shown}{tail}")


@dataclass
class TestCase:
    """One test: ``run(target)`` returns an optional note, or raises Skip/Failure."""

    __test__ = False  # not a pytest class

    id: str  # "<family>/<rest>", unique
    family: str
    run: Callable[[Any], str | None]
    #: seconds; None = the run's default (``--timeout``)
    timeout: float | None = None
    #: (operation name, operand type name) pairs the test exercises
    coverage: tuple[tuple[str, str], ...] = ()
    description: str = ""
    #: long tests are started first when running in parallel (pytest-xdist)
    slow: bool = False


@dataclass
class Result:
    id: str
    family: str
    outcome: Outcome
    message: str = ""
    duration: float = 0.0
    coverage: tuple[tuple[str, str], ...] = ()
    #: the outcome before the expectations file turned it into xfail/xpass
    raw_outcome: Outcome | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "id": self.id,
            "family": self.family,
            "outcome": self.outcome.value,
            "message": self.message,
            "duration": round(self.duration, 4),
        }
        if self.raw_outcome is not None and self.raw_outcome != self.outcome:
            doc["rawOutcome"] = self.raw_outcome.value
        return doc


# ---------------------------------------------------------------------------
# Coverage
# ---------------------------------------------------------------------------


def _name(enum_cls: type, code: int) -> str:
    try:
        return enum_cls(code).name
    except ValueError:
        return str(code)


def _representative_type(sg: Any, op: Any) -> int | None:
    """The operand type an operation is "tested with": its first data input.

    IF's data inputs start at 3 and WHILE's at 2 (their first inputs are the
    condition and subgraphs); an operation without inputs uses its output.
    """
    first = {OperationType.IF: 3, OperationType.WHILE: 2}.get(op.type, 0)
    indexes = op.inputs[first:] or op.inputs or op.outputs
    for i in indexes:
        if 0 <= i < len(sg.operands):
            return sg.operands[i].type
    return None


def coverage_of(models: Iterable[Model]) -> tuple[tuple[str, str], ...]:
    """(operation, operand type) pairs of every operation in the models' subgraphs."""
    pairs: set[tuple[str, str]] = set()
    for model in models:
        for sg in (model.main, *model.referenced):
            for op in sg.operations:
                t = _representative_type(sg, op)
                type_text = "-" if t is None else _name(OperandType, t)
                pairs.add((_name(OperationType, op.type), type_text))
    return tuple(sorted(pairs))
