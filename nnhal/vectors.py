"""The test-vector JSON format: the project's model file format.

The format is described in ``../shared/nnapi-vectors/README.md``: a file
(``.json`` or ``.json.gz``) holds one test model object or a list of them;
each carries the model graph (``main`` + ``referenced``), the input values and
the expected output values. This module

- loads files into :class:`TestModel` records (``load_vectors``,
  ``find_vector_files``): the HAL :class:`~nnhal.types.Model` (operand values
  packed like the Android runtime does, CONSTANT_REFERENCE data in one inline
  pool), the input arrays, the expected outputs and their shapes;
- writes them back (``dump_test_model``, ``model_to_json``,
  ``save_vectors``), so any Model can be stored as a model file;
- re-exports the comparison with the README's tolerance table (``tolerance``,
  ``compare``, ``check_multinomial``; they live in ``nnhal.tolerance``).

Running test models against a device lives in ``nnhal.vector_runner``.
"""

from __future__ import annotations

import gzip
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from nnhal.builder import ValuePacker
from nnhal.tolerance import check_multinomial, compare, tolerance
from nnhal.types import (
    OPERAND_TYPE_INFO,
    DataLocation,
    ExtensionNameAndPrefix,
    InlineMemory,
    Model,
    Operand,
    OperandLifeTime,
    OperandType,
    Operation,
    OperationType,
    Subgraph,
    SymmPerChannelQuantParams,
    operation_name,
    type_name,
)

__all__ = [
    "TestModel",
    "VectorFormatError",
    "check_multinomial",
    "compare",
    "dump_test_model",
    "find_vector_files",
    "load_vectors",
    "model_to_json",
    "operations_used",
    "parse_test_model",
    "save_vectors",
    "tolerance",
]

_DTYPES = {
    "float32",
    "float16",
    "int32",
    "uint32",
    "int16",
    "uint16",
    "int8",
    "uint8",
    "bool",
    # element types of vendor extension operands (no NNAPI type has them)
    "int64",
    "uint64",
    "float64",
}


class VectorFormatError(ValueError):
    """A model file that does not follow the vector format."""


@dataclass
class TestModel:
    """One test model of a vector file."""

    __test__ = False  # not a pytest class, despite the name

    name: str
    model: Model
    #: one per main.inputIndexes; None = no value (hasNoValue)
    inputs: list[np.ndarray | None]
    #: one per main.outputIndexes; None = no expected value in the file
    expected: list[np.ndarray | None]
    #: the main outputs' dimensions (the expected output shapes)
    expected_shapes: list[tuple[int, ...]]
    output_types: list[int]
    ignored: list[bool]
    expectFailure: bool = False
    expectedMultinomialDistributionTolerance: float = 0.0
    testName: str = ""
    spec: str = ""
    specVersion: str = ""
    minSupportedVersion: str = ""
    source: str = ""
    #: operand names per subgraph (main first), kept for writing the file back
    operand_names: list[list[str]] = field(default_factory=list)


# --------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------


