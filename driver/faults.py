"""Fault and latency injection: a profile's ``[faults]`` table, changeable at run time.

Format (TOML; every key optional)::

    [faults]
    seed = 7              # seeds the generator of `probability` rules (default 0)
    offline = false       # start offline: getStatus OFFLINE, every other call DEVICE_UNAVAILABLE

    [[faults.rules]]
    method = "executeSynchronously_1_3"  # HAL method name or a glob ("execute*", "*"; default "*")
    operation = "CONV_2D"  # only calls whose model holds this operation (prepare*, execute*,
                           # bursts; any subgraph)
    status = "DEVICE_UNAVAILABLE"        # the ErrorStatus to return (absent: latency only)
    when = "always"        # "always" | "nth" (the n-th matching call only) | "after" (every
                           # matching call after the first n) | "probability"
    n = 3
    probability = 0.25     # with when = "probability", drawn from the seeded generator
    latency_ms = 5.0       # added to every matching call (slept, and added to reported Timing)
    latency_per_operation_us = 100.0      # times the model's operation count
    latency_from_capabilities_us = 100.0  # times, per operation, the capabilities' execTime of
                                          # its first input's type (IF/WHILE: if/whilePerformance)

Rules are tried in order; every rule whose method and operation match counts
the call; the first one that fires sets the status; latencies of all matching
rules add up. Each injection is logged (logger ``nnhal.driver.faults``) and
recorded in the call trace with the rule's index, so a run is reproducible
from the table, the seed and the order of calls. Injected statuses go
through the same reply path as real ones (a V1_0-typed reply downgrades
MISSED_DEADLINE_* / RESOURCE_EXHAUSTED_* to GENERAL_FAILURE);
OUTPUT_INSUFFICIENT_SIZE on an execution carries one shape per output
(isSufficient false).
"""

from __future__ import annotations

import fnmatch
import logging
import random
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nnhal.errors import HalError, InvalidArgument, OutputInsufficientSize
from nnhal.suggest import did_you_mean
from nnhal.types import ErrorStatus, OperationType, OutputShape

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

log = logging.getLogger("nnhal.driver.faults")

_RULE_KEYS = frozenset(
    {
        "method",
        "operation",
        "status",
        "when",
        "n",
        "probability",
        "latency_ms",
        "latency_per_operation_us",
        "latency_from_capabilities_us",
    }
)
_WHEN = ("always", "nth", "after", "probability")


