"""Laying out numpy inputs and outputs in request memory, for nnhal.client.

``IoPlan`` turns one execution's numpy inputs into a ``Request`` (inline pools
or one POSIX shared-memory segment) and reads the outputs back from the reply
or the segment. ``unlink_segment`` releases a segment this process created.

Outputs of NNAPI operand types are read with the type's own numpy dtype. An
output of a vendor extension operand type has no layout the HAL defines: the
caller names its element dtype (``output_dtypes``), checked against the byte
size the device lists for that type in getSupportedExtensions when known
(``extension_types``, from ``extension_type_table``).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from multiprocessing import resource_tracker, shared_memory
from typing import Any

import numpy as np

from nnhal.types import (
    OPERAND_TYPE_INFO,
    DataLocation,
    Extension,
    ExtensionNameAndPrefix,
    InlineMemory,
    MemoryPool,
    Model,
    OutputShape,
    Request,
    RequestArgument,
    SharedMemory,
    element_count,
    is_extension_type,
    type_name,
)

_ALIGNMENT = 8  # byte alignment of every argument inside a pool


def _align(offset: int) -> int:
    return (offset + _ALIGNMENT - 1) // _ALIGNMENT * _ALIGNMENT


def unlink_segment(segment: shared_memory.SharedMemory) -> None:
    """Close and unlink a segment this process created.

    Before Python 3.13 a server in this same process unregistered the name from
    the shared resource tracker when it attached; registering again first keeps
    the tracker's bookkeeping balanced (it complains about unknown names).
    """
    segment.close()
    if sys.version_info < (3, 13):
        resource_tracker.register(segment._name, "shared_memory")
    segment.unlink()


#: full extension operand type code -> (isTensor, byteSize), as a device lists it
ExtensionTypes = dict[int, tuple[bool, int]]


def extension_type_table(
    extensions: Sequence[Extension], name_to_prefix: Sequence[ExtensionNameAndPrefix]
) -> ExtensionTypes:
    """The operand types of a device's extensions (getSupportedExtensions) under one model's
    prefixes (its extensionNameToPrefix): full type code -> (isTensor, byteSize)."""
    prefixes = {e.name: e.prefix for e in name_to_prefix}
    table: ExtensionTypes = {}
    for ext in extensions:
        if ext.name not in prefixes:
            continue
        for info in ext.operandTypes:
            table[(prefixes[ext.name] << 16) | info.type] = (bool(info.isTensor), info.byteSize)
    return table


def has_extension_outputs(model: Model) -> bool:
    main = model.main
    return any(is_extension_type(main.operands[i].type) for i in main.outputIndexes)


def extension_output_dtypes(
    model: Model, expected: Sequence[Any | None]
) -> list[np.dtype | None] | None:
    """``output_dtypes`` from expected output values: for each main output of a type with
    no numpy layout (a vendor extension operand type), its expected value's dtype; None
    elsewhere; None when no output needs one."""
    main = model.main
    dtypes: list[np.dtype | None] = []
    for k, index in enumerate(main.outputIndexes):
        info = OPERAND_TYPE_INFO.get(main.operands[index].type)
        value = expected[k] if k < len(expected) else None
        own_layout = info is not None and info.dtype is not None
        dtypes.append(None if own_layout or value is None else np.asarray(value).dtype)
    return dtypes if any(d is not None for d in dtypes) else None


_DTYPE_KINDS = "biuf"  # bool, signed and unsigned integers, floats: fixed-size numbers


def _output_dtype(
    j: int, index: int, type_code: int, requested: Any, extension_types: ExtensionTypes | None
) -> tuple[np.dtype, bool | None]:
    """The dtype output ``j`` is read as and, for an extension type the device lists,
    whether it is a tensor (None: not known). ValueError for a request that cannot hold."""
    info = OPERAND_TYPE_INFO.get(type_code)
    wanted: np.dtype | None = None
    if requested is not None:
        try:
            wanted = np.dtype(requested)
        except TypeError as exc:
            raise ValueError(
                f"output_dtypes[{j}]: {requested!r} is not a numpy dtype ({exc})"
            ) from None
        if wanted.kind not in _DTYPE_KINDS or wanted.itemsize == 0:
            raise ValueError(
                f"output_dtypes[{j}]: {wanted} is not a fixed-size number type (bool, int, "
                "uint or float): an output's elements are numbers"
            )
    if info is not None and info.dtype is not None:
        if wanted is not None and wanted != info.dtype:
            raise ValueError(
                f"output {j} (operand {index}) is {type_name(type_code)}, read as "
                f"{info.dtype}; output_dtypes[{j}] asks for {wanted} (give None, or use "
                "output_dtypes only for extension operand types)"
            )
        return info.dtype, None
    if wanted is None:
        raise ValueError(
            f"output {j} (operand {index}) has type {type_name(type_code)}, which has no "
            f"numpy layout: pass output_dtypes=[...] with its element dtype at index {j}, "
            "or use execute_request"
        )
    known = None if extension_types is None else extension_types.get(type_code)
    if known is None:
        return wanted, None
    is_tensor, byte_size = known
    if wanted.itemsize != byte_size:
        raise ValueError(
            f"output {j} (operand {index}) has {type_name(type_code)}, {byte_size} byte(s) "
            f"per element as the device lists it (getSupportedExtensions); output_dtypes[{j}] "
            f"{wanted} has {wanted.itemsize}"
        )
    return wanted, is_tensor


class IoPlan:
    """Where each input and output of one execution lives, and how to read them back.

    ``output_dtypes`` (one entry per output, None = the operand type's own dtype) names
    the element dtype of outputs of extension operand types; ``extension_types`` (see
    ``extension_type_table``) lets the plan check it against the device's byte size and
    know which extension types are scalars.
    """

    def __init__(
        self,
        model: Model,
        inputs: Sequence[np.ndarray | None],
        output_shapes: Sequence[Sequence[int] | None] | None,
        memory: str,
        output_dtypes: Sequence[Any] | None = None,
        extension_types: ExtensionTypes | None = None,
    ) -> None:
        if memory not in ("inline", "shared"):
            raise ValueError(f"memory must be 'inline' or 'shared', not {memory!r}")
        main = model.main
        if len(inputs) != len(main.inputIndexes):
            raise ValueError(f"the model has {len(main.inputIndexes)} inputs; got {len(inputs)}")
        if output_shapes is not None and len(output_shapes) != len(main.outputIndexes):
            raise ValueError(
                f"the model has {len(main.outputIndexes)} outputs; output_shapes has "
                f"{len(output_shapes)} entries"
            )
        if output_dtypes is not None and (
            isinstance(output_dtypes, (str, np.dtype, type))
            or len(output_dtypes) != len(main.outputIndexes)
        ):
            count = "is not a sequence" if isinstance(output_dtypes, (str, np.dtype, type)) else (
                f"has {len(output_dtypes)} entries"
            )
            raise ValueError(
                f"the model has {len(main.outputIndexes)} outputs; output_dtypes {count} "
                "(one entry per output, None for an NNAPI operand type)"
            )
        self.memory = memory
        self.shared = memory == "shared"
        in_pool, out_pool = (0, 0) if self.shared else (0, 1)

        chunks: list[tuple[int, bytes]] = []
        in_args: list[RequestArgument] = []
        offset = 0
        for i, (value, index) in enumerate(zip(inputs, main.inputIndexes)):
            if value is None:
                in_args.append(RequestArgument(hasNoValue=True))
                continue
            data, dims = _encode_input(main.operands[index], value, i, index)
            offset = _align(offset)
            in_args.append(
                RequestArgument(
                    location=DataLocation(poolIndex=in_pool, offset=offset, length=len(data)),
                    dimensions=dims,
                )
            )
            chunks.append((offset, data))
            offset += len(data)
        input_bytes = offset

        # Outputs follow the inputs in a shared segment, or start a pool of their own.
        offset = _align(offset) if self.shared else 0
        out_args: list[RequestArgument] = []
        self.outputs: list[tuple[int, tuple[int, ...], np.dtype, int, bool]] = []
        for j, index in enumerate(main.outputIndexes):
            operand = main.operands[index]
            requested = None if output_dtypes is None else output_dtypes[j]
            dtype, ext_tensor = _output_dtype(j, index, operand.type, requested, extension_types)
            info = OPERAND_TYPE_INFO.get(operand.type)
            scalar = info.is_scalar if info is not None else ext_tensor is False
            given = None if output_shapes is None else output_shapes[j]
            if scalar:
                dims: tuple[int, ...] = ()
                request_dims: tuple[int, ...] = ()
            elif given is not None:
                dims = request_dims = tuple(int(d) for d in given)
            else:
                dims, request_dims = tuple(operand.dimensions), ()
                if not dims or not all(dims):
                    raise ValueError(
                        f"output {j} (operand {index}) has unknown dimensions {list(dims)} in the "
                        "model: pass output_shapes=[...] to size its buffer"
                    )
            size = dtype.itemsize * element_count(dims)
            offset = _align(offset)
            out_args.append(
                RequestArgument(
                    location=DataLocation(poolIndex=out_pool, offset=offset, length=size),
                    dimensions=request_dims,
                )
            )
            self.outputs.append((offset, dims, dtype, size, dtype == np.bool_))
            offset += size
        output_bytes = offset if not self.shared else offset - input_bytes

        self.segment: shared_memory.SharedMemory | None = None
        pools: list[MemoryPool]
        if self.shared:
            total = max(offset, 1)  # a segment cannot be empty
            self.segment = shared_memory.SharedMemory(create=True, size=total)
            for at, data in chunks:
                self.segment.buf[at : at + len(data)] = data
            pools = [SharedMemory(name=self.segment.name, size=total)]
        else:
            buffer = bytearray(max(input_bytes, 1))
            for at, data in chunks:
                buffer[at : at + len(data)] = data
            pools = [InlineMemory(bytes(buffer)), InlineMemory(bytes(max(output_bytes, 1)))]
        self.request = Request(inputs=tuple(in_args), outputs=tuple(out_args), pools=tuple(pools))

    def read_outputs(
        self, shapes: Sequence[OutputShape], pools: dict[int, bytes]
    ) -> list[np.ndarray]:
        if self.segment is not None:
            region: bytes | memoryview = bytes(self.segment.buf)
        else:
            region = pools.get(1, b"")
        outputs = []
        for j, (offset, dims, dtype, size, is_bool) in enumerate(self.outputs):
            if j < len(shapes):
                dims = tuple(shapes[j].dimensions)
            count = element_count(dims)
            raw = np.frombuffer(
                region, dtype=np.uint8 if is_bool else dtype, count=count, offset=offset
            )
            array = (raw != 0) if is_bool else raw.copy()
            outputs.append(array.reshape(dims))
        return outputs

    def close(self) -> None:
        if self.segment is not None:
            unlink_segment(self.segment)
            self.segment = None


def _encode_input(operand: Any, value: Any, i: int, index: int) -> tuple[bytes, tuple[int, ...]]:
    info = OPERAND_TYPE_INFO.get(operand.type)
    if info is None or info.dtype is None:
        array = np.ascontiguousarray(value)
        return array.tobytes(), tuple(array.shape)  # opaque (extension / OEM) data
    try:
        array = np.ascontiguousarray(np.asarray(value).astype(info.dtype, casting="same_kind"))
    except TypeError as exc:
        raise ValueError(
            f"input {i} (operand {index}, {type_name(operand.type)}): cannot convert "
            f"{np.asarray(value).dtype} data to {info.dtype}: {exc}"
        ) from None
    if info.is_scalar:
        if array.size != 1:
            raise ValueError(
                f"input {i} (operand {index}) is a scalar {type_name(operand.type)}; "
                f"got shape {array.shape}"
            )
        return array.reshape(()).tobytes(), ()
    return array.tobytes(), tuple(int(d) for d in array.shape)