def _enum(enum_cls: type, value: Any, what: str, where: str) -> int:
    if isinstance(value, bool):
        raise VectorFormatError(f"{where}: {what} must be a name or a number, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(enum_cls[value])
        except KeyError:
            pass
    raise VectorFormatError(f"{where}: unknown {what} {value!r}")


def _float(v: Any) -> float:
    # Python's json module writes NaN/Infinity bare; accept strings too
    if isinstance(v, str):
        return float({"Infinity": "inf", "-Infinity": "-inf"}.get(v, v))
    return float(v)


def _data_array(data: Any, where: str) -> np.ndarray:
    if not isinstance(data, dict) or "dtype" not in data or "values" not in data:
        raise VectorFormatError(f"{where}: data must be {{'dtype': ..., 'values': [...]}}")
    dtype = data["dtype"]
    if dtype not in _DTYPES:
        raise VectorFormatError(f"{where}: unknown data dtype {dtype!r}")
    values = data["values"]
    if not isinstance(values, list):
        raise VectorFormatError(f"{where}: data values must be a list")
    try:
        if dtype.startswith("float"):
            return np.array([_float(v) for v in values], dtype=dtype)
        if dtype == "uint64":  # beyond int64's range
            return np.array(values, dtype=np.uint64)
        return np.array(values, dtype=np.int64).astype(dtype)
    except (TypeError, ValueError, OverflowError) as e:
        raise VectorFormatError(f"{where}: bad data values ({e})") from None


def _typed(type_code: int, arr: np.ndarray, where: str) -> np.ndarray:
    """``arr`` as the operand type's dtype; a dtype that disagrees is an error."""
    info = OPERAND_TYPE_INFO.get(type_code)
    if info is None or info.dtype is None:
        # extension / OEM types: the file's dtype is the element type (raw bytes as uint8)
        return arr
    if arr.dtype != info.dtype:
        raise VectorFormatError(
            f"{where}: data dtype {arr.dtype.name} does not match operand type "
            f"{type_name(type_code)} ({info.dtype.name})"
        )
    return arr


def _shaped(arr: np.ndarray, dims: tuple[int, ...], type_code: int) -> np.ndarray:
    info = OPERAND_TYPE_INFO.get(type_code)
    if info is not None and info.is_scalar:
        return arr.reshape(()) if arr.size == 1 else arr
    # A zero-sized expected output (some axis 0, no values) keeps its shape too.
    if dims and math.prod(dims) == arr.size:
        return arr.reshape(dims)
    return arr


def _req(d: dict, key: str, where: str) -> Any:
    if not isinstance(d, dict):
        raise VectorFormatError(f"{where}: expected an object, got {type(d).__name__}")
    if key not in d:
        raise VectorFormatError(f"{where}: missing key {key!r}")
    return d[key]


def _index_list(value: Any, where: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) for i in value
    ):
        raise VectorFormatError(f"{where}: expected a list of integers")
    return tuple(value)


def _parse_subgraph(
    sg: dict, where: str, packer: ValuePacker, is_main: bool
) -> tuple[Subgraph, list[str], dict[int, np.ndarray | None], list[bool]]:
    operands_json = _req(sg, "operands", where)
    operations_json = _req(sg, "operations", where)
    if not isinstance(operands_json, list) or not isinstance(operations_json, list):
        raise VectorFormatError(f"{where}: operands and operations must be lists")
    inputs = _index_list(_req(sg, "inputIndexes", where), f"{where} inputIndexes")
    outputs = _index_list(_req(sg, "outputIndexes", where), f"{where} outputIndexes")

    operations = []
    for k, op in enumerate(operations_json):
        w = f"{where} operation {k}"
        operations.append(
            Operation(
                type=_enum(OperationType, _req(op, "type", w), "operation type", w),
                inputs=_index_list(_req(op, "inputs", w), f"{w} inputs"),
                outputs=_index_list(_req(op, "outputs", w), f"{w} outputs"),
            )
        )
    consumers = [0] * len(operands_json)
    for op in operations:
        for i in op.inputs:
            if 0 <= i < len(consumers):
                consumers[i] += 1

    operands, names, values, ignored = [], [], {}, []
    for n, od in enumerate(operands_json):
        w = f"{where} operand {n}"
        code = _enum(OperandType, _req(od, "type", w), "operand type", w)
        lifetime = OperandLifeTime(_enum(OperandLifeTime, _req(od, "lifetime", w), "lifetime", w))
        dims = _index_list(od.get("dimensions", []), f"{w} dimensions")
        cq = od.get("channelQuant")
        extra: Any = None
        if cq is not None:
            extra = SymmPerChannelQuantParams(
                tuple(_float(s) for s in _req(cq, "scales", w)), int(_req(cq, "channelDim", w))
            )
        elif od.get("extensionParams") is not None:  # nnhal addition: hex bytes
            extra = bytes.fromhex(od["extensionParams"])
        data = od.get("data")
        arr = None if data is None else _typed(code, _data_array(data, w), w)
        location = DataLocation()
        if lifetime in (OperandLifeTime.CONSTANT_COPY, OperandLifeTime.CONSTANT_REFERENCE):
            if arr is None or arr.size == 0:
                raise VectorFormatError(f"{w}: {lifetime.name} operand without data")
            raw = arr.tobytes()
            location = (
                packer.add_copy(raw)
                if lifetime == OperandLifeTime.CONSTANT_COPY
                else packer.add_reference(raw)
            )
        elif lifetime == OperandLifeTime.SUBGRAPH:
            if arr is None or arr.size != 1:
                raise VectorFormatError(f"{w}: SUBGRAPH operand needs the referenced index")
            location = DataLocation(0, int(arr.reshape(-1)[0]), 0)
        elif is_main and lifetime in (
            OperandLifeTime.SUBGRAPH_INPUT,
            OperandLifeTime.SUBGRAPH_OUTPUT,
        ):
            if arr is None or (lifetime == OperandLifeTime.SUBGRAPH_INPUT and arr.size == 0):
                # As the Android test harness does: an input without data is
                # sent with hasNoValue (an omitted optional input).
                values[n] = None
            else:
                values[n] = _shaped(arr, dims, code)
        noc = od.get("numberOfConsumers")
        operands.append(
            Operand(
                type=code,
                dimensions=dims,
                numberOfConsumers=consumers[n] if noc is None else int(noc),
                scale=_float(od.get("scale", 0.0)),
                zeroPoint=int(od.get("zeroPoint", 0)),
                lifetime=lifetime,
                location=location,
                extraParams=extra,
            )
        )
        names.append(str(od.get("name", "")))
        ignored.append(bool(od.get("isIgnored", False)))
    return Subgraph(tuple(operands), tuple(operations), inputs, outputs), names, values, ignored