class InjectedError(HalError):
    """A HalError with any status (the injected one)."""

    def __init__(self, status: ErrorStatus, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class Rule:
    index: int
    method: str = "*"
    operation: int | None = None
    status: ErrorStatus | None = None
    when: str = "always"
    n: int = 1
    probability: float = 1.0
    latency_ms: float = 0.0
    per_op_us: float = 0.0
    caps_us: float = 0.0
    count: int = 0

    def describe(self) -> dict[str, Any]:
        """Every setting in force, under its [faults] key (defaults included, so the
        echo of `nnhal faults` is the whole rule as the driver reads it)."""
        out: dict[str, Any] = {"rule": self.index, "method": self.method, "when": self.when}
        if self.operation is not None:
            out["operation"] = OperationType(self.operation).name
        if self.status is not None:
            out["status"] = self.status.name
        out["n"] = self.n
        out["probability"] = self.probability
        out["latency_ms"] = self.latency_ms
        out["latency_per_operation_us"] = self.per_op_us
        out["latency_from_capabilities_us"] = self.caps_us
        return out


def _fail(where: str, message: str) -> InvalidArgument:
    return InvalidArgument(f"faults: {where}: {message}")


def parse_rules(table: Mapping[str, Any] | None) -> tuple[int, bool, list[Rule]]:
    """(seed, offline, rules) from a [faults] table; InvalidArgument naming the key."""
    table = dict(table or {})
    unknown = set(table) - {"seed", "offline", "rules"}
    if unknown:
        raise _fail(min(unknown), "unknown key; allowed: seed, offline, rules")
    seed = table.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise _fail("seed", f"must be an integer, got {seed!r}")
    offline = table.get("offline", False)
    if not isinstance(offline, bool):
        raise _fail("offline", f"must be true or false, got {offline!r}")
    rules = []
    for k, raw in enumerate(table.get("rules", [])):
        where = f"rules[{k}]"
        if not isinstance(raw, Mapping):
            raise _fail(where, "must be a table")
        bad = set(raw) - _RULE_KEYS
        if bad:
            raise _fail(
                f"{where}.{min(bad)}",
                f"unknown key; allowed: {', '.join(sorted(_RULE_KEYS))}",
            )
        rule = Rule(index=k)
        rule.method = str(raw.get("method", "*"))
        if "operation" in raw:
            name = raw["operation"]
            if name not in OperationType.__members__:
                hint = did_you_mean(name, OperationType.__members__) if isinstance(name, str) else ""
                raise _fail(f"{where}.operation", f"unknown OperationType {name!r}{hint}")
            rule.operation = int(OperationType[name])
        if "status" in raw:
            name = raw["status"]
            if name not in ErrorStatus.__members__ or name == "NONE":
                raise _fail(
                    f"{where}.status", f"must be an ErrorStatus name other than NONE, got {name!r}"
                )
            rule.status = ErrorStatus[name]
        rule.when = raw.get("when", "always")
        if rule.when not in _WHEN:
            raise _fail(f"{where}.when", f"must be one of {', '.join(_WHEN)}, got {rule.when!r}")
        rule.n = raw.get("n", 1)
        if (
            isinstance(rule.n, bool)
            or not isinstance(rule.n, int)
            or rule.n < (0 if rule.when == "after" else 1)
        ):
            raise _fail(f"{where}.n", f"must be an integer >= 1 (>= 0 for 'after'), got {rule.n!r}")
        for key, attr in (
            ("probability", "probability"),
            ("latency_ms", "latency_ms"),
            ("latency_per_operation_us", "per_op_us"),
            ("latency_from_capabilities_us", "caps_us"),
        ):
            if key in raw:
                value = raw[key]
                if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                    raise _fail(f"{where}.{key}", f"must be a number >= 0, got {value!r}")
                setattr(rule, attr, float(value))
        if rule.when == "probability" and not 0 <= rule.probability <= 1:
            raise _fail(f"{where}.probability", f"must be in [0, 1], got {rule.probability}")
        rules.append(rule)
    return seed, offline, rules


def parse_toml(text: str) -> Mapping[str, Any] | None:
    """The [faults] table of TOML text (a whole profile or just the table)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidArgument(f"faults: not valid TOML: {exc}") from None
    return data.get("faults", data if "rules" in data else None) if data else None


class FaultSet:
    """The faults in force on one device (thread-safe)."""

    def __init__(self, table: Mapping[str, Any] | None = None) -> None:
        self._lock = threading.Lock()
        self.offline = False
        self.set(table)

    def set(self, table: Mapping[str, Any] | None) -> None:
        seed, offline, rules = parse_rules(table)
        with self._lock:
            self.table = dict(table or {})
            self.seed = seed
            self.rules = rules
            self.random = random.Random(seed)
            self.offline = offline

    def describe(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "offline": self.offline,
            "rules": [r.describe() for r in self.rules],
        }

    def check(
        self, method: str, operations: list[tuple[int, int | None]] | None, caps: Any
    ) -> tuple[Any, float]:
        """Count this call: (the injected error or None, added latency in µs).

        ``operations``: (operation type, its first input's type) for every operation of
        the call's model (None: the call has no model).
        """
        with self._lock:
            if self.offline and method != "getStatus":
                return InjectedError(
                    ErrorStatus.DEVICE_UNAVAILABLE, f"{method}: the device is offline (injected)"
                ), 0.0
            error = None
            latency_us = 0.0
            for rule in self.rules:
                if not fnmatch.fnmatchcase(method, rule.method):
                    continue
                if rule.operation is not None and (
                    operations is None or all(op != rule.operation for op, _ in operations)
                ):
                    continue
                rule.count += 1
                latency_us += rule.latency_ms * 1000.0
                if operations:
                    latency_us += rule.per_op_us * len(operations)
                    if rule.caps_us:
                        per_type = caps_by_type(caps)
                        latency_us += rule.caps_us * sum(
                            _exec_time(caps, per_type, op, t) for op, t in operations
                        )
                if error is not None or rule.status is None:
                    continue
                if rule.when == "always":
                    fire = True
                elif rule.when == "nth":
                    fire = rule.count == rule.n
                elif rule.when == "after":
                    fire = rule.count > rule.n
                else:
                    fire = self.random.random() < rule.probability
                if fire:
                    error = InjectedError(
                        rule.status,
                        f"{method}: {rule.status.name} injected by faults rule {rule.index} "
                        f"(call {rule.count} matching it)",
                    )
                    error.rule = rule.index
            if error is not None:
                log.warning("%s", error.message)
            return error, latency_us


def _exec_time(caps: Any, per_type: dict[int, float], op: int, first_type: int | None) -> float:
    if op == OperationType.IF:
        return caps.ifPerformance.execTime
    if op == OperationType.WHILE:
        return caps.whilePerformance.execTime
    return per_type.get(first_type, 1.0) if first_type is not None else 1.0


def caps_by_type(caps: Any) -> dict[int, float]:
    return {int(p.type): p.info.execTime for p in caps.operandPerformance}


def model_operations(model: Any) -> list[tuple[int, int | None]]:
    """(type, first input's type) of every operation in every subgraph of ``model``."""
    out = []
    for subgraph in (model.main, *model.referenced):
        for op in subgraph.operations:
            first = subgraph.operands[op.inputs[0]].type if op.inputs else None
            out.append((int(op.type), first))
    return out


def insufficient(model: Any, message: str) -> OutputInsufficientSize:
    """An injected OUTPUT_INSUFFICIENT_SIZE with one shape per output."""
    main = model.main
    shapes = tuple(
        OutputShape(dimensions=tuple(main.operands[k].dimensions), isSufficient=False)
        for k in main.outputIndexes
    )
    return OutputInsufficientSize(message, shapes)
