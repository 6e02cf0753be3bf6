"""The SNPE JSON UDO config loader -> one ``PackageSpec`` per ``UdoPackage_i``.

The standard ``json`` module gives no line numbers and silently keeps the last
of duplicate keys, so this module has a small JSON reader of its own that
records the line of every object and key and rejects duplicates.

Mapping: each ``core_types`` entry (CPU, GPU, DSP) is a backend; an operand's
``data_type`` applies to every core, ``per_core_data_types`` becomes that
backend's override (the op-level datatypes are the union); ``static`` is
IsStaticTensor; ``scalar_params`` are scalar parameters (``default_value``
optional), ``tensor_params`` tensor parameters; ``dsp_arch_types`` is kept
as metadata.
"""

from __future__ import annotations

import re
from typing import Any

from nnhal.driver.op_packages.spec import (
    LAYOUTS,
    BackendSpec,
    ConfigError,
    OpSpec,
    PackageSpec,
    TensorOverride,
    TensorSpec,
    canonical_datatype,
    check_package,
    decode_utf8,
)

CORE_TYPES = ("CPU", "GPU", "DSP")
DSP_ARCHS = ("v65", "v66", "v68", "v69", "v73", "v75")
_OP_KEYS = {
    "type", "inputs", "outputs", "scalar_params", "tensor_params", "core_types",
    "dsp_arch_types",
}  # fmt: skip
_TENSOR_KEYS = {"name", "data_type", "per_core_data_types", "static", "tensor_layout", "rank"}
_SCALAR_KEYS = {"name", "data_type", "default_value"}


#: objects and arrays nested deeper than this are refused (the reader is recursive)
MAX_NESTING = 200


class LDict(dict):
    """A JSON object that remembers its line and each key's line."""

    line: int = 0
    key_lines: dict[str, int]


class _JsonReader:
    """Recursive-descent JSON with line numbers and duplicate-key errors."""

    _NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")

    def __init__(self, text: str, source: str) -> None:
        self.s = text
        self.i = 0
        self.source = source
        self.depth = 0

    def line(self, pos: int | None = None) -> int:
        return self.s.count("\n", 0, self.i if pos is None else pos) + 1

    def fail(self, message: str, element: str = "JSON") -> ConfigError:
        return ConfigError(self.source, self.line(), element, message)

    def ws(self) -> None:
        s, n = self.s, len(self.s)
        while self.i < n and s[self.i] in " \t\r\n":
            self.i += 1

    def value(self) -> Any:
        self.ws()
        if self.i >= len(self.s):
            raise self.fail("unexpected end of file")
        c = self.s[self.i]
        if c in "{[":
            # recursive descent: bound the nesting before Python's recursion limit does
            self.depth += 1
            if self.depth > MAX_NESTING:
                raise self.fail(f"nested more than {MAX_NESTING} levels deep")
            try:
                return self.obj() if c == "{" else self.arr()
            finally:
                self.depth -= 1
        if c == '"':
            return self.string()
        for word, val in (("true", True), ("false", False), ("null", None)):
            if self.s.startswith(word, self.i):
                self.i += len(word)
                return val
        m = self._NUMBER.match(self.s, self.i)
        if m:
            self.i = m.end()
            t = m.group()
            return float(t) if any(ch in t for ch in ".eE") else int(t)
        raise self.fail(f"unexpected character {c!r}")

    def string(self) -> str:
        import json

        start = self.i
        self.i += 1
        while True:
            j = self.s.find('"', self.i)
            if j < 0 or "\n" in self.s[self.i : j]:
                self.i = start
                raise self.fail("unterminated string")
            k = j - 1
            while self.s[k] == "\\":
                k -= 1
            self.i = j + 1
            if (j - 1 - k) % 2 == 0:
                try:
                    return json.loads(self.s[start : self.i])
                except ValueError as exc:  # control characters, bad escapes
                    bad = self.line(start + getattr(exc, "pos", 0))
                    self.i = start
                    raise ConfigError(self.source, bad, "JSON", f"bad string: {exc.msg}") from None

    def obj(self) -> LDict:
        out = LDict()
        out.line = self.line()
        out.key_lines = {}
        self.i += 1
        self.ws()
        if self.s.startswith("}", self.i):
            self.i += 1
            return out
        while True:
            self.ws()
            if not self.s.startswith('"', self.i):
                raise self.fail("expected a quoted key (no trailing commas in JSON)")
            key_line = self.line()
            key = self.string()
            if key in out:
                self.i -= 1
                raise ConfigError(
                    self.source,
                    key_line,
                    f"key {key!r}",
                    f"duplicate key (first at line {out.key_lines[key]})",
                )
            self.ws()
            if not self.s.startswith(":", self.i):
                raise self.fail(f"expected ':' after key {key!r}")
            self.i += 1
            out[key] = self.value()
            out.key_lines[key] = key_line
            self.ws()
            if self.s.startswith(",", self.i):
                self.i += 1
                continue
            if self.s.startswith("}", self.i):
                self.i += 1
                return out
            raise self.fail("expected ',' or '}'")

    def arr(self) -> list:
        out: list = []
        self.i += 1
        self.ws()
        if self.s.startswith("]", self.i):
            self.i += 1
            return out
        while True:
            self.ws()
            if self.s.startswith("]", self.i):
                raise self.fail("trailing comma before ']'")
            out.append(self.value())
            self.ws()
            if self.s.startswith(",", self.i):
                self.i += 1
                continue
            if self.s.startswith("]", self.i):
                self.i += 1
                return out
            raise self.fail("expected ',' or ']'")


