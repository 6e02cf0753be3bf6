"""The normalized op-package spec every config syntax loads into.

Three syntaxes describe the same thing (a package of custom operations):
QNN/SNPE XML ``OpDefCollection``, the SNPE JSON UDO config and the Ascend
op-info INI. Their loaders (``xml_loader``, ``json_loader``, ``ini_loader``)
produce one ``PackageSpec``: operations in definition order, each with its
inputs, outputs and parameters (``TensorSpec``), plus per-backend supplements
(``BackendSpec``: SupportedOps and the datatype/layout/OnlyDefaultSupported
overrides of SupplementalOpDef).

Datatypes are kept as *canonical names* (the QNN names without the
``QNN_DATATYPE_`` prefix: ``FLOAT_32``, ``UFIXED_POINT_8``, ``INT_32``...);
``nnhal.driver.op_packages.nnapi_types`` maps them to NNAPI operand types.

A bad config raises ``ConfigError`` naming the file, the line, the element or
key, and what was expected. The spec round-trips through ``to_dict`` /
``from_dict`` (the generator writes it as ``spec.json``).
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, replace
from typing import Any

#: canonical datatype names (QNN_DATATYPE_* without the prefix), plus STRING
CANONICAL_DATATYPES = [
    "INT_8",
    "INT_16",
    "INT_32",
    "INT_64",
    "UINT_8",
    "UINT_16",
    "UINT_32",
    "UINT_64",
    "SFIXED_POINT_4",
    "SFIXED_POINT_8",
    "SFIXED_POINT_16",
    "SFIXED_POINT_32",
    "UFIXED_POINT_4",
    "UFIXED_POINT_8",
    "UFIXED_POINT_16",
    "UFIXED_POINT_32",
    "BOOL_8",
    "FLOAT_16",
    "FLOAT_32",
    "FLOAT_64",
    "BFLOAT_16",
    "STRING",
]

#: SNPE's XML/JSON names that differ from the canonical ones (SNPE FIXED_n is
#: unsigned asymmetric fixed point, the DLC's quantized type)
SNPE_DATATYPES = {
    "FIXED_4": "UFIXED_POINT_4",
    "FIXED_8": "UFIXED_POINT_8",
    "FIXED_16": "UFIXED_POINT_16",
}

BACKEND_SPECIFIC = "BACKEND_SPECIFIC"
RANKS = ("SCALAR", "1D", "2D", "3D", "4D", "5D", "ND")
LAYOUTS = ("NHWC", "NHCW", "NCHW", "UNDEFINED", BACKEND_SPECIFIC)


def decode_utf8(source: str, data: bytes) -> str:
    """A config file's text; bytes that are not UTF-8 are refused with their line."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        bad = data[exc.start : exc.end].hex(" ")
        raise ConfigError(
            source,
            line,
            "file",
            f"not UTF-8 (byte {bad} at offset {exc.start}); save the file as UTF-8",
        ) from None


class ConfigError(ValueError):
    """A bad op-package config: file, line, element/key, what was expected."""

    def __init__(self, source: str, line: int | None, element: str, message: str) -> None:
        self.source = source
        self.line = line
        self.element = element
        self.detail = message
        where = f"{source}:{line}" if line else source
        super().__init__(f"{where}: {element}: {message}")


def canonical_datatype(text: str) -> str | None:
    """The canonical name of a QNN or SNPE datatype name, None if unknown."""
    name = text.strip()
    name = name.removeprefix("QNN_DATATYPE_")
    name = SNPE_DATATYPES.get(name, name)
    if name in CANONICAL_DATATYPES or name == BACKEND_SPECIFIC:
        return name
    return None


def parse_default(text: str) -> Any:
    """A Default text: a (nested) list, a number, or the string itself (QNN's rules)."""
    t = text.strip()
    if not t:
        return None
    if t[0] in "[{":
        body = t.replace("{", "[").replace("}", "]")
        try:
            import json

            return json.loads(body)
        except ValueError:
            return t
    for conv in (int, float):
        try:
            return conv(t)
        except ValueError:
            pass
    low = t.lower()
    if low in ("true", "false"):
        return low == "true"
    return t