def parse_test_model(d: Any, source: str = "", position: int = 0) -> TestModel:
    """One test model object (already decoded from JSON) as a TestModel."""
    label = d.get("name") if isinstance(d, dict) else None
    where = f"{source or '<json>'}: model {label or f'#{position}'}"
    main_json = _req(d, "main", where)
    referenced_json = d.get("referenced") or []
    if not isinstance(referenced_json, list):
        raise VectorFormatError(f"{where}: referenced must be a list")
    packer = ValuePacker(pool_index=0)
    try:
        main, main_names, values, ignored = _parse_subgraph(
            main_json, f"{where} subgraph 0", packer, True
        )
        referenced, names = [], [main_names]
        for k, sg in enumerate(referenced_json):
            s, n, _, _ = _parse_subgraph(sg, f"{where} subgraph {k + 1}", packer, False)
            referenced.append(s)
            names.append(n)
    except (TypeError, AttributeError) as e:  # a wrong JSON shape deep inside
        raise VectorFormatError(f"{where}: malformed model ({e})") from None
    for i in (*main.inputIndexes, *main.outputIndexes):
        if not 0 <= i < len(main.operands):
            raise VectorFormatError(f"{where}: input/output index {i} out of range")
    model = Model(
        main=main,
        referenced=tuple(referenced),
        operandValues=bytes(packer.operand_values),
        pools=(InlineMemory(bytes(packer.pool)),) if packer.pool else (),
        relaxComputationFloat32toFloat16=bool(d.get("isRelaxed", False)),
        extensionNameToPrefix=tuple(
            ExtensionNameAndPrefix(str(e["name"]), int(e["prefix"]))
            for e in d.get("extensionNameToPrefix", [])
        ),
    )
    return TestModel(
        name=str(d.get("name") or f"{Path(source).name or 'model'}#{position}"),
        model=model,
        inputs=[values.get(i) for i in main.inputIndexes],
        expected=[values.get(i) for i in main.outputIndexes],
        expected_shapes=[main.operands[i].dimensions for i in main.outputIndexes],
        output_types=[main.operands[i].type for i in main.outputIndexes],
        ignored=[ignored[i] for i in main.outputIndexes],
        expectFailure=bool(d.get("expectFailure", False)),
        expectedMultinomialDistributionTolerance=_float(
            d.get("expectedMultinomialDistributionTolerance", 0.0)
        ),
        testName=str(d.get("testName", "")),
        spec=str(d.get("spec", "")),
        specVersion=str(d.get("specVersion", "")),
        minSupportedVersion=str(d.get("minSupportedVersion", "")),
        source=source,
        operand_names=names,
    )


def _read_json(path: Path) -> Any:
    try:
        if path.name.endswith(".gz"):
            with gzip.open(path, "rt", encoding="utf-8") as f:
                return json.load(f)
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        raise VectorFormatError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise VectorFormatError(f"{path}: is a directory") from None
    except (json.JSONDecodeError, UnicodeDecodeError, gzip.BadGzipFile, EOFError) as e:
        raise VectorFormatError(f"{path}: not a valid JSON model file ({e})") from None