def read_json(text: str, source: str) -> Any:
    r = _JsonReader(text, source)
    value = r.value()
    r.ws()
    if r.i != len(text):
        raise r.fail("extra data after the JSON value")
    return value


class _Udo:
    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, obj: Any, key: str | None, what: str, message: str) -> ConfigError:
        line = None
        if isinstance(obj, LDict):
            line = obj.key_lines.get(key, obj.line) if key else obj.line
        return ConfigError(self.source, line, what, message)

    def need(self, obj: Any, types: type | tuple, what: str, parent: Any, key: str) -> Any:
        if not isinstance(obj, types):
            names = (
                types.__name__ if isinstance(types, type) else "/".join(t.__name__ for t in types)
            )
            kinds = {"LDict": "object", "dict": "object", "list": "list", "str": "string"}
            raise self.fail(parent, key, what, f"expected a {kinds.get(names, names)}")
        return obj

    def keys(self, obj: LDict, allowed: set[str], what: str) -> None:
        for k in obj:
            if k not in allowed:
                raise self.fail(
                    obj,
                    k,
                    f"{what} key {k!r}",
                    "unknown key; expected one of " + ", ".join(sorted(allowed)),
                )

    def dtype(self, obj: LDict, key: str, raw: Any, what: str) -> str:
        name = canonical_datatype(raw) if isinstance(raw, str) else None
        if name is None or name == "BACKEND_SPECIFIC":
            raise self.fail(
                obj,
                key,
                f"{what} {key}",
                f"unknown datatype {raw!r}; expected one of FLOAT_16, "
                "FLOAT_32, FIXED_4, FIXED_8, FIXED_16, UINT_8, UINT_16, UINT_32, INT_32, STRING",
            )
        return name

    def tensor(
        self, t: Any, kind: str, index: int, op: str, cores: tuple[str, ...], parent: Any
    ) -> tuple[TensorSpec, dict[str, str]]:
        label = {"input": "inputs", "output": "outputs", "param": "tensor_params"}[kind]
        what = f"operator {op} {label}[{index}]"
        self.need(t, dict, what, parent, label)
        self.keys(t, _TENSOR_KEYS, what)
        name = t.get("name") or ("in" if kind == "input" else "out") + f"_{index}"
        if kind == "param" and not t.get("name"):
            raise self.fail(t, None, what, "a tensor parameter needs a name")
        per_core: dict[str, str] = {}
        if "per_core_data_types" in t:
            pc = self.need(t["per_core_data_types"], dict, what, t, "per_core_data_types")
            for core, raw in pc.items():
                if core not in CORE_TYPES:
                    raise self.fail(
                        pc,
                        core,
                        f"{what} per_core_data_types",
                        f"unknown core {core!r}; expected {', '.join(CORE_TYPES)}",
                    )
                if core not in cores:
                    raise self.fail(
                        pc,
                        core,
                        f"{what} per_core_data_types",
                        f"core {core!r} is not in the operator's core_types "
                        f"({', '.join(cores)})",
                    )
                per_core[core] = self.dtype(pc, core, raw, f"{what} per_core_data_types")
            if "data_type" in t:
                raise self.fail(
                    t, "data_type", what, "give data_type or per_core_data_types, not both"
                )
            types = tuple(dict.fromkeys(per_core.values()))
        elif "data_type" in t:
            types = (self.dtype(t, "data_type", t["data_type"], what),)
        else:
            raise self.fail(t, None, what, "missing data_type (or per_core_data_types)")
        layout = t.get("tensor_layout")
        if layout is not None and (not isinstance(layout, str) or layout.upper() not in LAYOUTS):
            raise self.fail(
                t,
                "tensor_layout",
                f"{what} tensor_layout",
                f"{layout!r} is not a layout; expected NHWC or NCHW",
            )
        static = t.get("static", False)
        if not isinstance(static, bool):
            raise self.fail(t, "static", f"{what} static", f"{static!r} is not true/false")
        if static and kind == "output":
            raise self.fail(t, "static", f"{what} static", "an output cannot be static")
        spec = TensorSpec(
            name=name,
            kind=kind,
            datatypes=types,
            mandatory=True,
            layout=layout.upper() if layout else None,
            static=static or kind == "param",
            line=t.line,
        )
        return spec, per_core

    def operator(self, o: Any, index: int, parent: Any) -> tuple[OpSpec, dict, tuple]:
        what = f"Operators[{index}]"
        self.need(o, dict, what, parent, "Operators")
        self.keys(o, _OP_KEYS, what)
        op = o.get("type")
        if not isinstance(op, str) or not op:
            raise self.fail(o, "type", what, "missing the operation type (a non-empty string)")
        cores_raw = o.get("core_types", list(CORE_TYPES))
        self.need(cores_raw, list, f"operator {op} core_types", o, "core_types")
        for c in cores_raw:
            if c not in CORE_TYPES:
                raise self.fail(
                    o,
                    "core_types",
                    f"operator {op} core_types",
                    f"unknown core {c!r}; expected {', '.join(CORE_TYPES)}",
                )
        cores = tuple(cores_raw)
        for a in o.get("dsp_arch_types", []):
            if a not in DSP_ARCHS:
                raise self.fail(
                    o,
                    "dsp_arch_types",
                    f"operator {op} dsp_arch_types",
                    f"unknown DSP arch {a!r}; expected {', '.join(DSP_ARCHS)}",
                )
        overrides: dict[str, dict[str, str]] = {}
        tensors: dict[str, list[TensorSpec]] = {"input": [], "output": [], "param": []}
        for kind, key in (("input", "inputs"), ("output", "outputs"), ("param", "tensor_params")):
            items = o.get(key, [])
            self.need(items, list, f"operator {op} {key}", o, key)
            for i, t in enumerate(items):
                spec, per_core = self.tensor(t, kind, i, op, cores, o)
                tensors[kind].append(spec)
                for core, dt in per_core.items():
                    overrides.setdefault(core, {})[spec.name] = dt
        scalars = []
        items = o.get("scalar_params", [])
        self.need(items, list, f"operator {op} scalar_params", o, "scalar_params")
        for i, p in enumerate(items):
            pw = f"operator {op} scalar_params[{i}]"
            self.need(p, dict, pw, o, "scalar_params")
            self.keys(p, _SCALAR_KEYS, pw)
            if not p.get("name"):
                raise self.fail(p, None, pw, "a scalar parameter needs a name")
            if "data_type" not in p:
                raise self.fail(p, None, pw, "missing data_type")
            scalars.append(
                TensorSpec(
                    name=p["name"],
                    kind="param",
                    datatypes=(self.dtype(p, "data_type", p["data_type"], pw),),
                    mandatory="default_value" not in p,
                    rank="SCALAR",
                    default=p.get("default_value"),
                    scalar=True,
                    line=p.line,
                )
            )
        spec = OpSpec(
            name=op,
            inputs=tuple(tensors["input"]),
            outputs=tuple(tensors["output"]),
            params=tuple(scalars) + tuple(tensors["param"]),
            supported_backends=cores,
            metadata={"dsp_arch_types": list(o.get("dsp_arch_types", []))},
            line=o.line,
        )
        return spec, overrides, cores