def snake_case(name: str) -> str:
    """``MyCustomOp`` -> ``my_custom_op`` (also Ascend's opFile rule)."""
    s = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name)
    s = re.sub(r"(?<=[A-Z])([A-Z][a-z])", r"_\1", s)
    s = re.sub(r"[^0-9a-zA-Z_]", "_", s).lower()
    return s if s and not s[0].isdigit() else f"op_{s}"


@dataclass(frozen=True)
class TensorSpec:
    """One input, output or parameter of an operation."""

    name: str
    kind: str  # "input" | "output" | "param"
    datatypes: tuple[str, ...]  # canonical names; empty = any
    mandatory: bool = True
    rank: str | None = None  # SCALAR, 1D..5D, ND; None = unspecified
    layout: str | None = None
    default: Any = None
    repeated: bool = False
    static: bool = False  # IsStaticTensor / "static": must be a constant
    enum: tuple[str, ...] = ()
    scalar: bool = False  # a scalar parameter (Rank SCALAR, scalar_params, attrs)
    constraints: tuple[str, ...] = ()
    line: int | None = None

    @property
    def has_default(self) -> bool:
        return self.default is not None


@dataclass(frozen=True)
class TensorOverride:
    """A SupplementalOpDef's override of one tensor for one backend."""

    datatypes: tuple[str, ...] = ()
    layout: str | None = None
    only_default: bool = False
    constraints: tuple[str, ...] = ()


@dataclass(frozen=True)
class BackendSpec:
    """A SupplementalOpDefList (or SNPE per-core types / Ascend SoC) for one backend."""

    name: str
    supported_ops: tuple[str, ...] | None = None  # None = every op listing this backend
    #: op name -> tensor name -> override
    overrides: dict[str, dict[str, TensorOverride]] = field(default_factory=dict)


@dataclass(frozen=True)
class OpSpec:
    name: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    params: tuple[TensorSpec, ...] = ()
    description: str = ""
    reference: str = ""
    use_default_translation: bool = False
    supported_backends: tuple[str, ...] = ()  # empty = every backend
    metadata: dict[str, Any] = field(default_factory=dict)
    line: int | None = None

    @property
    def operands(self) -> tuple[TensorSpec, ...]:
        """NNAPI input operands in order: the inputs, then the parameters."""
        return self.inputs + self.params

    @property
    def module_name(self) -> str:
        return self.metadata.get("op_file") or snake_case(self.name)

    def tensor(self, name: str) -> TensorSpec | None:
        for t in (*self.inputs, *self.outputs, *self.params):
            if t.name == name:
                return t
        return None


