"""A Pythonic, NNAPI-style builder for HAL 1.3 models.

``ModelBuilder`` owns the main ``SubgraphBuilder`` and any referenced ones
(IF branches, WHILE conditions and bodies). Each ``SubgraphBuilder`` hands out
operand indexes in call order and records operations; ``ModelBuilder.build()``
turns everything into a frozen :class:`nnhal.types.Model`:

- ``numberOfConsumers`` is computed (every occurrence in any operation's input
  list counts, as the HAL counts it);
- CONSTANT_COPY values are packed into ``operandValues`` with the alignment
  the Android runtime uses (values of 4 bytes or more aligned to 4, values of
  2-3 bytes aligned to 2, single bytes unaligned);
- CONSTANT_REFERENCE values go into one ``InlineMemory`` pool (pool 0),
  4-byte aligned, the way the VTS harness packs them;
- ``inputIndexes`` / ``outputIndexes`` follow the order of the ``input()`` /
  ``output()`` calls.

The builder rejects *misuse* with ``ValueError`` (a value that does not fit the
given dimensions, an operand index from another subgraph builder, ...). It
does not validate the model against the HAL rules: that is
``nnhal.validation``'s job, and tests rely on being able to build models the
driver must reject.

``ValuePacker`` is the packing logic on its own; the vector loader
(``nnhal.vectors``) uses it so both produce the same layout.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from nnhal.suggest import did_you_mean
from nnhal.types import (
    OPERAND_TYPE_INFO,
    DataLocation,
    ExtensionNameAndPrefix,
    ExtraParams,
    InlineMemory,
    Model,
    Operand,
    OperandLifeTime,
    OperandType,
    Operation,
    OperationType,
    Subgraph,
    SymmPerChannelQuantParams,
    element_count,
    type_name,
)

TypeLike = OperandType | int | str
OpLike = OperationType | int | str
ChannelQuant = SymmPerChannelQuantParams | tuple[Sequence[float], int] | None

__all__ = [
    "ModelBuilder",
    "OperandIndex",
    "SubgraphBuilder",
    "ValuePacker",
    "value_to_array",
]


# --------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------


def _operand_type(t: TypeLike) -> int:
    if isinstance(t, str):
        try:
            return int(OperandType[t])
        except KeyError:
            hint = did_you_mean(t, OperandType.__members__)
            raise ValueError(f"unknown operand type name {t!r}{hint}") from None
    return int(t)


def _operation_type(t: OpLike) -> int:
    if isinstance(t, str):
        try:
            return int(OperationType[t])
        except KeyError:
            hint = did_you_mean(t, OperationType.__members__)
            raise ValueError(f"unknown operation type name {t!r}{hint}") from None
    return int(t)


def _dims(dims: Iterable[int] | None) -> tuple[int, ...]:
    if dims is None:
        return ()
    out = tuple(int(d) for d in dims)
    if any(d < 0 or d > 0xFFFFFFFF for d in out):
        raise ValueError(f"dimensions must be uint32 values, got {list(out)}")
    return out


def value_to_array(type_code: int, value: Any) -> np.ndarray:
    """``value`` as an array of the operand type's numpy dtype (shape kept).

    Integer types reject values out of range or with a fractional part, so a
    typo does not silently wrap around.
    """
    info = OPERAND_TYPE_INFO.get(type_code)
    if info is None or info.dtype is None:
        raise ValueError(
            f"{type_name(type_code)} has no numpy element type; give the value as bytes"
        )
    dtype = info.dtype
    src = np.asarray(value)
    if src.dtype == object:
        raise ValueError(f"value for {type_name(type_code)} is not numeric: {value!r}")
    if dtype.kind == "b":
        if src.dtype.kind not in "biuf":
            raise ValueError(f"value for {type_name(type_code)} must be boolean or 0/1")
        if src.dtype.kind != "b" and not np.isin(src, (0, 1)).all():
            raise ValueError(f"value for {type_name(type_code)} must hold only 0/1")
        return src.astype(np.bool_)
    if dtype.kind in "iu":
        if src.dtype.kind == "f":
            if not np.isfinite(src).all() or (src != np.round(src)).any():
                raise ValueError(
                    f"value for {type_name(type_code)} must be integers, got {value!r}"
                )
        elif src.dtype.kind not in "biu":
            raise ValueError(f"value for {type_name(type_code)} must be integers")
        if src.size:
            lo, hi = np.iinfo(dtype).min, np.iinfo(dtype).max
            vmin, vmax = src.min(), src.max()
            if vmin < lo or vmax > hi:
                raise ValueError(
                    f"value for {type_name(type_code)} out of range [{lo}, {hi}]: "
                    f"found {vmin}..{vmax}"
                )
        return src.astype(dtype)
    if src.dtype.kind not in "biuf":
        raise ValueError(f"value for {type_name(type_code)} must be numeric")
    return src.astype(dtype)


def _value_bytes(
    type_code: int, value: Any, dims: tuple[int, ...] | None
) -> tuple[bytes, tuple[int, ...]]:
    """Raw bytes of a constant and the dimensions to record for it."""
    info = OPERAND_TYPE_INFO.get(type_code)
    given = _dims(dims) if dims is not None else None
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        if not raw:
            raise ValueError(f"{type_name(type_code)} constant value is empty")
        if info is not None and info.byte_size:
            expected = (
                info.byte_size
                if info.is_scalar
                else (info.byte_size * element_count(given) if given else None)
            )
            if expected is not None and expected != len(raw):
                raise ValueError(
                    f"{type_name(type_code)} value of {len(raw)} bytes does not match "
                    f"dimensions {list(given or ())} ({expected} bytes)"
                )
        return raw, given or ()
    arr = value_to_array(type_code, value)
    assert info is not None
    if arr.size == 0:
        # the HAL has no empty constants (a zero-length value means NO_VALUE)
        raise ValueError(f"{type_name(type_code)} constant value is empty")
    if info.is_scalar:
        if arr.size != 1:
            raise ValueError(
                f"{type_name(type_code)} is a scalar type; got a value with {arr.size} elements"
            )
        return arr.reshape(()).tobytes(), given or ()
    if given is None:
        # a bare Python scalar for a tensor type means a one-element tensor [1]
        shape = tuple(arr.shape) if arr.ndim else (1,)
        return np.ascontiguousarray(arr).tobytes(), shape
    if not given or 0 in given:
        raise ValueError(
            f"{type_name(type_code)} constant needs fully specified dimensions, got {list(given)}"
        )
    if element_count(given) != arr.size:
        raise ValueError(
            f"{type_name(type_code)} value with {arr.size} elements (shape {list(arr.shape)}) "
            f"does not match dimensions {list(given)} ({element_count(given)} elements)"
        )
    return np.ascontiguousarray(arr).tobytes(), given


def _channel_quant(type_code: int, cq: ChannelQuant) -> SymmPerChannelQuantParams | None:
    if cq is None:
        return None
    if type_code != OperandType.TENSOR_QUANT8_SYMM_PER_CHANNEL:
        raise ValueError(
            f"channel_quant is only for TENSOR_QUANT8_SYMM_PER_CHANNEL, not {type_name(type_code)}"
        )
    if isinstance(cq, SymmPerChannelQuantParams):
        return cq
    try:
        scales, channel_dim = cq
    except (TypeError, ValueError):
        raise ValueError("channel_quant must be (scales, channelDim)") from None
    return SymmPerChannelQuantParams(tuple(float(s) for s in scales), int(channel_dim))


class ValuePacker:
    """Packs constant values the way the Android runtime and VTS do.

    ``add_copy`` appends to ``operandValues`` (alignment by value length:
    >= 4 bytes -> 4, 2-3 bytes -> 2, 1 byte -> none); ``add_reference``
    appends to one inline pool with 4-byte alignment.
    """

    def __init__(self, pool_index: int = 0) -> None:
        self.operand_values = bytearray()
        self.pool = bytearray()
        self.pool_index = pool_index

    @staticmethod
    def _align(buf: bytearray, length: int, *, always4: bool = False) -> int:
        if always4 or length >= 4:
            align = 4
        elif length >= 2:
            align = 2
        else:
            align = 1
        pad = (-len(buf)) % align
        buf.extend(b"\0" * pad)
        return len(buf)

    def add_copy(self, data: bytes) -> DataLocation:
        offset = self._align(self.operand_values, len(data))
        self.operand_values.extend(data)
        return DataLocation(poolIndex=0, offset=offset, length=len(data))

    def add_reference(self, data: bytes) -> DataLocation:
        offset = self._align(self.pool, len(data), always4=True)
        self.pool.extend(data)
        return DataLocation(poolIndex=self.pool_index, offset=offset, length=len(data))


# --------------------------------------------------------------------------
# Builders
# --------------------------------------------------------------------------


class OperandIndex(int):
    """An operand index that remembers which subgraph builder made it."""

    builder: SubgraphBuilder

    def __new__(cls, value: int, builder: SubgraphBuilder) -> OperandIndex:
        obj = super().__new__(cls, value)
        obj.builder = builder
        return obj


@dataclass
class _OperandSpec:
    type: int
    dimensions: tuple[int, ...]
    scale: float
    zeroPoint: int
    lifetime: OperandLifeTime
    extraParams: ExtraParams = None
    value: bytes | None = None  # constants
    subgraph: SubgraphBuilder | None = None  # SUBGRAPH operands


class SubgraphBuilder:
    """Operands and operations of one subgraph (main or referenced)."""

    def __init__(self, model: ModelBuilder, index: int) -> None:
        self.model = model
        #: 0 = main, k = referenced[k-1] (the numbering used in HAL messages)
        self.index = index
        self._operands: list[_OperandSpec] = []
        self._operations: list[Operation] = []
        self._inputs: list[int] = []
        self._outputs: list[int] = []

    def __repr__(self) -> str:
        return (
            f"<SubgraphBuilder subgraph {self.index}: {len(self._operands)} operands, "
            f"{len(self._operations)} operations>"
        )

    # ---- operands ------------------------------------------------------

    def operand(
        self,
        type: TypeLike,
        dims: Iterable[int] | None = (),
        *,
        lifetime: OperandLifeTime = OperandLifeTime.TEMPORARY_VARIABLE,
        scale: float = 0.0,
        zero_point: int = 0,
        channel_quant: ChannelQuant = None,
        extra_params: bytes | None = None,
    ) -> OperandIndex:
        """Low-level: add an operand with any lifetime except constants and SUBGRAPH."""
        code = _operand_type(type)
        lifetime = OperandLifeTime(lifetime)
        if lifetime in (
            OperandLifeTime.CONSTANT_COPY,
            OperandLifeTime.CONSTANT_REFERENCE,
            OperandLifeTime.SUBGRAPH,
        ):
            raise ValueError(f"use constant() or subgraph_ref() for lifetime {lifetime.name}")
        return self._add(
            _OperandSpec(
                code,
                _dims(dims),
                float(scale),
                int(zero_point),
                lifetime,
                self._extra(code, channel_quant, extra_params),
            )
        )

    def input(
        self,
        type: TypeLike,
        dims: Iterable[int] | None = (),
        scale: float = 0.0,
        zero_point: int = 0,
        *,
        channel_quant: ChannelQuant = None,
        extra_params: bytes | None = None,
    ) -> OperandIndex:
        """A SUBGRAPH_INPUT operand, appended to inputIndexes."""
        idx = self.operand(
            type,
            dims,
            lifetime=OperandLifeTime.SUBGRAPH_INPUT,
            scale=scale,
            zero_point=zero_point,
            channel_quant=channel_quant,
            extra_params=extra_params,
        )
        self._inputs.append(int(idx))
        return idx

    def output(
        self,
        type: TypeLike,
        dims: Iterable[int] | None = (),
        scale: float = 0.0,
        zero_point: int = 0,
        *,
        channel_quant: ChannelQuant = None,
        extra_params: bytes | None = None,
    ) -> OperandIndex:
        """A SUBGRAPH_OUTPUT operand, appended to outputIndexes."""
        idx = self.operand(
            type,
            dims,
            lifetime=OperandLifeTime.SUBGRAPH_OUTPUT,
            scale=scale,
            zero_point=zero_point,
            channel_quant=channel_quant,
            extra_params=extra_params,
        )
        self._outputs.append(int(idx))
        return idx

    def temporary(
        self,
        type: TypeLike,
        dims: Iterable[int] | None = (),
        scale: float = 0.0,
        zero_point: int = 0,
        *,
        channel_quant: ChannelQuant = None,
        extra_params: bytes | None = None,
    ) -> OperandIndex:
        """A TEMPORARY_VARIABLE operand."""
        return self.operand(
            type,
            dims,
            lifetime=OperandLifeTime.TEMPORARY_VARIABLE,
            scale=scale,
            zero_point=zero_point,
            channel_quant=channel_quant,
            extra_params=extra_params,
        )

    def no_value(
        self,
        type: TypeLike,
        dims: Iterable[int] | None = (),
        scale: float = 0.0,
        zero_point: int = 0,
        *,
        channel_quant: ChannelQuant = None,
    ) -> OperandIndex:
        """A NO_VALUE operand (an omitted optional input)."""
        return self.operand(
            type,
            dims,
            lifetime=OperandLifeTime.NO_VALUE,
            scale=scale,
            zero_point=zero_point,
            channel_quant=channel_quant,
        )

    def constant(
        self,
        type: TypeLike,
        value: Any,
        dims: Iterable[int] | None = None,
        scale: float = 0.0,
        zero_point: int = 0,
        *,
        reference: bool = False,
        channel_quant: ChannelQuant = None,
        extra_params: bytes | None = None,
    ) -> OperandIndex:
        """A constant: CONSTANT_COPY, or CONSTANT_REFERENCE (model pool) if ``reference``.

        ``value`` is a Python scalar, an array-like (converted to the type's
        numpy dtype; quantized types take the raw integers) or raw ``bytes``.
        ``dims`` default to the array's shape; a bare scalar for a tensor type
        gives dims [1].
        """
        code = _operand_type(type)
        data, shape = _value_bytes(code, value, None if dims is None else tuple(dims))
        lifetime = (
            OperandLifeTime.CONSTANT_REFERENCE if reference else OperandLifeTime.CONSTANT_COPY
        )
        return self._add(
            _OperandSpec(
                code,
                shape,
                float(scale),
                int(zero_point),
                lifetime,
                self._extra(code, channel_quant, extra_params),
                value=data,
            )
        )

    def subgraph_ref(self, subgraph: SubgraphBuilder) -> OperandIndex:
        """A SUBGRAPH operand naming ``subgraph`` (made by this model's ``subgraph()``)."""
        if not isinstance(subgraph, SubgraphBuilder):
            raise ValueError(f"subgraph_ref needs a SubgraphBuilder, got {subgraph!r}")
        if subgraph.model is not self.model:
            raise ValueError("subgraph_ref: that subgraph belongs to another ModelBuilder")
        if subgraph.index == 0:
            raise ValueError("subgraph_ref: the main subgraph cannot be referenced")
        return self._add(
            _OperandSpec(
                int(OperandType.SUBGRAPH),
                (),
                0.0,
                0,
                OperandLifeTime.SUBGRAPH,
                subgraph=subgraph,
            )
        )

    # ---- operations ----------------------------------------------------

    def operation(self, type: OpLike, inputs: Sequence[int], outputs: Sequence[int]) -> int:
        """Append an operation; returns its index in this subgraph."""
        code = _operation_type(type)
        ins = tuple(self._check_index(i, "input") for i in inputs)
        outs = tuple(self._check_index(i, "output") for i in outputs)
        self._operations.append(Operation(code, ins, outs))
        return len(self._operations) - 1

    # ---- helpers -------------------------------------------------------

    @staticmethod
    def _extra(code: int, cq: ChannelQuant, extra: bytes | None) -> ExtraParams:
        if cq is not None and extra is not None:
            raise ValueError("give channel_quant or extra_params, not both")
        if extra is not None:
            return bytes(extra)
        return _channel_quant(code, cq)

    def _add(self, spec: _OperandSpec) -> OperandIndex:
        self._operands.append(spec)
        return OperandIndex(len(self._operands) - 1, self)

    def _check_index(self, i: int, what: str) -> int:
        owner = getattr(i, "builder", None)
        if owner is not None and owner is not self:
            raise ValueError(
                f"operation {what} operand {int(i)} belongs to subgraph {owner.index}, "
                f"not to subgraph {self.index}"
            )
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
            raise ValueError(f"operation {what} must be an operand index, got {i!r}")
        if not 0 <= int(i) < len(self._operands):
            raise ValueError(
                f"operation {what} operand {int(i)} does not exist in subgraph {self.index} "
                f"({len(self._operands)} operands)"
            )
        return int(i)

    def _build(self, packer: ValuePacker) -> Subgraph:
        consumers = [0] * len(self._operands)
        for op in self._operations:
            for i in op.inputs:
                consumers[i] += 1
        operands = []
        for n, spec in enumerate(self._operands):
            location = DataLocation()
            if spec.lifetime == OperandLifeTime.CONSTANT_COPY:
                assert spec.value is not None
                location = packer.add_copy(spec.value)
            elif spec.lifetime == OperandLifeTime.CONSTANT_REFERENCE:
                assert spec.value is not None
                location = packer.add_reference(spec.value)
            elif spec.lifetime == OperandLifeTime.SUBGRAPH:
                assert spec.subgraph is not None
                location = DataLocation(0, spec.subgraph.index - 1, 0)
            operands.append(
                Operand(
                    type=spec.type,
                    dimensions=spec.dimensions,
                    numberOfConsumers=consumers[n],
                    scale=spec.scale,
                    zeroPoint=spec.zeroPoint,
                    lifetime=spec.lifetime,
                    location=location,
                    extraParams=spec.extraParams,
                )
            )
        return Subgraph(
            operands=tuple(operands),
            operations=tuple(self._operations),
            inputIndexes=tuple(self._inputs),
            outputIndexes=tuple(self._outputs),
        )


class ModelBuilder:
    """Builds a :class:`nnhal.types.Model`; see the module docstring."""

    def __init__(self, relaxed: bool = False) -> None:
        self.relaxed = relaxed
        self.main = SubgraphBuilder(self, 0)
        self._referenced: list[SubgraphBuilder] = []
        self._extensions: list[ExtensionNameAndPrefix] = []

    def subgraph(self) -> SubgraphBuilder:
        """A new referenced subgraph (referenced[k-1] for the k-th call)."""
        sb = SubgraphBuilder(self, len(self._referenced) + 1)
        self._referenced.append(sb)
        return sb

    def extension(self, name: str, prefix: int) -> int:
        """Record an extensionNameToPrefix entry; returns ``prefix``."""
        if not 0 <= prefix <= 0xFFFF:
            raise ValueError(f"extension prefix must be a uint16, got {prefix}")
        self._extensions.append(ExtensionNameAndPrefix(name, prefix))
        return prefix

    def build(self) -> Model:
        packer = ValuePacker(pool_index=0)
        main = self.main._build(packer)
        referenced = tuple(sb._build(packer) for sb in self._referenced)
        pools = (InlineMemory(bytes(packer.pool)),) if packer.pool else ()
        return Model(
            main=main,
            referenced=referenced,
            operandValues=bytes(packer.operand_values),
            pools=pools,
            relaxComputationFloat32toFloat16=bool(self.relaxed),
            extensionNameToPrefix=tuple(self._extensions),
        )