def load_vectors(path: str | Path) -> list[TestModel]:
    """Every test model in one file (one model object or a list of them)."""
    p = Path(path)
    doc = _read_json(p)
    items = doc if isinstance(doc, list) else [doc]
    if not all(isinstance(x, dict) for x in items):
        raise VectorFormatError(f"{p}: expected a model object or a list of model objects")
    return [parse_test_model(x, str(p), k) for k, x in enumerate(items)]


def find_vector_files(paths: Iterable[str | Path]) -> list[Path]:
    """The given files, plus every ``*.json`` / ``*.json.gz`` under given folders (sorted)."""
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            found = [
                f
                for f in p.rglob("*")
                if f.is_file() and (f.name.endswith(".json") or f.name.endswith(".json.gz"))
            ]
            out.extend(sorted(found))
        elif p.exists():
            out.append(p)
        else:
            raise VectorFormatError(f"{p}: no such file or folder")
    return out


def operations_used(model: Model) -> set[str]:
    """HAL names of the operations in the main and every referenced subgraph."""
    return {
        operation_name(op.type) for sg in (model.main, *model.referenced) for op in sg.operations
    }


# --------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------


def _data_json(arr: np.ndarray) -> dict:
    flat = np.ascontiguousarray(arr).reshape(-1)
    if flat.dtype == np.bool_:
        values: list = flat.astype(np.uint8).tolist()
    else:
        values = flat.tolist()
    return {"dtype": flat.dtype.name, "values": values}


def _pool_bytes(model: Model, index: int) -> bytes:
    if not 0 <= index < len(model.pools):
        raise ValueError(f"CONSTANT_REFERENCE names pool {index}; the model has {len(model.pools)}")
    pool = model.pools[index]
    if not isinstance(pool, InlineMemory):
        raise ValueError(
            f"pool {index} is {type(pool).__name__}; only inline pools can be written to a file"
        )
    return pool.data


def _constant_array(model: Model, operand: Operand) -> np.ndarray:
    loc = operand.location
    if operand.lifetime == OperandLifeTime.CONSTANT_COPY:
        raw = model.operandValues[loc.offset : loc.offset + loc.length]
    else:
        raw = _pool_bytes(model, loc.poolIndex)[loc.offset : loc.offset + loc.length]
    if len(raw) != loc.length:
        raise ValueError(f"constant at offset {loc.offset} length {loc.length} is out of bounds")
    info = OPERAND_TYPE_INFO.get(operand.type)
    dtype = info.dtype if info is not None and info.dtype is not None else np.dtype(np.uint8)
    if len(raw) % dtype.itemsize:
        raise ValueError(f"constant of {len(raw)} bytes is not a whole number of {dtype.name}")
    return np.frombuffer(raw, dtype=dtype)


def _type_json(code: int) -> str | int:
    try:
        return OperandType(code).name
    except ValueError:
        return code


def _subgraph_json(
    model: Model,
    sg: Subgraph,
    names: Sequence[str] | None,
    values: dict[int, np.ndarray | None],
    ignored: dict[int, bool],
) -> dict:
    operands = []
    for n, o in enumerate(sg.operands):
        data = None
        if o.lifetime in (OperandLifeTime.CONSTANT_COPY, OperandLifeTime.CONSTANT_REFERENCE):
            data = _data_json(_constant_array(model, o))
        elif o.lifetime == OperandLifeTime.SUBGRAPH:
            data = {"dtype": "uint32", "values": [o.location.offset]}
        elif values.get(n) is not None:
            info = OPERAND_TYPE_INFO.get(o.type)
            v = np.asarray(values[n])
            if info is not None and info.dtype is not None:
                v = v.astype(info.dtype)
            data = _data_json(v)
        entry: dict[str, Any] = {
            "name": names[n] if names is not None and n < len(names) else "",
            "type": _type_json(o.type),
            "dimensions": list(o.dimensions),
            "scale": o.scale,
            "zeroPoint": o.zeroPoint,
            "lifetime": OperandLifeTime(o.lifetime).name,
            "numberOfConsumers": o.numberOfConsumers,
            "isIgnored": ignored.get(n, False),
            "channelQuant": None,
            "data": data,
        }
        if isinstance(o.extraParams, SymmPerChannelQuantParams):
            entry["channelQuant"] = {
                "scales": list(o.extraParams.scales),
                "channelDim": o.extraParams.channelDim,
            }
        elif isinstance(o.extraParams, bytes):
            entry["extensionParams"] = o.extraParams.hex()
        operands.append(entry)
    return {
        "operands": operands,
        "operations": [
            {"type": _op_json(op.type), "inputs": list(op.inputs), "outputs": list(op.outputs)}
            for op in sg.operations
        ],
        "inputIndexes": list(sg.inputIndexes),
        "outputIndexes": list(sg.outputIndexes),
    }