@dataclass(frozen=True)
class PackageSpec:
    package_name: str
    domain: str
    version: str
    ops: tuple[OpSpec, ...]
    backends: tuple[BackendSpec, ...] = ()
    syntax: str = ""  # "xml" | "json" | "ini"
    source: str = ""

    @property
    def extension_name(self) -> str:
        """The NNAPI extension name: reverse-domain Domain, then PackageName (lowercase)."""
        parts = [p for p in re.split(r"[^0-9a-z_]+", self.domain.lower()) if p]
        name = ".".join([*parts, snake_case(self.package_name)])
        if "." not in name:
            name = f"nnhal.{name}"
        return name

    @property
    def module_name(self) -> str:
        return snake_case(self.package_name)

    def op(self, name: str) -> OpSpec | None:
        for op in self.ops:
            if op.name == name:
                return op
        return None

    def backend(self, name: str | None) -> BackendSpec | None:
        if name is None:
            return None
        for b in self.backends:
            if b.name.lower() == name.lower():
                return b
        return None

    def op_code(self, name: str) -> int:
        """The operation's number within the extension (definition order)."""
        for i, op in enumerate(self.ops):
            if op.name == name:
                return i
        raise KeyError(name)

    def resolved(self, backend: str | None) -> PackageSpec:
        """The spec as one backend sees it: supplements applied (BACKEND_SPECIFIC resolved)."""
        spec = self.backend(backend)
        if spec is None:
            return self
        ops = []
        for op in self.ops:
            over = spec.overrides.get(op.name, {})

            def apply(t: TensorSpec, over=over) -> TensorSpec:
                o = over.get(t.name)
                if o is None:
                    return t
                return replace(
                    t,
                    datatypes=o.datatypes or t.datatypes,
                    layout=o.layout or t.layout,
                    constraints=t.constraints + o.constraints,
                )

            ops.append(
                replace(
                    op,
                    inputs=tuple(apply(t) for t in op.inputs),
                    outputs=tuple(apply(t) for t in op.outputs),
                    params=tuple(apply(t) for t in op.params),
                )
            )
        return replace(self, ops=tuple(ops))

    def only_default(self, backend: str | None, op: str) -> frozenset[str]:
        """Names of the tensors a backend supports only at their default value."""
        spec = self.backend(backend)
        if spec is None:
            return frozenset()
        return frozenset(n for n, o in spec.overrides.get(op, {}).items() if o.only_default)

    def runs_on(self, backend: str | None, op: OpSpec) -> tuple[bool, str]:
        """Whether ``backend`` lists the op (SupportedOps / SupportedBackend), and why not."""
        if backend is None:
            return True, ""
        spec = self.backend(backend)
        if spec is not None and spec.supported_ops is not None:
            if op.name in spec.supported_ops:
                return True, ""
            return False, (
                f"backend {backend!r} of package {self.package_name!r} does not list "
                f"{op.name} in SupportedOps"
            )
        if op.supported_backends and not any(
            b.lower() == backend.lower() for b in op.supported_backends
        ):
            return False, (
                f"{op.name} lists SupportedBackend {', '.join(op.supported_backends)}, "
                f"not {backend!r}"
            )
        return True, ""

    # -- serialization ---------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_dict(data: dict[str, Any]) -> PackageSpec:
        def tensor(d: dict) -> TensorSpec:
            d = dict(d)
            for k in ("datatypes", "enum", "constraints"):
                d[k] = tuple(d.get(k, ()))
            return TensorSpec(**d)

        ops = tuple(
            OpSpec(
                **{
                    **o,
                    "inputs": tuple(tensor(t) for t in o["inputs"]),
                    "outputs": tuple(tensor(t) for t in o["outputs"]),
                    "params": tuple(tensor(t) for t in o.get("params", ())),
                    "supported_backends": tuple(o.get("supported_backends", ())),
                }
            )
            for o in data["ops"]
        )
        backends = tuple(
            BackendSpec(
                name=b["name"],
                supported_ops=None if b["supported_ops"] is None else tuple(b["supported_ops"]),
                overrides={
                    op: {
                        t: TensorOverride(
                            datatypes=tuple(o["datatypes"]),
                            layout=o["layout"],
                            only_default=o["only_default"],
                            constraints=tuple(o["constraints"]),
                        )
                        for t, o in tensors.items()
                    }
                    for op, tensors in b["overrides"].items()
                },
            )
            for b in data.get("backends", ())
        )
        return PackageSpec(
            package_name=data["package_name"],
            domain=data["domain"],
            version=data["version"],
            ops=ops,
            backends=backends,
            syntax=data.get("syntax", ""),
            source=data.get("source", ""),
        )


