"""Model and request generators of the fuzz targets (all driven by a ``Draw``).

- ``request_for(model, inputs)``: a Request with one inline pool for the
  inputs and one for the outputs (sized from the declared shapes, generous
  where they are unknown).
- ``mutate_model(d, model)``: *semantic* mutations of a valid model that
  keep its structure plausible (numberOfConsumers stay right unless a
  mutation is about them): operand types, dimensions (unknown, zero, huge,
  another rank), quantization parameters (NaN, negative, out of range),
  constant values (scalar parameters set to edge values: axes, activations,
  paddings...), operation codes, input lists, constants turned into
  NO_VALUE, subgraph references swapped, relaxed computation toggled.
  The nasty graphs of the in-process execution target are in
  ``nnhal.tools.fuzz.graphs``.
"""

from __future__ import annotations

import dataclasses
import math
import struct
from collections.abc import Sequence

import numpy as np
from nnhal.tools.fuzz.data import Draw

from nnhal.types import (
    OPERAND_TYPE_INFO,
    DataLocation,
    InlineMemory,
    Model,
    OperandLifeTime,
    OperandType,
    Request,
    RequestArgument,
    Subgraph,
)

_L = OperandLifeTime
_OUTPUT_BYTES_UNKNOWN = 1 << 16  # an output buffer whose shape is not known ahead
_FUNDAMENTAL_TYPES = [int(t) for t in OperandType]
_NASTY_FLOATS = [0.0, -0.0, 1.0, -1.0, 0.5, 1e-45, 3.4e38, -3.4e38, math.inf, -math.inf, math.nan]
_NASTY_DIMS = [0, 1, 2, 3, 7, 65535, 2**31 - 1, 2**32 - 1]


def _align(n: int) -> int:
    return (n + 7) // 8 * 8


def _storage(type_code: int, value: object) -> np.ndarray:
    info = OPERAND_TYPE_INFO.get(type_code)
    dtype = np.uint8 if info is None or info.dtype is None else info.dtype
    if type_code in (OperandType.BOOL, OperandType.TENSOR_BOOL8):
        dtype = np.uint8
    return np.ascontiguousarray(np.asarray(value).astype(dtype, copy=False))


def request_for(model: Model, inputs: Sequence[object | None]) -> Request:
    """Inputs packed into pool 0, one output buffer each in pool 1."""
    main = model.main
    data = bytearray()
    args: list[RequestArgument] = []
    for index, value in zip(main.inputIndexes, inputs):
        if value is None:
            args.append(RequestArgument(hasNoValue=True))
            continue
        operand = main.operands[index]
        array = _storage(operand.type, value)
        info = OPERAND_TYPE_INFO.get(operand.type)
        offset = _align(len(data))
        data.extend(bytes(offset - len(data)))
        data.extend(array.tobytes())
        dims = () if info is not None and info.is_scalar else tuple(array.shape)
        args.append(RequestArgument(False, DataLocation(0, offset, array.nbytes), dims))
    out_args: list[RequestArgument] = []
    out_size = 0
    for index in main.outputIndexes:
        operand = main.operands[index]
        info = OPERAND_TYPE_INFO.get(operand.type)
        dims = operand.dimensions
        if info is not None and (info.is_scalar or (dims and all(dims))):
            count = 1
            for d in dims:
                count *= d
            size = count * info.byte_size
        else:
            size = _OUTPUT_BYTES_UNKNOWN
        size = min(size, 1 << 24)
        offset = _align(out_size)
        out_args.append(RequestArgument(False, DataLocation(1, offset, size), ()))
        out_size = offset + size
    pools = (InlineMemory(bytes(data)), InlineMemory(bytes(out_size)))
    return Request(inputs=tuple(args), outputs=tuple(out_args), pools=pools)


# ---------------------------------------------------------------------------
# Semantic mutations
# ---------------------------------------------------------------------------


def _subgraphs(model: Model) -> list[Subgraph]:
    return [model.main, *model.referenced]


def _with_subgraph(model: Model, s: int, subgraph: Subgraph) -> Model:
    if s == 0:
        return dataclasses.replace(model, main=subgraph)
    referenced = list(model.referenced)
    referenced[s - 1] = subgraph
    return dataclasses.replace(model, referenced=tuple(referenced))