def _op_json(code: int) -> str | int:
    try:
        return OperationType(code).name
    except ValueError:
        return code


def model_to_json(
    model: Model,
    *,
    name: str = "model",
    inputs: Sequence[np.ndarray | None] | None = None,
    expected: Sequence[np.ndarray | None] | None = None,
    ignored: Sequence[bool] | None = None,
    expectFailure: bool = False,
    operand_names: Sequence[Sequence[str]] | None = None,
    **extra: Any,
) -> dict:
    """A Model (plus optional input and expected output values) as a vector object.

    Raises ValueError for models that cannot be stored (shared-memory pools).
    """
    main = model.main
    values: dict[int, np.ndarray | None] = {}
    for seq, idx in ((inputs, main.inputIndexes), (expected, main.outputIndexes)):
        if seq is not None:
            if len(seq) != len(idx):
                raise ValueError(f"got {len(seq)} values for {len(idx)} operands")
            values.update(zip(idx, seq))
    ign = dict(zip(main.outputIndexes, ignored)) if ignored is not None else {}
    names = list(operand_names or [])
    doc = {
        "name": name,
        "testName": extra.pop("testName", name.replace("/", "_")),
        "spec": extra.pop("spec", name.split("/")[0]),
        "specVersion": extra.pop("specVersion", "V1_3"),
        "expectFailure": bool(expectFailure),
        "isRelaxed": bool(model.relaxComputationFloat32toFloat16),
        "expectedMultinomialDistributionTolerance": float(
            extra.pop("expectedMultinomialDistributionTolerance", 0.0)
        ),
        "minSupportedVersion": extra.pop("minSupportedVersion", "UNKNOWN"),
        "main": _subgraph_json(model, main, names[0] if names else None, values, ign),
        "referenced": [
            _subgraph_json(model, sg, names[k + 1] if len(names) > k + 1 else None, {}, {})
            for k, sg in enumerate(model.referenced)
        ],
    }
    if model.extensionNameToPrefix:
        doc["extensionNameToPrefix"] = [
            {"name": e.name, "prefix": e.prefix} for e in model.extensionNameToPrefix
        ]
    if extra:
        raise TypeError(f"unexpected keyword arguments: {sorted(extra)}")
    return doc


def dump_test_model(t: TestModel) -> dict:
    """The vector object of a TestModel (inverse of ``parse_test_model``)."""
    return model_to_json(
        t.model,
        name=t.name,
        inputs=t.inputs,
        expected=t.expected,
        ignored=t.ignored,
        expectFailure=t.expectFailure,
        operand_names=t.operand_names,
        testName=t.testName or t.name.replace("/", "_"),
        spec=t.spec or t.name.split("/")[0],
        specVersion=t.specVersion or "V1_3",
        minSupportedVersion=t.minSupportedVersion or "UNKNOWN",
        expectedMultinomialDistributionTolerance=t.expectedMultinomialDistributionTolerance,
    )


def save_vectors(path: str | Path, items: Sequence[TestModel | dict]) -> None:
    """Write test models (TestModel or vector dicts) as a JSON list (gzip for ``.gz``)."""
    docs = [dump_test_model(x) if isinstance(x, TestModel) else x for x in items]
    text = json.dumps(docs)
    p = Path(path)
    if p.name.endswith(".gz"):
        with gzip.open(p, "wt", encoding="utf-8") as f:
            f.write(text)
    else:
        p.write_text(text, encoding="utf-8")
