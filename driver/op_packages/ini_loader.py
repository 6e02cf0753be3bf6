"""The Ascend op-info INI loader -> ``PackageSpec`` (one package per file).

Each ``[OpType]`` section is one operation: ``inputN.*`` / ``outputN.*``
(name, paramType required/optional/dynamic, dtype and format lists that pair
up column by column: column k of every tensor's list is one supported
combination, kept as ``metadata["combinations"]``), ``attr.list`` with
``attr_<name>.type/value/paramType/defaultValue`` (scalar parameters; list
types become 1-D tensor parameters), ``opFile.value`` / ``opInterface.value``
(defaults derived from the op type: ``MyOp`` -> ``my_op``), ``op.pattern``,
``dynamicFormat.flag`` (dtype/format then come from the kernel module's
``op_select_format``). ``precision_reduce.flag``, ``heavyOp``,
``needCheckSupport.flag``, ``dynamicShapeSupport.flag``,
``dynamicRankSupport.flag``, ``dynamicCompileStatic.flag`` and
``jitCompile.flag`` are kept as metadata only (they steer Ascend's graph
compiler; nnhal's support answer does not depend on them: every operand shape
NNAPI allows is offered to the kernel). ``bfloat16`` is an extension operand
type (``BFLOAT_16``); ``listListInt`` attributes are 2-D INT_32 tensor
parameters. An ``attr_<name>.defaultValue`` must be one of its
``attr_<name>.value`` list (unless that is ``all``). The package is named after the file (``my_ops.ini`` -> MyOps in
domain ``ascend``).

configparser runs with ``strict=True`` (duplicate sections and keys are errors
with their line); a pre-scan records each key's line for the other errors.
"""

from __future__ import annotations

import configparser
import re
from pathlib import Path

from nnhal.driver.op_packages.spec import (
    ConfigError,
    OpSpec,
    PackageSpec,
    TensorSpec,
    check_package,
    decode_utf8,
    parse_default,
    snake_case,
)

DTYPES = {
    "float16": "FLOAT_16",
    "float": "FLOAT_32",
    "float32": "FLOAT_32",
    "double": "FLOAT_64",
    "float64": "FLOAT_64",
    "int8": "INT_8",
    "int16": "INT_16",
    "int32": "INT_32",
    "int64": "INT_64",
    "uint8": "UINT_8",
    "uint16": "UINT_16",
    "uint32": "UINT_32",
    "uint64": "UINT_64",
    "bool": "BOOL_8",
    "bfloat16": "BFLOAT_16",
}
FORMATS = (
    "ND", "NCHW", "NHWC", "NC1HWC0", "NC1HWC0_C04", "FRACTAL_Z", "FRACTAL_Z_C04", "FRACTAL_NZ",
    "C1HWNCoC0", "NDC1HWC0", "FRACTAL_Z_3D", "FRACTAL_Z_3D_TRANSPOSE", "NCDHW", "NDHWC",
)  # fmt: skip
ATTR_TYPES = {
    "int": ("INT_32", True),
    "float": ("FLOAT_32", True),
    "bool": ("BOOL_8", True),
    "str": ("STRING", True),
    "listInt": ("INT_32", False),
    "listFloat": ("FLOAT_32", False),
    "listBool": ("BOOL_8", False),
    # a list of int lists: a 2-D INT_32 tensor parameter (rank 2D, rows of equal length)
    "listListInt": ("INT_32", None),
}
PARAM_TYPES = ("required", "optional", "dynamic")
PATTERNS = ("broadcast", "reduce", "formatAgnostic", "elemwise")
_TENSOR_FIELDS = {
    "name",
    "paramType",
    "dtype",
    "format",
    "reshapeType",
    "shape",
    "unknownshape_format",
}
_ATTR_FIELDS = {"type", "value", "paramType", "defaultValue"}
_OP_KEYS = {
    "attr.list", "opFile.value", "opInterface.value", "op.pattern", "dynamicFormat.flag",
    "precision_reduce.flag", "heavyOp.flag", "heavyOp", "needCheckSupport.flag",
    "dynamicShapeSupport.flag", "dynamicRankSupport.flag", "dynamicCompileStatic.flag",
    "jitCompile.flag",
}  # fmt: skip
#: flags kept as metadata only: they steer Ascend's graph compiler (shape generalization,
#: binary reuse, JIT), which has no counterpart in an NNAPI driver that runs numpy kernels
_METADATA_FLAGS = (
    "precision_reduce.flag", "heavyOp.flag", "heavyOp", "needCheckSupport.flag",
    "dynamicShapeSupport.flag", "dynamicRankSupport.flag", "dynamicCompileStatic.flag",
    "jitCompile.flag",
)  # fmt: skip