def check_package(spec: PackageSpec, line_of: dict[str, int] | None = None) -> None:
    """Rules every syntax shares (after loading): names unique, at least one input and
    output, outputs without defaults, supplements naming existing ops and tensors."""
    lines = line_of or {}
    src = spec.source
    seen: dict[str, int | None] = {}
    for op in spec.ops:
        if op.name in seen:
            raise ConfigError(
                src,
                op.line,
                f"operation {op.name}",
                f"defined twice (first at line {seen[op.name]})",
            )
        seen[op.name] = op.line
        if not op.inputs:
            raise ConfigError(src, op.line, f"operation {op.name}", "needs at least one input")
        if not op.outputs:
            raise ConfigError(src, op.line, f"operation {op.name}", "needs at least one output")
        names: dict[str, int | None] = {}
        for t in (*op.inputs, *op.outputs, *op.params):
            if t.name in names:
                raise ConfigError(
                    src, t.line, f"{op.name} {t.kind} {t.name!r}", "name used twice in this op"
                )
            names[t.name] = t.line
        for t in op.outputs:
            if t.has_default:
                raise ConfigError(
                    src, t.line, f"{op.name} output {t.name!r}", "an output cannot have a Default"
                )
        for t in op.outputs:
            if t.repeated and len(op.outputs) != 1:
                raise ConfigError(
                    src,
                    t.line,
                    f"{op.name} output {t.name!r}",
                    "a Repeated output must be the operation's only output",
                )
        repeated = [t for t in op.inputs if t.repeated]
        if len(repeated) > 1 or (repeated and repeated[0] is not op.inputs[0]):
            t = repeated[-1]
            raise ConfigError(
                src,
                t.line,
                f"{op.name} input {t.name!r}",
                "only the first input may be Repeated (variadic)",
            )
    for b in spec.backends:
        for name in b.supported_ops or ():
            if spec.op(name) is None:
                raise ConfigError(
                    src,
                    lines.get(f"supported:{b.name}:{name}"),
                    f"SupportedOps OpName {name!r} (backend {b.name})",
                    f"no OpDef of that name; defined: {', '.join(o.name for o in spec.ops)}",
                )
        for op_name, tensors in b.overrides.items():
            op = spec.op(op_name)
            if op is None:
                raise ConfigError(
                    src,
                    lines.get(f"supplement:{b.name}:{op_name}"),
                    f"SupplementalOpDef {op_name!r} (backend {b.name})",
                    f"no OpDef of that name; defined: {', '.join(o.name for o in spec.ops)}",
                )
            for tname, over in tensors.items():
                t = op.tensor(tname)
                if t is None:
                    raise ConfigError(
                        src,
                        lines.get(f"supplement:{b.name}:{op_name}:{tname}"),
                        f"SupplementalOpDef {op_name} tensor {tname!r} (backend {b.name})",
                        "no input, output or parameter of that name in the OpDef",
                    )
                if over.only_default and not t.has_default and t.kind != "output":
                    raise ConfigError(
                        src,
                        lines.get(f"supplement:{b.name}:{op_name}:{tname}"),
                        f"SupplementalOpDef {op_name} tensor {tname!r} (backend {b.name})",
                        "OnlyDefaultSupported needs a Default in the OpDef",
                    )
    for op in spec.ops:
        for t in (*op.inputs, *op.params):
            if t.default is not None:
                check_default(src, op, t)
    # BACKEND_SPECIFIC (a Datatype or a Layout) must be resolved by every backend that
    # runs the op: "must be used in conjunction with a SupplementalOpDef"
    for op in spec.ops:
        for t in (*op.inputs, *op.outputs, *op.params):
            for field, open_ in (
                ("Datatype", BACKEND_SPECIFIC in t.datatypes),
                ("Layout", t.layout == BACKEND_SPECIFIC),
            ):
                if open_:
                    _check_resolved(spec, src, op, t, field)


def _check_resolved(spec: PackageSpec, src: str, op: OpSpec, t: TensorSpec, field: str) -> None:
    """A BACKEND_SPECIFIC ``field`` of ``t`` is given by a SupplementalOpDef of every backend
    that runs ``op``."""
    listed = {b.name.lower() for b in spec.backends}
    missing = [b for b in op.supported_backends if b.lower() not in listed]
    if not spec.backends or missing:
        names = ", ".join(missing) if missing else "any backend"
        raise ConfigError(
            src,
            t.line,
            f"{op.name} {t.kind} {t.name!r}",
            f"{field} BACKEND_SPECIFIC needs a SupplementalOpDefList giving it a "
            f"{field}, but there is none for {names}",
        )
    for b in spec.backends:
        if not spec.runs_on(b.name, op)[0]:
            continue
        o = b.overrides.get(op.name, {}).get(t.name)
        given = None if o is None else (o.datatypes if field == "Datatype" else o.layout)
        if not given or given == BACKEND_SPECIFIC:
            raise ConfigError(
                src,
                t.line,
                f"{op.name} {t.kind} {t.name!r}",
                f"{field} BACKEND_SPECIFIC but backend {b.name} gives no "
                f"SupplementalOpDef {field} for it",
            )


