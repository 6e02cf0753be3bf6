"""Operand decoding for the executor: model pools, constant values, OperandInfo.

Three helpers shared by the compiler and by anything else that needs to look
at a model's operands with numpy eyes (support checks, the device):

- ``map_model_pools`` maps ``Model.pools`` (the CONSTANT_REFERENCE storage);
- ``decode_constant`` turns a CONSTANT_COPY / CONSTANT_REFERENCE operand into
  a numpy array of the operand type's dtype (scalars become 0-d arrays);
- ``operand_info`` builds the registry's ``OperandInfo`` for one operand (``describe``
  when its constant value is at hand).
"""

from __future__ import annotations

import numpy as np
from nnhal.driver.memory import map_pool
from nnhal.driver.ops.registry import OperandInfo

from nnhal.errors import InvalidArgument
from nnhal.types import (
    OPERAND_TYPE_INFO,
    Model,
    Operand,
    OperandLifeTime,
    OperandType,
    Subgraph,
    element_count,
    type_name,
)

_BOOL_TYPES = frozenset({OperandType.BOOL, OperandType.TENSOR_BOOL8})
_CONSTANT_LIFETIMES = frozenset({OperandLifeTime.CONSTANT_COPY, OperandLifeTime.CONSTANT_REFERENCE})


def map_model_pools(model: Model) -> list[memoryview]:
    """Writable views of ``model.pools`` (the data of CONSTANT_REFERENCE operands)."""
    return [map_pool(pool) for pool in model.pools]


def is_constant(operand: Operand) -> bool:
    return operand.lifetime in _CONSTANT_LIFETIMES


def decode_constant(model: Model, operand: Operand, pool_views: list[memoryview]) -> np.ndarray:
    """The value of a constant operand as a read-only numpy array.

    The data is copied out of the pools (so the array outlives them). Values in
    ``Model.operandValues`` given as ``bytes``, which nothing can change, are
    read in place when aligned for their dtype: the array keeps those bytes
    alive, as the prepared model holding the model does anyway, and copying
    the weights had been a tenth of preparing a 100-step LSTM again.
    Scalars give 0-d arrays; BOOL / TENSOR_BOOL8 give numpy bool (any non-zero
    byte is true); types without a numpy dtype (extensions, OEM) give raw uint8.
    """
    loc = operand.location
    if operand.lifetime == OperandLifeTime.CONSTANT_COPY:
        source = model.operandValues
        where = "operandValues"
    elif operand.lifetime == OperandLifeTime.CONSTANT_REFERENCE:
        if not 0 <= loc.poolIndex < len(pool_views):
            raise InvalidArgument(
                f"constant operand refers to pool {loc.poolIndex}; "
                f"the model has {len(pool_views)} pools"
            )
        source = pool_views[loc.poolIndex]
        where = f"pool {loc.poolIndex}"
    else:
        raise InvalidArgument(
            f"operand with lifetime {OperandLifeTime(operand.lifetime).name} is not a constant"
        )
    if loc.offset < 0 or loc.length < 0 or loc.offset + loc.length > len(source):
        raise InvalidArgument(
            f"constant at offset {loc.offset} length {loc.length} is outside {where} "
            f"({len(source)} bytes)"
        )
    info = OPERAND_TYPE_INFO.get(operand.type)
    if (
        type(source) is bytes
        and info is not None
        and info.dtype is not None
        and operand.type not in _BOOL_TYPES
    ):
        in_place = _read_in_place(source, operand, info, loc.offset, loc.length)
        if in_place is not None:
            return in_place
    raw = bytes(source[loc.offset : loc.offset + loc.length])

    if info is None or info.dtype is None:
        value = np.frombuffer(raw, dtype=np.uint8).copy()
    else:
        shape = () if info.is_scalar else tuple(operand.dimensions)
        count = element_count(shape)
        need = count * info.byte_size
        if len(raw) != need:
            raise InvalidArgument(
                f"constant of type {type_name(operand.type)} and dimensions "
                f"{list(operand.dimensions)} needs {need} bytes; location gives {len(raw)}"
            )
        if operand.type in _BOOL_TYPES:
            value = np.frombuffer(raw, dtype=np.uint8) != 0
        else:
            # ``raw`` is already the copy (immutable bytes): the array reads it in place
            value = np.frombuffer(raw, dtype=info.dtype)
        value = value.reshape(shape)
    # Constants are shared by every execution: nobody may write into them.
    value.flags.writeable = False
    return value


def _read_in_place(
    source: bytes, operand: Operand, info, offset: int, length: int
) -> np.ndarray | None:
    """A read-only view of immutable bytes, or None (wrong length: the caller's error;
    misaligned: the caller's copy)."""
    shape = () if info.is_scalar else tuple(operand.dimensions)
    count = element_count(shape)
    if count * info.byte_size != length:
        return None
    value = np.frombuffer(source, dtype=info.dtype, count=count, offset=offset)
    if not value.flags.aligned:
        return None
    return value.reshape(shape)  # read-only already: bytes cannot be written


def operand_info(
    model: Model,
    subgraph: Subgraph,
    index: int,
    pool_views: list[memoryview],
    *,
    value: np.ndarray | None = None,
) -> OperandInfo:
    """The registry's description of operand ``index`` of ``subgraph``.

    ``value`` skips decoding when the caller already holds the constant's
    value (the compiler decodes each constant once). Tensors with empty
    dimensions have an unknown rank: ``dimensions=None``.
    """
    operand = subgraph.operands[index]
    if value is None and is_constant(operand):
        value = decode_constant(model, operand, pool_views)
    return describe(operand, value)


def describe(operand: Operand, value: np.ndarray | None = None) -> OperandInfo:
    """``operand_info`` of an operand whose constant value (if any) is ``value``: the
    device's checks call it directly, having viewed the constant already."""
    info = OPERAND_TYPE_INFO.get(operand.type)
    scalar = info is not None and info.is_scalar
    dims = tuple(operand.dimensions)
    if not scalar and not dims:
        dimensions = None
    else:
        dimensions = () if scalar else dims
    # positional: the keywords had cost a third of the dataclass' construction (one per
    # operand of the model)
    return OperandInfo(
        operand.type,
        dimensions,
        operand.scale,
        operand.zeroPoint,
        operand.extraParams,
        value,
        operand.lifetime == OperandLifeTime.NO_VALUE,
    )