def _key_lines(text: str) -> dict[tuple[str, str], int]:
    """(section, key) -> line, from a plain scan of the file."""
    lines: dict[tuple[str, str], int] = {}
    section = ""
    for n, raw in enumerate(text.splitlines(), 1):
        s = raw.strip()
        if not s or s[0] in "#;":
            continue
        m = re.fullmatch(r"\[(.*)\]", s)
        if m:
            section = m.group(1).strip()
            lines.setdefault((section, ""), n)
            continue
        m = re.match(r"([^=:]+?)\s*[=:]", s)
        if m:
            lines.setdefault((section, m.group(1).strip().lower()), n)
    return lines


def _flag(value: str, fail) -> bool:
    low = value.strip().lower()
    if low in ("true", "1"):
        return True
    if low in ("false", "0"):
        return False
    raise fail(f"{value!r} is not true/false")


def _split(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def _op(section: configparser.SectionProxy, name: str, source: str, lines: dict) -> OpSpec:
    def line(key: str = "") -> int | None:
        return lines.get((name, key.lower()), lines.get((name, "")))

    def fail(key: str, message: str) -> ConfigError:
        return ConfigError(source, line(key), f"[{name}] {key}" if key else f"[{name}]", message)

    meta: dict = {}
    tensors: dict[tuple[str, int], dict[str, str]] = {}
    attrs: dict[str, dict[str, str]] = {}
    for key, value in section.items():
        m = re.fullmatch(r"(input|output)(\d+)\.(\w+)", key)
        if m:
            kind, idx, field = m.group(1), int(m.group(2)), m.group(3)
            if field not in _TENSOR_FIELDS:
                raise fail(
                    key, f"unknown field {field!r}; expected {', '.join(sorted(_TENSOR_FIELDS))}"
                )
            tensors.setdefault((kind, idx), {})[field] = value
            continue
        m = re.fullmatch(r"attr_(\w+)\.(\w+)", key)
        if m:
            if m.group(2) not in _ATTR_FIELDS:
                raise fail(
                    key, f"unknown attribute field; expected {', '.join(sorted(_ATTR_FIELDS))}"
                )
            attrs.setdefault(m.group(1), {})[m.group(2)] = value
            continue
        if key not in _OP_KEYS:
            raise fail(key, "unknown key; expected inputN.*, outputN.*, attr.list, attr_<name>.*, "
                       + ", ".join(sorted(_OP_KEYS - {"attr.list"})))  # fmt: skip
    dynamic_format = _flag(section.get("dynamicFormat.flag", "false"),
                           lambda m: fail("dynamicFormat.flag", m))  # fmt: skip
    meta["dynamic_format"] = dynamic_format
    meta["op_file"] = section.get("opFile.value", snake_case(name)).strip()
    meta["op_interface"] = section.get("opInterface.value", snake_case(name)).strip()
    if "op.pattern" in section:
        pattern = section["op.pattern"].strip()
        if pattern not in PATTERNS:
            raise fail("op.pattern", f"{pattern!r}; expected one of {', '.join(PATTERNS)}")
        meta["pattern"] = pattern
    for flag in _METADATA_FLAGS:
        if flag in section:
            meta[flag.split(".")[0]] = _flag(section[flag], lambda m, f=flag: fail(f, m))

    specs: dict[str, list[TensorSpec]] = {"input": [], "output": []}
    columns: list[tuple[str, list[str]]] = []
    for kind in ("input", "output"):
        indexes = sorted(i for k, i in tensors if k == kind)
        for expected, idx in enumerate(indexes):
            if idx != expected:
                raise fail(f"{kind}{idx}.name", f"{kind} numbers must run 0, 1, 2, ...; "
                           f"{kind}{expected} is missing")  # fmt: skip
            t = tensors[(kind, idx)]
            prefix = f"{kind}{idx}"
            if "name" not in t:
                raise fail(f"{prefix}.name", "missing; every input and output needs a name")
            ptype = t.get("paramType", "required").strip()
            if ptype not in PARAM_TYPES:
                raise fail(f"{prefix}.paramType", f"{ptype!r}; expected {', '.join(PARAM_TYPES)}")
            dtypes = _split(t.get("dtype", ""))
            formats = _split(t.get("format", ""))
            for d in dtypes:
                if d not in DTYPES:
                    raise fail(f"{prefix}.dtype", f"unknown dtype {d!r}; expected "
                               + ", ".join(DTYPES))  # fmt: skip
            for f in formats:
                if f not in FORMATS:
                    raise fail(f"{prefix}.format", f"unknown format {f!r}; expected "
                               + ", ".join(FORMATS))  # fmt: skip
            if not dynamic_format:
                if not dtypes:
                    raise fail(f"{prefix}.dtype", "missing (or set dynamicFormat.flag=true)")
                if formats and len(formats) != len(dtypes):
                    raise fail(f"{prefix}.format", f"{len(formats)} formats for {len(dtypes)} "
                               f"dtypes in {prefix}.dtype; the lists pair up column by column")  # fmt: skip
            columns.append((prefix, [DTYPES[d] for d in dtypes]))
            extra = {k: t[k] for k in ("reshapeType", "shape", "format") if k in t}
            if extra:  # kept as metadata (formats other than ND mean nothing to NNAPI)
                meta.setdefault("tensors", {})[t["name"].strip()] = extra
            specs[kind].append(
                TensorSpec(
                    name=t["name"].strip(),
                    kind=kind,
                    datatypes=tuple(dict.fromkeys(DTYPES[d] for d in dtypes)),
                    mandatory=ptype != "optional",
                    repeated=ptype == "dynamic",
                    layout=formats[0] if formats and len(set(formats)) == 1 else None,
                    line=line(f"{prefix}.name"),
                )
            )
    if not dynamic_format and columns:
        first_name, first = columns[0]
        for prefix, col in columns[1:]:
            if len(col) != len(first):
                raise fail(f"{prefix}.dtype", f"{len(col)} dtypes but {first_name}.dtype has "
                           f"{len(first)}; every tensor's list pairs up column by column")  # fmt: skip
        meta["combinations"] = [[c[k] for _, c in columns] for k in range(len(first))]

    params = []
    listed = _split(section.get("attr.list", ""))
    for a in attrs:
        if a not in listed:
            raise fail(f"attr_{a}.type", f"attribute {a!r} is not in attr.list")
    for a in listed:
        info = attrs.get(a)
        if info is None or "type" not in info:
            raise fail("attr.list", f"attribute {a!r} has no attr_{a}.type")
        atype = info["type"].strip()
        if atype not in ATTR_TYPES:
            raise fail(f"attr_{a}.type", f"{atype!r}; expected {', '.join(ATTR_TYPES)}")
        dt, scalar = ATTR_TYPES[atype]
        rank = "SCALAR" if scalar else ("2D" if scalar is None else "1D")
        scalar = bool(scalar)
        ptype = info.get("paramType", "required").strip()
        if ptype not in ("required", "optional"):
            raise fail(f"attr_{a}.paramType", f"{ptype!r}; expected required or optional")
        default = None
        if "defaultValue" in info:
            if ptype == "required":
                raise fail(f"attr_{a}.defaultValue", "a defaultValue on a required attribute "
                           "is never used; make it paramType=optional")  # fmt: skip
            default = parse_default(info["defaultValue"])
        values = info.get("value", "all").strip()
        constraints = () if values in ("", "all") else (f"Value: one of {values}",)
        if default is not None and values not in ("", "all"):
            allowed = [parse_default(v) for v in _split(values)]
            if scalar and default not in allowed:
                raise fail(f"attr_{a}.defaultValue", f"{default!r} is not in attr_{a}.value "
                           f"({values})")  # fmt: skip
        params.append(
            TensorSpec(
                name=a,
                kind="param",
                datatypes=(dt,),
                mandatory=ptype == "required",
                rank=rank,
                default=default,
                scalar=scalar,
                constraints=constraints,
                line=line(f"attr_{a}.type"),
            )
        )
    return OpSpec(
        name=name,
        inputs=tuple(specs["input"]),
        outputs=tuple(specs["output"]),
        params=tuple(params),
        metadata=meta,
        line=line(),
    )


def load_ini(path: str, data: bytes | None = None) -> PackageSpec:
    """Load an Ascend op-info INI file (raises ConfigError)."""
    source = str(path)
    if data is None:
        with open(path, "rb") as f:
            data = f.read()
    text = decode_utf8(source, data)
    parser = configparser.ConfigParser(strict=True, interpolation=None, delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]  (case kept)
    try:
        parser.read_string(text, source=source)
    except configparser.DuplicateOptionError as exc:
        raise ConfigError(source, exc.lineno, f"[{exc.section}] {exc.option}",
                          "duplicate key in this section") from None  # fmt: skip
    except configparser.DuplicateSectionError as exc:
        raise ConfigError(source, exc.lineno, f"[{exc.section}]", "duplicate section") from None
    except configparser.MissingSectionHeaderError as exc:
        raise ConfigError(
            source, exc.lineno, "INI", "a key before the first [OpType] section"
        ) from None
    except configparser.ParsingError as exc:
        line = exc.errors[0][0] if exc.errors else None
        raise ConfigError(
            source, line, "INI", "a line that is not [Section] or key=value"
        ) from None
    lines = _key_lines(text)
    ops = tuple(_op(parser[s], s, source, lines) for s in parser.sections())
    if not ops:
        raise ConfigError(source, None, "INI", "no [OpType] section")
    stem = Path(source).stem
    spec = PackageSpec(
        package_name="".join(p.capitalize() for p in re.split(r"[^0-9a-zA-Z]+", stem) if p)
        or "AscendOps",
        domain="ascend",
        version="1.0",
        ops=ops,
        syntax="ini",
        source=source,
    )
    check_package(spec)
    return spec
