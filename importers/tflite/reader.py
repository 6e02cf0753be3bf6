"""Reading a ``.tflite`` flatbuffer into plain, checked records.

The flatbuffer is parsed with the ``tflite`` package (the code generated from
TFLite's published ``schema.fbs``); this module never decodes bytes itself. The
generated readers trust the file, so everything they hand back is checked
here before anyone uses it: the file identifier, the schema version, every
index (tensor, buffer, opcode, subgraph), every buffer's extent, every
constant's size against its shape, and the subgraph call graph (WHILE, IF and
CALL_ONCE must not form a cycle). A bad file raises :class:`TFLiteFormatError`
with one line naming the subgraph, operator or tensor at fault.

The records (:class:`TfModel`, :class:`TfSubgraph`, :class:`TfOperator`,
:class:`TfTensor`) are what the converter works from.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

__all__ = [
    "SCHEMA_VERSION",
    "TFLiteFormatError",
    "TfModel",
    "TfOperator",
    "TfSubgraph",
    "TfTensor",
    "read_model",
]

#: the only schema version TFLite has written since 2018 (schema.fbs ``version``)
SCHEMA_VERSION = 3
FILE_IDENTIFIER = b"TFL3"

#: tflite.TensorType -> (name, numpy dtype or None when numpy has none)
TENSOR_TYPES: dict[int, tuple[str, Any]] = {
    0: ("FLOAT32", np.float32),
    1: ("FLOAT16", np.float16),
    2: ("INT32", np.int32),
    3: ("UINT8", np.uint8),
    4: ("INT64", np.int64),
    5: ("STRING", None),
    6: ("BOOL", np.bool_),
    7: ("INT16", np.int16),
    8: ("COMPLEX64", np.complex64),
    9: ("INT8", np.int8),
    10: ("FLOAT64", np.float64),
    11: ("COMPLEX128", np.complex128),
    12: ("UINT64", np.uint64),
    13: ("RESOURCE", None),
    14: ("VARIANT", None),
    15: ("UINT32", np.uint32),
    16: ("UINT16", np.uint16),
    17: ("INT4", None),
}

#: builtin codes of operators that name other subgraphs in their options
_CALLERS = {
    "WHILE": ("CondSubgraphIndex", "BodySubgraphIndex"),
    "IF": ("ThenSubgraphIndex", "ElseSubgraphIndex"),
    "CALL_ONCE": ("InitSubgraphIndex",),
}


class TFLiteFormatError(ValueError):
    """A file that is not a valid TFLite model; the message is one line."""


@dataclass
class TfTensor:
    index: int
    name: str
    type: int  # tflite.TensorType
    shape: tuple[int, ...]
    #: -1 for dimensions unknown until run time (None: the file gives none)
    shape_signature: tuple[int, ...] | None
    #: the constant value (already shaped), None for activations
    data: np.ndarray | None = None
    scales: np.ndarray | None = None
    zero_points: np.ndarray | None = None
    quantized_dimension: int = 0
    is_sparse: bool = False
    #: the sparsity metadata of a sparse constant (``data`` then holds the stored values)
    sparsity: Any = None
    is_variable: bool = False

    @property
    def type_name(self) -> str:
        return TENSOR_TYPES.get(self.type, (f"type {self.type}", None))[0]

    @property
    def is_constant(self) -> bool:
        return self.data is not None

    @property
    def scale(self) -> float:
        return float(self.scales[0]) if self.scales is not None and len(self.scales) else 0.0

    @property
    def zero_point(self) -> int:
        zp = self.zero_points
        return int(zp[0]) if zp is not None and len(zp) else 0

    @property
    def per_channel(self) -> bool:
        return self.scales is not None and len(self.scales) > 1

    def describe(self, subgraph: int) -> str:
        return f"tensor {self.index} {self.name!r} (subgraph {subgraph})"


@dataclass
class TfOperator:
    index: int
    #: builtin operator name (tflite.utils.BUILTIN_OPCODE2NAME) or "CUSTOM"
    name: str
    version: int
    inputs: tuple[int, ...]  # -1 = omitted optional input
    outputs: tuple[int, ...]
    options: Any = None  # the typed options table of the tflite package, or None
    custom_code: str = ""
    custom_options: bytes = b""

    def describe(self, subgraph: int) -> str:
        what = f"CUSTOM {self.custom_code!r}" if self.name == "CUSTOM" else self.name
        return f"operator {self.index} {what} (subgraph {subgraph})"


@dataclass
class TfSubgraph:
    index: int
    name: str
    tensors: list[TfTensor]
    operators: list[TfOperator]
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]


@dataclass
class TfModel:
    version: int
    description: str
    subgraphs: list[TfSubgraph]
    size: int = 0
    #: operator counts per builtin name over all subgraphs
    op_counts: dict[str, int] = field(default_factory=dict)


# --------------------------------------------------------------------------


def _tflite() -> Any:
    try:
        import tflite
        from tflite import utils
    except ImportError as e:  # pragma: no cover - a core dependency
        raise TFLiteFormatError(f"the 'tflite' schema package is missing: {e}") from None
    return tflite, utils


def _vector_extent(table: Any, slot: int) -> tuple[int, int] | None:
    """(start, length in elements) of a vector field, or None when absent."""
    o = table._tab.Offset(slot)
    if o == 0:
        return None
    start = table._tab.Vector(o)
    return start, table._tab.VectorLen(o)


def _check_extent(buf: bytes, start: int, nbytes: int, what: str) -> None:
    if start < 0 or nbytes < 0 or start + nbytes > len(buf):
        raise TFLiteFormatError(
            f"{what} lies outside the file (bytes {start}..{start + nbytes} of {len(buf)}): "
            "the file is truncated or corrupt"
        )


def _int_vector(table: Any, slot: int, buf: bytes, what: str) -> tuple[int, ...]:
    ext = _vector_extent(table, slot)
    if ext is None:
        return ()
    _check_extent(buf, ext[0], 4 * ext[1], what)
    return tuple(int(v) for v in np.frombuffer(buf, "<i4", ext[1], ext[0]))


def _options(tfl: Any, op: Any, names: dict[int, str]) -> Any:
    kind = op.BuiltinOptionsType()
    if kind == 0:
        return None
    table = op.BuiltinOptions()
    cls = getattr(tfl, names.get(kind, ""), None)
    if cls is None or table is None:
        return None
    opts = cls()
    opts.Init(table.Bytes, table.Pos)
    return opts


def read_model(source: str | Path | bytes) -> TfModel:
    """Parse and check a TFLite model (a path or the file's bytes)."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        buf = bytes(source)
        label = "model"
    else:
        label = str(source)
        try:
            buf = Path(source).read_bytes()
        except OSError as e:
            raise TFLiteFormatError(f"cannot read {label}: {e.strerror or e}") from None
    if len(buf) < 8:
        raise TFLiteFormatError(f"not a TFLite flatbuffer: only {len(buf)} bytes")
    if buf[4:8] != FILE_IDENTIFIER:
        raise TFLiteFormatError(
            f"not a TFLite flatbuffer: file identifier {bytes(buf[4:8])!r}, expected {FILE_IDENTIFIER!r}"
        )
    root = struct.unpack_from("<I", buf, 0)[0]
    if root + 4 > len(buf):
        raise TFLiteFormatError(
            f"truncated TFLite flatbuffer: the root table is at byte {root} of {len(buf)}"
        )
    try:
        return _read(buf)
    except TFLiteFormatError:
        raise
    except (IndexError, struct.error, ValueError, TypeError, OverflowError) as e:
        raise TFLiteFormatError(
            f"truncated or corrupt TFLite flatbuffer ({type(e).__name__}: {e})"
        ) from None


class _Cursor:
    """Where the reader is, for error messages."""

    def __init__(self) -> None:
        self.where = "the model"


def _read(buf: bytes) -> TfModel:
    tfl, utils = _tflite()
    model = tfl.Model.GetRootAsModel(buf, 0)
    version = model.Version()
    if version != SCHEMA_VERSION:
        raise TFLiteFormatError(
            f"unknown TFLite schema version {version} (this reader knows version {SCHEMA_VERSION})"
        )
    option_names = {v: k for k, v in vars(tfl.BuiltinOptions).items() if isinstance(v, int)}

    # operator codes
    codes: list[tuple[str, int, str]] = []
    for i in range(model.OperatorCodesLength()):
        oc = model.OperatorCodes(i)
        code = max(int(oc.BuiltinCode()), int(oc.DeprecatedBuiltinCode()))
        name = utils.BUILTIN_OPCODE2NAME.get(code, f"BUILTIN_{code}")
        custom = oc.CustomCode()
        codes.append((name, int(oc.Version()), custom.decode("utf-8", "replace") if custom else ""))

    # buffers: (start, nbytes) in the file, or None for empty buffers; their extent is
    # checked where a tensor uses them (so the error names the tensor), then for the rest
    buffers: list[tuple[int, int] | None] = []
    for b in range(model.BuffersLength()):
        fb = model.Buffers(b)
        ext = _vector_extent(fb, 4)
        offset, size = int(fb.Offset()), int(fb.Size())
        if offset > 1:  # buffers of models over 2 GB live after the flatbuffer
            buffers.append((offset, size))
        elif ext is not None and ext[1] > 0:
            buffers.append(ext)
        else:
            buffers.append(None)
    n_subgraphs = model.SubgraphsLength()
    if n_subgraphs == 0:
        raise TFLiteFormatError("the model has no subgraphs")
    subgraphs = []
    op_counts: dict[str, int] = {}
    for s in range(n_subgraphs):
        sg = model.Subgraphs(s)
        tensors = [
            _read_tensor(sg.Tensors(t), t, s, buf, buffers) for t in range(sg.TensorsLength())
        ]
        n_t = len(tensors)
        inputs = _int_vector(sg, 6, buf, f"subgraph {s} inputs")
        outputs = _int_vector(sg, 8, buf, f"subgraph {s} outputs")
        for kind, idx in (("input", inputs), ("output", outputs)):
            for t in idx:
                if not 0 <= t < n_t:
                    raise TFLiteFormatError(
                        f"subgraph {s}: {kind} names tensor {t}, but it has {n_t} tensors"
                    )
        operators = []
        for j in range(sg.OperatorsLength()):
            op = sg.Operators(j)
            oi = int(op.OpcodeIndex())
            if not 0 <= oi < len(codes):
                raise TFLiteFormatError(
                    f"operator {j} (subgraph {s}): opcode index {oi}, but the model has "
                    f"{len(codes)} operator codes"
                )
            name, ver, custom = codes[oi]
            rec = TfOperator(
                index=j,
                name=name,
                version=ver,
                inputs=_int_vector(op, 6, buf, f"operator {j} (subgraph {s}) inputs"),
                outputs=_int_vector(op, 8, buf, f"operator {j} (subgraph {s}) outputs"),
                options=_options(tfl, op, option_names),
                custom_code=custom,
            )
            if name == "CUSTOM":
                ext = _vector_extent(op, 14)
                if ext is not None:
                    _check_extent(buf, ext[0], ext[1], rec.describe(s) + " custom options")
                    rec.custom_options = bytes(buf[ext[0] : ext[0] + ext[1]])
            for kind, idx in (("input", rec.inputs), ("output", rec.outputs)):
                for t in idx:
                    if not (0 <= t < n_t or (kind == "input" and t == -1)):
                        raise TFLiteFormatError(
                            f"{rec.describe(s)}: {kind} names tensor {t}, but the subgraph "
                            f"has {n_t} tensors"
                        )
            operators.append(rec)
            op_counts[name] = op_counts.get(name, 0) + 1
        name = sg.Name()
        subgraphs.append(
            TfSubgraph(
                s,
                name.decode("utf-8", "replace") if name else "",
                tensors,
                operators,
                inputs,
                outputs,
            )
        )
    for b, ext in enumerate(buffers):
        if ext is not None:
            _check_extent(buf, ext[0], ext[1], f"buffer {b}")
    _check_calls(subgraphs)
    for sg in subgraphs:
        _check_dataflow(sg)
    desc = model.Description()
    return TfModel(
        version=version,
        description=desc.decode("utf-8", "replace") if desc else "",
        subgraphs=subgraphs,
        size=len(buf),
        op_counts=op_counts,
    )


def _read_tensor(
    t: Any, index: int, s: int, buf: bytes, buffers: list[tuple[int, int] | None]
) -> TfTensor:
    raw_name = t.Name()
    name = raw_name.decode("utf-8", "replace") if raw_name else f"tensor_{index}"
    shape = _int_vector(t, 4, buf, f"tensor {index} (subgraph {s}) shape")
    sig_ext = _vector_extent(t, 18)
    sig = (
        _int_vector(t, 18, buf, f"tensor {index} (subgraph {s}) shape signature")
        if sig_ext
        else None
    )
    rec = TfTensor(index, name, int(t.Type()), shape, sig, is_variable=bool(t.IsVariable()))
    where = rec.describe(s)
    if any(d < 0 for d in shape):
        raise TFLiteFormatError(f"{where}: negative dimension in shape {list(shape)}")
    q = t.Quantization()
    if q is not None:
        if not q.ScaleIsNone() and q.ScaleLength():
            ext = _vector_extent(q, 8)
            _check_extent(buf, ext[0], 4 * ext[1], where + " quantization scales")
            rec.scales = np.frombuffer(buf, "<f4", ext[1], ext[0]).astype(np.float32)
        if not q.ZeroPointIsNone() and q.ZeroPointLength():
            ext = _vector_extent(q, 10)
            _check_extent(buf, ext[0], 8 * ext[1], where + " quantization zero points")
            rec.zero_points = np.frombuffer(buf, "<i8", ext[1], ext[0]).astype(np.int64)
        rec.quantized_dimension = int(q.QuantizedDimension())
        if rec.per_channel and not 0 <= rec.quantized_dimension < max(len(shape), 1):
            raise TFLiteFormatError(
                f"{where}: quantized dimension {rec.quantized_dimension} outside rank {len(shape)}"
            )
    sp = t.Sparsity()
    rec.is_sparse = sp is not None
    if sp is not None:
        from nnhal.importers.tflite.sparsity import read_sparsity

        rec.sparsity = read_sparsity(sp, buf, where)
    b = int(t.Buffer())
    if not 0 <= b < max(len(buffers), 1) and not (b == 0 and not buffers):
        raise TFLiteFormatError(
            f"{where}: buffer index {b}, but the model has {len(buffers)} buffers"
        )
    extent = buffers[b] if buffers else None
    if extent is not None:
        start, nbytes = extent
        _check_extent(buf, start, nbytes, f"{where}: its data (buffer {b})")
        dtype = TENSOR_TYPES.get(rec.type, ("", None))[1]
        if dtype is None:
            rec.data = np.frombuffer(buf, np.uint8, nbytes, start)  # kept raw (strings...)
            return rec
        item = np.dtype(dtype).itemsize
        if rec.is_sparse:
            rec.data = np.frombuffer(buf, dtype, nbytes // item, start)
            return rec
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if nbytes != count * item:
            raise TFLiteFormatError(
                f"{where}: buffer {b} holds {nbytes} bytes, but shape {list(shape)} of "
                f"{rec.type_name} needs {count * item}"
            )
        rec.data = np.frombuffer(buf, np.dtype(dtype).newbyteorder("<"), count, start).reshape(
            shape
        )
    return rec


def _called(op: TfOperator) -> list[int]:
    fields = _CALLERS.get(op.name)
    if not fields or op.options is None:
        return []
    return [int(getattr(op.options, f)()) for f in fields]


def _check_calls(subgraphs: list[TfSubgraph]) -> None:
    """Every referenced subgraph exists, and no subgraph (indirectly) calls itself."""
    n = len(subgraphs)
    edges: dict[int, list[tuple[int, TfOperator]]] = {}
    for sg in subgraphs:
        for op in sg.operators:
            if op.name in _CALLERS and op.options is None:
                raise TFLiteFormatError(f"{op.describe(sg.index)}: no options naming its subgraphs")
            for callee in _called(op):
                if not 0 <= callee < n:
                    raise TFLiteFormatError(
                        f"{op.describe(sg.index)}: names subgraph {callee}, but the model has {n}"
                    )
                edges.setdefault(sg.index, []).append((callee, op))
    state = [0] * n  # 0 new, 1 on the stack, 2 done
    path: list[int] = []

    def visit(s: int) -> None:
        state[s] = 1
        path.append(s)
        for callee, op in edges.get(s, []):
            if state[callee] == 1:
                cycle = " -> ".join(str(x) for x in path[path.index(callee) :] + [callee])
                raise TFLiteFormatError(
                    f"subgraph cycle {cycle}: {op.describe(s)} calls subgraph {callee}, "
                    "which is already on the call path"
                )
            if state[callee] == 0:
                visit(callee)
        path.pop()
        state[s] = 2

    for s in range(n):
        if state[s] == 0:
            visit(s)


def _check_dataflow(sg: TfSubgraph) -> None:
    """Operators are in execution order: every input exists before its consumer runs."""
    ready = set(sg.inputs)
    ready.update(t.index for t in sg.tensors if t.is_constant or t.is_variable)
    producer = {}
    for op in sg.operators:
        for t in op.outputs:
            producer.setdefault(t, op)
    for op in sg.operators:
        for t in op.inputs:
            if t == -1 or t in ready:
                continue
            later = producer.get(t)
            if later is not None and later.index >= op.index:
                raise TFLiteFormatError(
                    f"{op.describe(sg.index)}: input {sg.tensors[t].describe(sg.index)} is "
                    f"produced by {later.describe(sg.index)}, which runs later (a cycle or "
                    "unsorted graph)"
                )
            # a tensor nobody produces: read as zeros by TFLite; the converter decides
        ready.update(op.outputs)
