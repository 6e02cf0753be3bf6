"""Memory domains: IDevice::allocate, IBuffer, and request pools that name driver buffers.

- ``allocate`` validates a BufferDesc and its roles as the HAL's
  ``validateMemoryDesc`` does (hal13.md §4.7: INVALID_ARGUMENT for an empty
  role set, bad indexes, frequencies outside (0, 1], a role given twice,
  operands that disagree on type/scale/zeroPoint/extraParams, dimensions
  that do not combine, a scalar with dimensions) and, like the sample
  driver, answers GENERAL_FAILURE for extension operand types and for a
  combined shape whose size is unknown (no dynamic-shape buffers).
- ``ManagedBuffer`` holds the bytes, the role set, the operand it describes,
  its initial (allocate-time) and current dimensions and whether it is
  initialized; ``copyTo`` / ``copyFrom`` follow §4.8.
- ``TokenPools`` maps the token pools of one request for one execution:
  every use is checked against the buffer's roles and state (§4.8; role or
  dimension misuse INVALID_ARGUMENT, an uninitialized input GENERAL_FAILURE,
  one buffer as an output and anything else in the same request
  INVALID_ARGUMENT); arguments on a token pool use the whole buffer, so the
  request handed to the prepared model is rewritten with the buffer's size and
  dimensions. After the execution, outputs written to buffers take the
  computed dimensions and become initialized; on failure they become
  uninitialized (the HAL's rule; the AOSP sample leaves them as they were).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Sequence
from typing import Any

from nnhal.driver.limits import too_big

from nnhal.errors import GeneralFailure, InvalidArgument, ResourceExhausted
from nnhal.types import (
    OPERAND_TYPE_INFO,
    BufferDesc,
    BufferRole,
    DataLocation,
    OutputShape,
    Request,
    SharedMemory,
    TokenMemory,
    combine_dimensions,
    element_count,
    is_extension_type,
    type_name,
)

_INPUT, _OUTPUT = "input", "output"


def _dims(d: Sequence[int]) -> str:
    return "[" + ", ".join(map(str, d)) + "]"


def _fully_specified(dims: Sequence[int]) -> bool:
    return bool(dims) and all(d > 0 for d in dims)


class ManagedBuffer:
    """A driver-managed buffer (the sample driver's ManagedBuffer)."""

    def __init__(
        self, operand: Any, dims: tuple[int, ...], roles: frozenset, models: tuple
    ) -> None:
        info = OPERAND_TYPE_INFO[operand.type]
        self.operand = operand
        self.is_scalar = info.is_scalar
        self.initial_dims = dims
        self.dims = dims
        self.roles = roles  # {(id(prepared model), "input"/"output", io index)}
        self.models = models  # keeps the role models alive while the buffer lives
        self.size = info.byte_size * (1 if info.is_scalar else element_count(dims))
        self.data = bytearray(self.size)
        self.initialized = False
        self.lock = threading.Lock()

    def describe(self) -> str:
        return f"{type_name(self.operand.type)} {_dims(self.dims)}, {self.size} bytes"

    # -- IBuffer ---------------------------------------------------------

    def copyTo(self, dst: memoryview) -> None:
        if dst.nbytes != self.size:
            raise InvalidArgument(
                f"IBuffer::copyTo: the destination has {dst.nbytes} bytes; the buffer "
                f"({self.describe()}) has {self.size}"
            )
        with self.lock:
            if not self.initialized:
                raise GeneralFailure(
                    "IBuffer::copyTo: the buffer is uninitialized (no copyFrom and no successful "
                    "execution has written it yet)"
                )
            dst[:] = self.data

    def copyFrom(self, src: memoryview, dimensions: Sequence[int]) -> None:
        dims = tuple(int(d) for d in dimensions)
        with self.lock:
            self.initialized = False  # any failure leaves the buffer uninitialized
            if src.nbytes != self.size:
                raise InvalidArgument(
                    f"IBuffer::copyFrom: the source has {src.nbytes} bytes; the buffer "
                    f"({self.describe()}) has {self.size}"
                )
            if self.is_scalar:
                if dims:
                    raise InvalidArgument(
                        f"IBuffer::copyFrom: dimensions {_dims(dims)} given for a scalar "
                        f"{type_name(self.operand.type)} buffer"
                    )
            else:
                if not dims:
                    dims = self.initial_dims
                    if not _fully_specified(dims):
                        raise InvalidArgument(
                            "IBuffer::copyFrom: no dimensions given and the buffer's "
                            f"{_dims(dims)} are not fully specified"
                        )
                elif not _fully_specified(dims):
                    raise InvalidArgument(
                        f"IBuffer::copyFrom: dimensions {_dims(dims)} are not fully specified"
                    )
                if combine_dimensions(self.initial_dims, dims) is None:
                    raise InvalidArgument(
                        f"IBuffer::copyFrom: dimensions {_dims(dims)} do not match the buffer's "
                        f"{_dims(self.initial_dims)}"
                    )
            self.data[:] = src
            self.dims = dims
            self.initialized = True


# ---------------------------------------------------------------------------
# allocate
# ---------------------------------------------------------------------------


def allocate(
    desc: BufferDesc,
    prepared_models: Sequence[Any],
    input_roles: Sequence[BufferRole],
    output_roles: Sequence[BufferRole],
    limits: Any = None,
) -> ManagedBuffer:
    """validateMemoryDesc, then a new uninitialized buffer (HalError on failure);
    ``limits`` (``nnhal.driver.limits.Limits``): a buffer above max_tensor_bytes is
    RESOURCE_EXHAUSTED_PERSISTENT."""
    if not prepared_models:
        raise InvalidArgument("allocate: no prepared models given")
    if not input_roles and not output_roles:
        raise InvalidArgument("allocate: no input or output roles given")
    seen: set[tuple[int, str, int]] = set()
    operands: list[tuple[str, Any]] = []
    for kind, roles in ((_INPUT, input_roles), (_OUTPUT, output_roles)):
        for k, role in enumerate(roles):
            where = f"allocate: {kind}Roles[{k}]"
            if not 0 <= role.modelIndex < len(prepared_models):
                raise InvalidArgument(
                    f"{where}: modelIndex {role.modelIndex} is out of range "
                    f"({len(prepared_models)} prepared models)"
                )
            prepared = prepared_models[role.modelIndex]
            main = prepared.model.main
            indexes = main.inputIndexes if kind == _INPUT else main.outputIndexes
            if not 0 <= role.ioIndex < len(indexes):
                raise InvalidArgument(
                    f"{where}: ioIndex {role.ioIndex} is out of range (the model has "
                    f"{len(indexes)} {kind}s)"
                )
            if not 0.0 < role.frequency <= 1.0:
                raise InvalidArgument(f"{where}: frequency {role.frequency} is not in (0, 1]")
            key = (id(prepared), kind, role.ioIndex)
            if key in seen:
                raise InvalidArgument(
                    f"{where}: the role ({kind} {role.ioIndex} of prepared model "
                    f"{role.modelIndex}) is given twice"
                )
            seen.add(key)
            operands.append((where, main.operands[indexes[role.ioIndex]]))

    first_where, first = operands[0]
    dims: tuple[int, ...] | None = tuple(desc.dimensions)
    for where, operand in operands:
        for field in ("type", "scale", "zeroPoint"):
            if getattr(operand, field) != getattr(first, field):
                raise InvalidArgument(
                    f"{where}: operand {field} {getattr(operand, field)!r} differs from "
                    f"{first_where}'s {getattr(first, field)!r}"
                )
        if not is_extension_type(operand.type) and operand.extraParams != first.extraParams:
            raise InvalidArgument(f"{where}: operand extraParams differ from {first_where}'s")
        combined = combine_dimensions(dims, tuple(operand.dimensions))
        if combined is None:
            raise InvalidArgument(
                f"{where}: operand dimensions {_dims(operand.dimensions)} are not compatible "
                f"with the desc's and other roles' {_dims(dims)}"
            )
        dims = combined
    info = OPERAND_TYPE_INFO.get(first.type)
    if is_extension_type(first.type) or info is None:
        raise GeneralFailure(
            f"allocate: operand type {type_name(first.type)}: this driver has no buffers of "
            "extension or OEM types"
        )
    if info.is_scalar and dims:
        raise InvalidArgument(
            f"allocate: dimensions {_dims(dims)} given for a scalar {type_name(first.type)}"
        )
    if not info.is_scalar and not _fully_specified(dims):
        raise GeneralFailure(
            f"allocate: the buffer's dimensions {_dims(dims)} are not fully specified; this "
            "driver does not allocate dynamically shaped buffers"
        )
    if limits is not None and not info.is_scalar:  # max_tensor_bytes
        why = too_big("allocate: the buffer", first.type, dims, limits)
        if why is not None:
            raise ResourceExhausted(why, transient=False)
    return ManagedBuffer(first, dims, frozenset(seen), tuple(prepared_models))


# ---------------------------------------------------------------------------
# Token pools in a request
# ---------------------------------------------------------------------------


class TokenPools:
    """The token pools of one request, checked and mapped for one execution."""

    def __init__(self, prepared: Any, request: Request, lookup: Callable[[int, str], Any]) -> None:
        self.buffers: dict[int, ManagedBuffer] = {}
        for p, pool in enumerate(request.pools):
            if isinstance(pool, TokenMemory):
                self.buffers[p] = lookup(pool.token, f"request pool {p}: memory token")
        self.outputs: list[tuple[int, ManagedBuffer]] = []  # (output index, buffer)
        self.request = self._check_and_rewrite(prepared, request) if self.buffers else request

    def _check_and_rewrite(self, prepared: Any, request: Request) -> Request:
        model_id = id(prepared)
        used_as_input: set[int] = set()
        inputs = list(request.inputs)
        for i, arg in enumerate(request.inputs):
            buffer = self.buffers.get(arg.location.poolIndex)
            if arg.hasNoValue or buffer is None:
                continue
            where = f"input {i} (request pool {arg.location.poolIndex}, a driver buffer)"
            if (model_id, _INPUT, i) not in buffer.roles:
                raise InvalidArgument(f"{where}: the buffer was not allocated with this input role")
            if not buffer.initialized:
                raise GeneralFailure(f"{where}: the buffer is uninitialized")
            dims = combine_dimensions(buffer.dims, tuple(arg.dimensions))
            if dims is None:
                raise InvalidArgument(
                    f"{where}: request dimensions {_dims(arg.dimensions)} do not match the "
                    f"buffer's {_dims(buffer.dims)}"
                )
            used_as_input.add(id(buffer))
            inputs[i] = self._whole(arg, buffer, () if buffer.is_scalar else buffer.dims)
        outputs = list(request.outputs)
        used_as_output: set[int] = set()
        for i, arg in enumerate(request.outputs):
            buffer = self.buffers.get(arg.location.poolIndex)
            if arg.hasNoValue or buffer is None:
                continue
            where = f"output {i} (request pool {arg.location.poolIndex}, a driver buffer)"
            if id(buffer) in used_as_input or id(buffer) in used_as_output:
                raise InvalidArgument(
                    f"{where}: the buffer is already used by another input or output of this request"
                )
            used_as_output.add(id(buffer))
            if (model_id, _OUTPUT, i) not in buffer.roles:
                raise InvalidArgument(
                    f"{where}: the buffer was not allocated with this output role"
                )
            dims = combine_dimensions(buffer.initial_dims, tuple(arg.dimensions))
            if dims is None:
                raise InvalidArgument(
                    f"{where}: request dimensions {_dims(arg.dimensions)} do not match the "
                    f"buffer's {_dims(buffer.initial_dims)}"
                )
            outputs[i] = self._whole(arg, buffer, () if buffer.is_scalar else dims)
            self.outputs.append((i, buffer))
        # the prepared model sees each token pool as a pool of the buffer's size
        pools = tuple(
            SharedMemory(name=f"nnhal-buffer-{p}", size=self.buffers[p].size)
            if p in self.buffers
            else pool
            for p, pool in enumerate(request.pools)
        )
        return dataclasses.replace(
            request, inputs=tuple(inputs), outputs=tuple(outputs), pools=pools
        )

    @staticmethod
    def _whole(arg: Any, buffer: ManagedBuffer, dims: tuple[int, ...]) -> Any:
        loc = DataLocation(poolIndex=arg.location.poolIndex, offset=0, length=buffer.size)
        return dataclasses.replace(arg, location=loc, dimensions=tuple(dims))

    def view(self, p: int) -> memoryview:
        return memoryview(self.buffers[p].data)

    def finish(self, shapes: Sequence[OutputShape] | None) -> None:
        """After the execution: outputs written take their dims and become initialized
        (``shapes`` None = the execution failed: they become uninitialized)."""
        for i, buffer in self.outputs:
            with buffer.lock:
                if shapes is None:
                    buffer.initialized = False
                else:
                    buffer.dims = tuple(shapes[i].dimensions) or buffer.dims
                    buffer.initialized = True