#: datatype family -> the Python values a Default of that datatype may hold
_INTEGER_RANGES = {
    "INT_8": (-(2**7), 2**7 - 1),
    "INT_16": (-(2**15), 2**15 - 1),
    "INT_32": (-(2**31), 2**31 - 1),
    "INT_64": (-(2**63), 2**63 - 1),
    "UINT_8": (0, 2**8 - 1),
    "UINT_16": (0, 2**16 - 1),
    "UINT_32": (0, 2**32 - 1),
    "UINT_64": (0, 2**64 - 1),
    "SFIXED_POINT_8": (-(2**7), 2**7 - 1),
    "SFIXED_POINT_16": (-(2**15), 2**15 - 1),
    "SFIXED_POINT_32": (-(2**31), 2**31 - 1),
    "UFIXED_POINT_8": (0, 2**8 - 1),
    "UFIXED_POINT_16": (0, 2**16 - 1),
    "UFIXED_POINT_32": (0, 2**32 - 1),
}
_FLOATS = ("FLOAT_16", "FLOAT_32", "FLOAT_64", "BFLOAT_16")
_RANK_DEPTH = {"SCALAR": 0, "1D": 1, "2D": 2, "3D": 3, "4D": 4, "5D": 5}


def _value_fits(value: Any, datatype: str) -> bool:
    """Whether one (scalar) Default element is a value of ``datatype``."""
    if datatype == BACKEND_SPECIFIC:
        return isinstance(value, (bool, int, float))
    if datatype == "BOOL_8":
        return isinstance(value, bool) or (isinstance(value, int) and value in (0, 1))
    if datatype in _FLOATS:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if datatype in _INTEGER_RANGES:
        lo, hi = _INTEGER_RANGES[datatype]
        return isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi
    return True  # STRING and friends are refused elsewhere, with their own message


def _depth(value: Any) -> int | None:
    """Nesting depth of a (rectangular or not) list value; None if ragged in depth."""
    if not isinstance(value, list):
        return 0
    if not value:
        return 1
    depths = {_depth(v) for v in value}
    if len(depths) != 1 or None in depths:
        return None
    return 1 + depths.pop()  # type: ignore[operator]


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, list):
        return [x for v in value for x in _leaves(v)]
    return [value]


def check_default(src: str, op: OpSpec, t: TensorSpec) -> None:
    """A Default must be a value of the tensor: within its Enumeration, of one of its
    Datatypes, and nested as deep as its Rank says (a SCALAR is a plain value)."""
    what = f"{op.name} {t.kind} {t.name!r}"
    d = t.default
    if t.enum:
        if not isinstance(d, int) or isinstance(d, bool) or not 0 <= d < len(t.enum):
            allowed = ", ".join(f"{i}={e}" for i, e in enumerate(t.enum))
            raise ConfigError(
                src,
                t.line,
                what,
                f"Default {d!r} is not in the Enumeration; expected an index or name of "
                f"{allowed}",
            )
        return
    if isinstance(d, str):
        raise ConfigError(
            src, t.line, what, f"Default {d!r} is not a number, boolean or list of them"
        )
    depth = _depth(d)
    want = _RANK_DEPTH.get(t.rank or "")
    scalar = t.scalar or t.rank == "SCALAR"
    if scalar and depth != 0:
        raise ConfigError(src, t.line, what, f"Default {d!r} is a list; the Rank is SCALAR")
    if want is not None and not scalar and depth not in (want, 0):
        # a plain number for a tensor means "filled with it" only when the Rank allows
        raise ConfigError(
            src,
            t.line,
            what,
            f"Default {d!r} is nested {depth} deep; Rank {t.rank} needs {want}",
        )
    if depth is None:
        raise ConfigError(src, t.line, what, f"Default {d!r} mixes lists and plain values")
    types = t.datatypes
    if not types:
        return
    for leaf in _leaves(d):
        if not any(_value_fits(leaf, dt) for dt in types):
            raise ConfigError(
                src,
                t.line,
                what,
                f"Default value {leaf!r} is not a {'/'.join(types)} value",
            )