def load_json(path: str, data: bytes | None = None) -> list[PackageSpec]:
    """Load an SNPE UDO JSON config: one PackageSpec per UdoPackage_i (ConfigError on errors)."""
    source = str(path)
    if data is None:
        with open(path, "rb") as f:
            data = f.read()
    text = decode_utf8(source, data)
    root = read_json(text, source)
    u = _Udo(source)
    if not isinstance(root, LDict) or not root:
        raise ConfigError(source, 1, "JSON", "expected an object with UdoPackage_0, ... keys")
    packages = []
    for key, pkg in root.items():
        if not re.fullmatch(r"UdoPackage(_\d+)?", key):
            raise u.fail(root, key, f"key {key!r}", "expected UdoPackage_<i>")
        u.need(pkg, dict, key, root, key)
        u.keys(pkg, {"Operators", "UDO_PACKAGE_NAME"}, key)
        name = pkg.get("UDO_PACKAGE_NAME")
        if not isinstance(name, str) or not name.strip():
            raise u.fail(pkg, "UDO_PACKAGE_NAME", key, "missing UDO_PACKAGE_NAME (a string)")
        ops_raw = u.need(pkg.get("Operators"), list, f"{key} Operators", pkg, "Operators")
        if not ops_raw:
            raise u.fail(pkg, "Operators", f"{key} Operators", "needs at least one operator")
        ops = []
        per_backend: dict[str, dict[str, dict[str, TensorOverride]]] = {}
        supported: dict[str, list[str]] = {}
        for i, o in enumerate(ops_raw):
            spec, overrides, cores = u.operator(o, i, pkg)
            ops.append(spec)
            for core in cores:
                supported.setdefault(core, []).append(spec.name)
            for core, tensors in overrides.items():
                per_backend.setdefault(core, {})[spec.name] = {
                    t: TensorOverride(datatypes=(dt,)) for t, dt in tensors.items()
                }
        backends = tuple(
            BackendSpec(name=c, supported_ops=tuple(supported.get(c, ())),
                        overrides=per_backend.get(c, {}))
            for c in CORE_TYPES
            if c in supported or c in per_backend
        )  # fmt: skip
        spec = PackageSpec(
            package_name=name.strip(),
            domain="udo",
            version="1.0",
            ops=tuple(ops),
            backends=backends,
            syntax="json",
            source=source,
        )
        check_package(spec)
        packages.append(spec)
    return packages