def _with_operand(model: Model, s: int, i: int, **changes: object) -> Model:
    subgraph = _subgraphs(model)[s]
    operands = list(subgraph.operands)
    operands[i] = dataclasses.replace(operands[i], **changes)
    return _with_subgraph(model, s, dataclasses.replace(subgraph, operands=tuple(operands)))


def _with_operation(model: Model, s: int, k: int, **changes: object) -> Model:
    subgraph = _subgraphs(model)[s]
    operations = list(subgraph.operations)
    operations[k] = dataclasses.replace(operations[k], **changes)
    return _with_subgraph(model, s, dataclasses.replace(subgraph, operations=tuple(operations)))


def _recount(subgraph: Subgraph) -> Subgraph:
    counts = [0] * len(subgraph.operands)
    for op in subgraph.operations:
        for i in op.inputs:
            if 0 <= i < len(counts):
                counts[i] += 1
    operands = tuple(
        o if o.numberOfConsumers == c else dataclasses.replace(o, numberOfConsumers=c)
        for o, c in zip(subgraph.operands, counts)
    )
    return dataclasses.replace(subgraph, operands=operands)


def _nasty_scalar_bytes(d: Draw, type_code: int) -> bytes:
    if type_code == OperandType.FLOAT32:
        return struct.pack("<f", d.choice(_NASTY_FLOATS))
    if type_code == OperandType.FLOAT16:
        return np.float16(d.choice(_NASTY_FLOATS)).tobytes()
    if type_code == OperandType.BOOL:
        return bytes([d.choice([0, 1, 2, 255])])
    if type_code == OperandType.UINT32:
        return struct.pack("<I", d.nasty_int(32) & 0xFFFFFFFF)
    return struct.pack("<i", max(-(2**31), min(2**31 - 1, d.nasty_int(32, signed=True))))


def _set_constant(d: Draw, model: Model, s: int, i: int) -> Model:
    """New bytes for a CONSTANT_COPY operand (scalars: edge values; tensors: random)."""
    operand = _subgraphs(model)[s].operands[i]
    loc = operand.location
    values = bytearray(model.operandValues)
    if loc.offset + loc.length > len(values):
        return model
    info = OPERAND_TYPE_INFO.get(operand.type)
    if info is not None and info.is_scalar:
        new = _nasty_scalar_bytes(d, operand.type)[: loc.length]
    elif d.bool(60) and info is not None and info.byte_size == 4:
        count = loc.length // 4
        pattern = d.choice(["small", "nasty", "same"])
        if pattern == "same":
            new = _nasty_scalar_bytes(d, int(OperandType.INT32)) * count
        else:
            new = b"".join(
                struct.pack("<i", d.int(-3, 4))
                if pattern == "small"
                else _nasty_scalar_bytes(d, int(OperandType.INT32))
                for _ in range(count)
            )
    else:
        new = d.bytes(loc.length)
    values[loc.offset : loc.offset + len(new)] = new
    return dataclasses.replace(model, operandValues=bytes(values))


