"""Device profiles: what an emulated device says about itself and what it accepts.

A profile is a small TOML file (the format is documented in
``driver/profiles/default.toml``). It sets the device's name, version string,
type and capabilities, and narrows what the reference backend supports:
``exclude_operations`` removes operations, ``operand_types`` (an allow-list)
removes every operation that touches another operand type; ``[limits]`` sets
the device's resource limits (``nnhal.driver.limits``). ``load_profile``
takes a built-in profile name (a file in ``driver/profiles/``) or a path.

Every mistake in a profile raises ``ProfileError`` (a ``ValueError``) naming
the file and the key, so the CLI can print it as is.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from nnhal.driver.limits import DEFAULT_LIMITS, Limits, parse_limits

from nnhal.suggest import did_you_mean
from nnhal.types import (
    Capabilities,
    DeviceType,
    OperandPerformance,
    OperandType,
    OperationType,
    PerformanceInfo,
)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

PROFILES_DIR = Path(__file__).resolve().parent / "profiles"
DEFAULT_PROFILE = "default"

_TOP_KEYS = frozenset(
    {
        "name",
        "description",
        "versionString",
        "type",
        "capabilities",
        "exclude_operations",
        "operand_types",
        "include_operations",
        "first_input_types",
        "type_input",
        "faults",
        "op_package_backend",
        "limits",
        "op_package_isolation",
        "op_package_kernel_timeout_ms",
        "op_package_workers",
        "threads",
        "kernels",
    }
)
_PERF_KEYS = (
    "relaxedFloat32toFloat16PerformanceScalar",
    "relaxedFloat32toFloat16PerformanceTensor",
    "ifPerformance",
    "whilePerformance",
)
_CAPABILITY_KEYS = frozenset({"default", "operandPerformance", *_PERF_KEYS})

#: operandPerformance lists every fundamental and OEM type except SUBGRAPH
#: (VTS: sorted by type, no SUBGRAPH entry, every value > 0).
CAPABILITY_OPERAND_TYPES: tuple[OperandType, ...] = tuple(
    sorted(t for t in OperandType if t != OperandType.SUBGRAPH)
)


class ProfileError(ValueError):
    """A profile that cannot be loaded; the message names the file and the key."""


@dataclass(frozen=True)
class Profile:
    name: str
    versionString: str
    type: DeviceType
    capabilities: Capabilities
    #: OperationType codes this device refuses (IF and WHILE may be listed too)
    exclude_operations: frozenset[int] = frozenset()
    #: allowed operand types; None = every type
    operand_types: frozenset[int] | None = None
    description: str = ""
    source: str = "<built-in>"
    #: allow-list of OperationType codes (None = every operation); IF/WHILE never listed:
    #: they follow the recursive rule (supported when everything they reference is)
    include_operations: frozenset[int] | None = None
    #: the AOSP sample drivers' rule: an operation is supported only when its first input
    #: (or the input named in ``type_input`` for its type) has one of these types
    first_input_types: frozenset[int] | None = None
    type_input: tuple[tuple[int, int], ...] = ()
    #: the [faults] table, checked by nnhal.driver.faults (None = no faults)
    faults: Mapping[str, Any] | None = None
    #: which backend of loaded op packages this device is (SupplementalOpDefList Backend,
    #: SNPE core type); None = "CPU" unless ``serve --package-backend`` says otherwise
    op_package_backend: str | None = None
    #: the [limits] table (nnhal.driver.limits): sizes, nesting, memory, occupancy
    limits: Limits = DEFAULT_LIMITS
    #: where op-package kernels run: "process" (supervised workers) or "inline"
    #: (nnhal.driver.op_packages.supervisor)
    op_package_isolation: str = "process"
    #: the longest one op-package kernel call may take in "process" isolation
    op_package_kernel_timeout_ms: int = 10_000
    #: worker processes (concurrent op-package kernel calls) in "process" isolation
    op_package_workers: int = 2
    #: numeric-library threads of the serving process (nnhal.driver.ops.threads;
    #: 0 = the libraries' default; None = not set here)
    threads: int | None = None
    #: "auto" or "numpy": which kernels the serving process runs (nnhal.driver.ops.kernels;
    #: None = not set here)
    kernels: str | None = None

    def sample_rule(self, op_type: int, input_types: Sequence[int | None]) -> str | None:
        """Why ``include_operations`` / ``first_input_types`` refuse an operation (None: they
        do not). IF and WHILE are not decided here: their subgraphs decide."""
        if op_type in (OperationType.IF, OperationType.WHILE):
            return None
        if self.include_operations is not None and op_type not in self.include_operations:
            return f"not in profile {self.name!r}'s include_operations"
        if self.first_input_types is not None:
            k = dict(self.type_input).get(op_type, 0)
            got = input_types[k] if k < len(input_types) else None
            if got not in self.first_input_types:
                shown = "none" if got is None else _type_name(got)
                allowed = ", ".join(sorted(_type_name(t) for t in self.first_input_types))
                return (
                    f"input {k} has type {shown}; profile {self.name!r} takes operations whose "
                    f"input {k} is {allowed}"
                )
        return None

    def allows_operation(self, op_type: int) -> bool:
        return op_type not in self.exclude_operations

    def allows_operand_type(self, operand_type: int) -> bool:
        # SUBGRAPH is a reference, not data: never filtered by the allow-list.
        return (
            self.operand_types is None
            or operand_type in self.operand_types
            or operand_type == OperandType.SUBGRAPH
        )


def builtin_profiles() -> list[str]:
    """Names of the profiles shipped in driver/profiles/."""
    return sorted(p.stem for p in PROFILES_DIR.glob("*.toml"))


def load_profile(name_or_path: str | os.PathLike[str] | None = None) -> Profile:
    """Load a built-in profile by name, or a profile file by path (None = default)."""
    if name_or_path is None:
        name_or_path = DEFAULT_PROFILE
    text = os.fspath(name_or_path)
    looks_like_name = os.sep not in text and "/" not in text and not text.endswith(".toml")
    if looks_like_name:
        path = PROFILES_DIR / f"{text}.toml"
        if not path.is_file():
            if Path(text).is_file():  # a file in the current directory without .toml
                return _load_file(Path(text))
            raise ProfileError(
                f"unknown profile {text!r}: not a built-in profile "
                f"({', '.join(builtin_profiles())}) and no such file"
            )
        return _load_file(path, builtin=True)
    return _load_file(Path(text))


def parse_profile(data: Mapping[str, Any], source: str = "<string>") -> Profile:
    """Build a Profile from already-parsed TOML data (``source`` names it in errors)."""
    return _Parser(source).profile(data)


# ---------------------------------------------------------------------------


def _load_file(path: Path, builtin: bool = False) -> Profile:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise ProfileError(f"profile file not found: {path}") from None
    except OSError as exc:
        raise ProfileError(f"profile {path}: cannot read: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ProfileError(f"profile {path}: not UTF-8 text ({exc.reason})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"profile {path}: invalid TOML: {exc}") from None
    source = f"<built-in {path.stem}>" if builtin else str(path)
    profile = _Parser(str(path)).profile(data, default_name=path.stem)
    return replace(profile, source=source)


class _Parser:
    """Checks one profile's data; every error names the file and the dotted key."""

    def __init__(self, source: str) -> None:
        self.source = source

    def error(self, key: str, message: str) -> ProfileError:
        return ProfileError(f"profile {self.source}: key {key!r}: {message}")

    def profile(self, data: Mapping[str, Any], default_name: str | None = None) -> Profile:
        self._no_unknown_keys(data, _TOP_KEYS, "")
        name = data.get("name", default_name)
        if name is None:
            raise self.error("name", "required")
        name = self._string(name, "name")
        description = self._string(data.get("description", ""), "description", empty=True)
        version = self._string(data.get("versionString", f"nnhal-{name}"), "versionString")
        device_type = self._enum(data.get("type", "CPU"), DeviceType, "type")
        capabilities = self._capabilities(data.get("capabilities", {}))
        excluded = self._names(
            data.get("exclude_operations", []), OperationType, "exclude_operations"
        )
        operand_types = None
        if "operand_types" in data:
            operand_types = self._names(data["operand_types"], OperandType, "operand_types")
        included = None
        if "include_operations" in data:
            included = self._names(data["include_operations"], OperationType, "include_operations")
        first = None
        if "first_input_types" in data:
            first = self._names(data["first_input_types"], OperandType, "first_input_types")
        type_input = self._type_input(data.get("type_input", {}))
        faults = data.get("faults")
        if faults is not None and not isinstance(faults, Mapping):
            raise self.error("faults", f"must be a table, got {_show(faults)}")
        package_backend = None
        if "op_package_backend" in data:
            package_backend = self._string(data["op_package_backend"], "op_package_backend")
        limits = parse_limits(data.get("limits", {}), self.error)
        isolation = data.get("op_package_isolation", "process")
        if isolation not in ("process", "inline"):
            raise self.error(
                "op_package_isolation", f'must be "process" or "inline", got {_show(isolation)}'
            )
        from nnhal.driver.ops.kernels import parse_kernels
        from nnhal.driver.ops.threads import parse_threads

        threads = self._process_setting(data, "threads", parse_threads)
        kernels = self._process_setting(data, "kernels", parse_kernels)
        return Profile(
            name=name,
            versionString=version,
            type=DeviceType(device_type),
            capabilities=capabilities,
            exclude_operations=excluded,
            operand_types=operand_types,
            description=description,
            source=self.source,
            include_operations=included,
            first_input_types=first,
            type_input=type_input,
            faults=faults,
            op_package_backend=package_backend,
            limits=limits,
            op_package_isolation=isolation,
            op_package_kernel_timeout_ms=self._positive_int(
                data.get("op_package_kernel_timeout_ms", 10_000), "op_package_kernel_timeout_ms"
            ),
            op_package_workers=self._positive_int(
                data.get("op_package_workers", 2), "op_package_workers", maximum=64
            ),
            threads=threads,
            kernels=kernels,
        )

    def _type_input(self, table: Any) -> tuple[tuple[int, int], ...]:
        self._no_unknown_keys(table, frozenset(OperationType.__members__), "type_input.")
        out = []
        for name, index in table.items():
            if isinstance(index, bool) or not isinstance(index, int) or index < 0:
                raise self.error(
                    f"type_input.{name}", f"must be an input index >= 0, got {_show(index)}"
                )
            out.append((int(OperationType[name]), index))
        return tuple(sorted(out))

    # -- pieces -------------------------------------------------------------

    def _no_unknown_keys(self, table: Any, allowed: frozenset[str], prefix: str) -> None:
        if not isinstance(table, Mapping):
            raise self.error(prefix.rstrip("."), f"must be a table, got {_show(table)}")
        for key in table:
            if key not in allowed:
                hint = did_you_mean(str(key), allowed)
                raise self.error(
                    f"{prefix}{key}", f"unknown key{hint}; allowed: {', '.join(sorted(allowed))}"
                )

    def _positive_int(self, value: Any, key: str, maximum: int | None = None) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise self.error(key, f"must be an integer >= 1, got {_show(value)}")
        if maximum is not None and value > maximum:
            raise self.error(key, f"must be at most {maximum}, got {value}")
        return value

    def _process_setting(self, data: Mapping[str, Any], key: str, parse: Any) -> Any:
        """``parse(data[key])`` for a process-wide setting (``threads``, ``kernels``), None
        when absent; its ValueError names the key."""
        if key not in data:
            return None
        try:
            return parse(data[key])
        except ValueError as exc:
            raise self.error(key, str(exc)) from None

    def _string(self, value: Any, key: str, empty: bool = False) -> str:
        if not isinstance(value, str):
            raise self.error(key, f"must be a string, got {_show(value)}")
        if not empty and not value.strip():
            raise self.error(key, "must not be empty")
        return value

    def _enum(self, value: Any, enum_cls: type, key: str) -> int:
        names = [m.name for m in enum_cls]
        if not isinstance(value, str) or value.upper() not in names:
            raise self.error(key, f"must be one of {', '.join(names)}, got {_show(value)}")
        return enum_cls[value.upper()]

    def _names(self, value: Any, enum_cls: type, key: str) -> frozenset[int]:
        if not isinstance(value, list):
            raise self.error(
                key, f"must be a list of {enum_cls.__name__} names, got {_show(value)}"
            )
        codes = set()
        for i, item in enumerate(value):
            if not isinstance(item, str) or item not in enum_cls.__members__:
                hint = did_you_mean(item, enum_cls.__members__) if isinstance(item, str) else ""
                raise self.error(
                    f"{key}[{i}]",
                    f"unknown {enum_cls.__name__} {_show(item)}{hint}; expected a HAL name "
                    f"such as {next(iter(enum_cls)).name}",
                )
            codes.add(int(enum_cls[item]))
        return frozenset(codes)

    def _perf(self, value: Any, key: str) -> PerformanceInfo:
        self._no_unknown_keys(value, frozenset({"execTime", "powerUsage"}), f"{key}.")
        out = []
        for field in ("execTime", "powerUsage"):
            if field not in value:
                raise self.error(f"{key}.{field}", "required")
            x = value[field]
            # VTS requires every performance value > 0; lower means faster / less power.
            if (
                isinstance(x, bool)
                or not isinstance(x, (int, float))
                or not math.isfinite(x)
                or x <= 0
            ):
                raise self.error(
                    f"{key}.{field}", f"must be a positive finite number, got {_show(x)}"
                )
            out.append(float(x))
        return PerformanceInfo(out[0], out[1])

    def _capabilities(self, table: Any) -> Capabilities:
        self._no_unknown_keys(table, _CAPABILITY_KEYS, "capabilities.")
        default = PerformanceInfo(1.0, 1.0)
        if "default" in table:
            default = self._perf(table["default"], "capabilities.default")
        perf = {
            key: self._perf(table[key], f"capabilities.{key}") if key in table else default
            for key in _PERF_KEYS
        }
        per_type: dict[int, PerformanceInfo] = {}
        overrides = table.get("operandPerformance", {})
        self._no_unknown_keys(
            overrides,
            frozenset(t.name for t in CAPABILITY_OPERAND_TYPES),
            "capabilities.operandPerformance.",
        )
        for type_name, value in overrides.items():
            per_type[OperandType[type_name]] = self._perf(
                value, f"capabilities.operandPerformance.{type_name}"
            )
        return Capabilities(
            relaxedFloat32toFloat16PerformanceScalar=perf[_PERF_KEYS[0]],
            relaxedFloat32toFloat16PerformanceTensor=perf[_PERF_KEYS[1]],
            operandPerformance=tuple(
                OperandPerformance(t, per_type.get(t, default)) for t in CAPABILITY_OPERAND_TYPES
            ),
            ifPerformance=perf["ifPerformance"],
            whilePerformance=perf["whilePerformance"],
        )


def _type_name(code: int) -> str:
    try:
        return OperandType(code).name
    except ValueError:
        return str(code)


def _show(value: Any) -> str:
    return repr(value) if isinstance(value, (str, int, float, bool)) else type(value).__name__