def _mutate_once(d: Draw, model: Model) -> Model:
    subgraphs = _subgraphs(model)
    s = d.int(0, len(subgraphs) - 1)
    subgraph = subgraphs[s]
    n = len(subgraph.operands)
    kind = d.int(0, 13)
    if kind <= 3 and n:  # constant values: the most productive mutation
        constants = [i for i, o in enumerate(subgraph.operands) if o.lifetime == _L.CONSTANT_COPY]
        if constants:
            return _set_constant(d, model, s, d.choice(constants))
    i = d.int(0, max(0, n - 1))
    operand = subgraph.operands[i] if n else None
    if kind == 4 and operand is not None:  # a dimension
        dims = list(operand.dimensions)
        if dims and d.bool(70):
            dims[d.int(0, len(dims) - 1)] = d.choice(_NASTY_DIMS)
        elif d.bool(50) and dims:
            dims.pop(d.int(0, len(dims) - 1))
        else:
            dims.insert(d.int(0, len(dims)), d.choice(_NASTY_DIMS[:5]))
        return _with_operand(model, s, i, dimensions=tuple(dims))
    if kind == 5 and operand is not None:  # the operand type
        code = d.choice(_FUNDAMENTAL_TYPES) if d.bool(90) else d.nasty_int(32)
        return _with_operand(model, s, i, type=code)
    if kind == 6 and operand is not None:  # quantization parameters
        if d.bool(50):
            return _with_operand(model, s, i, scale=d.choice(_NASTY_FLOATS))
        return _with_operand(model, s, i, zeroPoint=d.nasty_int(32, signed=True))
    if (
        kind == 7
        and operand is not None
        and operand.lifetime in (_L.CONSTANT_COPY, _L.TEMPORARY_VARIABLE)
    ):
        # NO_VALUE: an omitted optional operand wherever a constant or temporary was
        writers = [op for op in subgraph.operations if i in op.outputs]
        if not writers:
            return _with_operand(model, s, i, lifetime=_L.NO_VALUE, location=DataLocation())
    if kind == 8 and subgraph.operations:  # the operation code
        k = d.int(0, len(subgraph.operations) - 1)
        code = d.int(0, 101) if d.bool(90) else d.choice([10000, 0x10000, -1, 102])
        return _with_operation(model, s, k, type=code)
    if kind == 9 and subgraph.operations and n:  # one input replaced by another operand
        k = d.int(0, len(subgraph.operations) - 1)
        op = subgraph.operations[k]
        if op.inputs:
            ins = list(op.inputs)
            ins[d.int(0, len(ins) - 1)] = d.int(0, n - 1)
            model = _with_operation(model, s, k, inputs=tuple(ins))
            return _with_subgraph(model, s, _recount(_subgraphs(model)[s]))
    if kind == 10 and subgraph.operations:  # an input dropped or repeated (arity)
        k = d.int(0, len(subgraph.operations) - 1)
        op = subgraph.operations[k]
        ins = list(op.inputs)
        if ins and d.bool(50):
            ins.pop(d.int(0, len(ins) - 1))
        elif ins:
            ins.append(d.choice(ins))
        model = _with_operation(model, s, k, inputs=tuple(ins))
        return _with_subgraph(model, s, _recount(_subgraphs(model)[s]))
    if kind == 11 and operand is not None and operand.lifetime == _L.SUBGRAPH:
        target = d.int(0, max(0, len(model.referenced) - 1))
        return _with_operand(model, s, i, location=DataLocation(0, target, 0))
    if kind == 12:
        return dataclasses.replace(
            model, relaxComputationFloat32toFloat16=not model.relaxComputationFloat32toFloat16
        )
    if kind == 13 and operand is not None:  # consumer counts (structural, rarely)
        return _with_operand(model, s, i, numberOfConsumers=d.int(0, 3))
    return model


def mutate_model(d: Draw, model: Model, max_mutations: int = 4) -> Model:
    for _ in range(d.int(1, max_mutations)):
        model = _mutate_once(d, model)
    return model


def adapt_inputs(d: Draw, model: Model, inputs: Sequence[np.ndarray]) -> list[np.ndarray | None]:
    """The seed's inputs where they still fit the (mutated) model, else small new data."""
    out: list[np.ndarray | None] = []
    for pos, index in enumerate(model.main.inputIndexes):
        operand = model.main.operands[index]
        info = OPERAND_TYPE_INFO.get(operand.type)
        given = inputs[pos] if pos < len(inputs) else None
        if d.bool(5):
            out.append(None)  # an omitted input (hasNoValue)
            continue
        if info is None or info.dtype is None:
            out.append(np.zeros(1, np.uint8))
            continue
        if info.is_scalar:
            shape: tuple[int, ...] = ()
        else:
            declared = operand.dimensions
            if (
                given is not None
                and len(np.shape(given)) == len(declared)
                and all(dd in (0, gg) for dd, gg in zip(declared, np.shape(given)))
            ):
                shape = tuple(np.shape(given))
            else:
                shape = tuple(dd if 0 < dd <= 8 else d.int(1, 3) for dd in declared) or (
                    d.int(1, 3),
                )
        if given is not None and np.shape(given) == shape:
            out.append(np.asarray(given).astype(info.dtype, copy=False))
        else:
            out.append(np.asarray(np.arange(int(np.prod(shape))) % 5, info.dtype).reshape(shape))
    return out
