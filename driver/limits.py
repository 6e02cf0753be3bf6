"""Resource limits of a device: what it accepts, and the status it answers beyond that.

``Limits`` is read from a profile's ``[limits]`` table (``nnhal.driver.profile``)
and from ``nnhal serve --limit KEY=VALUE``; every key is optional and has the
default below. Which status a limit gives is a choice of nnhal (the HAL
leaves it to the driver), made so that a client can tell what to do next:

- **structural limits of a model** -- ``max_operands``, ``max_operations``,
  ``max_subgraphs`` (counted over main and every referenced subgraph) --
  INVALID_ARGUMENT from getSupportedOperations*, prepareModel* (and the
  nnhal explainSupportedOperations): this device does not take such a model
  at all. On the wire they are checked on the protobuf message, before it is
  decoded into Python objects.
- **nesting depth** (``max_nesting_depth``: IF/WHILE inside IF/WHILE ...):
  getSupportedOperations_* reports each main IF/WHILE nested deeper as
  unsupported, with the reason (the runtime then runs it elsewhere, as for
  any operation this device cannot run); prepareModel* is INVALID_ARGUMENT.
  The executor runs nested IF/WHILE as nested Python calls, one frame per
  level, so the limit can be at most ``EXECUTOR_MAX_NESTING``.
- **memory**: ``max_tensor_bytes`` (one tensor: declared in the model,
  given in a request, or computed at run time) and ``max_pool_bytes`` /
  ``max_request_bytes`` (one request pool; all pools of a request) --
  RESOURCE_EXHAUSTED_PERSISTENT: the same model or request will never fit.
  getSupportedOperations reports operations touching a declared tensor above
  the limit as unsupported (it has no RESOURCE_EXHAUSTED status). An
  allocation that fails anyway (``MemoryError``) is
  RESOURCE_EXHAUSTED_TRANSIENT.
- **occupancy**: ``max_prepared_models_per_client``,
  ``max_buffers_per_client`` (``nnhal.driver.sessions.client_key``: the session,
  else the connection) and ``max_concurrent_executions`` (per device: sync,
  burst and fenced executions; a fenced one counts from the call until it
  ends, including while it waits for its waitFor fences) --
  RESOURCE_EXHAUSTED_TRANSIENT: it works again once something is released
  or finishes.
- ``max_worker_memory_bytes``: the data memory (heap and anonymous
  mappings, ``RLIMIT_DATA``) of each op-package kernel worker process; a
  kernel allocating beyond it fails its execution with GENERAL_FAILURE naming
  the key (``nnhal.driver.op_packages.worker``); 0 lifts the limit.
- ``max_cache_file_bytes``: a compilation-cache file above it is not read
  (prepareModelFromCache* is GENERAL_FAILURE naming the key).
- ``max_message_bytes``: the gRPC server's receive and send limits (the
  largest of the served devices'); a message above it fails with the gRPC
  transport's RESOURCE_EXHAUSTED code, which ``nnhal.client`` turns into a
  ``ResourceExhausted`` HalError saying so.

Replies typed ``V1_0::ErrorStatus`` downgrade RESOURCE_EXHAUSTED_* to
GENERAL_FAILURE (``nnhal.driver._service_support``). Every message names the
limit key, so the fix is one profile line away.

The occupancy counters live in ``nnhal.driver.occupancy``; the run-time tensor
guard in ``nnhal.driver.executor.tensor_guard``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from nnhal.errors import InvalidArgument, ResourceExhausted
from nnhal.types import (
    OPERAND_TYPE_INFO,
    InlineMemory,
    Model,
    OperandLifeTime,
    OperationType,
    Request,
    SharedMemory,
    type_name,
)

#: deepest IF/WHILE nesting the executor runs (one Python frame per level, and a
#: gRPC worker thread starts some 50 frames deep under the recursion limit of 1000)
EXECUTOR_MAX_NESTING = 512
#: gRPC message sizes are C ints
GRPC_MAX_MESSAGE_BYTES = (1 << 31) - 1

_CONTROL_FLOW = (int(OperationType.IF), int(OperationType.WHILE))
_SUBGRAPH_LIFETIME = int(OperandLifeTime.SUBGRAPH)


@dataclass(frozen=True)
class Limits:
    """What one device accepts (the profile's ``[limits]`` table; all optional)."""

    #: operands of a model, counted over main and every referenced subgraph
    max_operands: int = 65536
    #: operations of a model, counted over main and every referenced subgraph
    max_operations: int = 65536
    #: subgraphs of a model (main + referenced)
    max_subgraphs: int = 16384
    #: IF/WHILE nested inside each other (a main IF over plain subgraphs is 1 deep)
    max_nesting_depth: int = 256
    #: bytes of one tensor: declared, in a request, or computed at run time
    max_tensor_bytes: int = 1 << 30
    #: bytes of one request pool (inline or shared memory)
    max_pool_bytes: int = 1 << 31
    #: bytes of all the pools of one request
    max_request_bytes: int = 1 << 32
    #: prepared models one client holds at once
    max_prepared_models_per_client: int = 1024
    #: driver buffers (IDevice::allocate) one client holds at once
    max_buffers_per_client: int = 1024
    #: executions running at once on the device (sync, burst, fenced incl. waiting)
    max_concurrent_executions: int = 64
    #: largest gRPC message received or sent
    max_message_bytes: int = 1 << 30
    #: largest compilation-cache file read (a bigger one is refused before it is read)
    max_cache_file_bytes: int = 1 << 30
    #: data memory of one op-package kernel worker process (RLIMIT_DATA; 0 = no limit)
    max_worker_memory_bytes: int = 4 << 30


LIMIT_KEYS: tuple[str, ...] = tuple(f.name for f in fields(Limits))
DEFAULT_LIMITS = Limits()

#: upper bounds a value may not exceed (beyond: the device could not honour it)
_CEILINGS = {
    "max_nesting_depth": (
        EXECUTOR_MAX_NESTING,
        "the executor runs nested IF/WHILE as nested calls",
    ),
    "max_message_bytes": (GRPC_MAX_MESSAGE_BYTES, "gRPC message sizes are 32-bit"),
}


def check_limit_value(key: str, value: Any) -> str | None:
    """Why ``value`` is not acceptable for limit ``key`` (None when it is)."""
    if key not in LIMIT_KEYS:
        return f"unknown limit; known limits: {', '.join(LIMIT_KEYS)}"
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return f"must be a positive integer, got {value!r}"
    ceiling = _CEILINGS.get(key)
    if ceiling is not None and value > ceiling[0]:
        return f"must be at most {ceiling[0]} ({ceiling[1]}), got {value}"
    return None


def parse_limits(
    table: Any, error: Callable[[str, str], Exception], base: Limits = DEFAULT_LIMITS
) -> Limits:
    """A profile's ``[limits]`` table; ``error(key, message)`` builds the exception."""
    if not isinstance(table, Mapping):
        raise error("limits", f"must be a table, got {type(table).__name__}")
    values: dict[str, int] = {}
    for key, value in table.items():
        why = check_limit_value(key, value)
        if why is not None:
            raise error(f"limits.{key}", why)
        values[key] = value
    return replace(base, **values)


def parse_limit_options(options: Iterable[str]) -> dict[str, int]:
    """``KEY=VALUE`` strings (``nnhal serve --limit``); ValueError names the bad one."""
    values: dict[str, int] = {}
    for option in options:
        key, sep, text = option.partition("=")
        key = key.strip()
        if not sep:
            raise ValueError(f"--limit {option!r}: expected KEY=VALUE, e.g. max_operands=1000")
        try:
            value: Any = int(text.strip(), 0)
        except ValueError:
            value = text.strip()
        why = check_limit_value(key, value)
        if why is not None:
            raise ValueError(f"--limit {key}: {why}")
        values[key] = value
    return values


def with_limits(profile: Any, overrides: Mapping[str, int]) -> Any:
    """A profile with ``overrides`` (``--limit``) over its [limits] table."""
    if not overrides:
        return profile
    return replace(profile, limits=replace(profile.limits, **overrides))


def limits_of(device: Any) -> Limits:
    """The limits of a driver device (its profile's), defaults for other objects."""
    limits = getattr(getattr(device, "profile", None), "limits", None)
    return limits if isinstance(limits, Limits) else DEFAULT_LIMITS


# ---------------------------------------------------------------------------
# Structural limits (INVALID_ARGUMENT)
# ---------------------------------------------------------------------------


def _over(what: str, count: int, limit: int, key: str) -> InvalidArgument:
    return InvalidArgument(
        f"model has {count} {what}; this device accepts at most {limit} (limit {key})"
    )


def check_model_size(limits: Limits, subgraphs: Sequence[Any]) -> None:
    """Counts of operands, operations and subgraphs; ``subgraphs`` may be protobuf
    messages (checked before decoding) or ``nnhal.types.Subgraph``."""
    if len(subgraphs) > limits.max_subgraphs:
        raise _over("subgraphs", len(subgraphs), limits.max_subgraphs, "max_subgraphs")
    operands = sum(len(s.operands) for s in subgraphs)
    if operands > limits.max_operands:
        raise _over("operands", operands, limits.max_operands, "max_operands")
    operations = sum(len(s.operations) for s in subgraphs)
    if operations > limits.max_operations:
        raise _over("operations", operations, limits.max_operations, "max_operations")


def message_subgraphs(message: Any) -> list[Any]:
    """The subgraphs of a Model message of any HAL version (1.0-1.2 models are one)."""
    if hasattr(message, "main"):
        return [message.main, *message.referenced]
    return [message]


def model_subgraphs(model: Model) -> list[Any]:
    return [model.main, *model.referenced]


def _references(model: Model, number: int) -> list[list[int]]:
    """For each operation of subgraph ``number``: the subgraphs an IF/WHILE names."""
    subgraph = model.main if number == 0 else model.referenced[number - 1]
    operands = subgraph.operands
    out: list[list[int]] = []
    for op in subgraph.operations:
        refs: list[int] = []
        if op.type in _CONTROL_FLOW:
            for i in op.inputs:
                if 0 <= i < len(operands):
                    operand = operands[i]
                    offset = operand.location.offset
                    if operand.lifetime == _SUBGRAPH_LIFETIME and 0 <= offset < len(
                        model.referenced
                    ):
                        refs.append(offset + 1)
        out.append(refs)
    return out


def nesting_depths(model: Model) -> list[int]:
    """How deep IF/WHILE nest under each main operation (0 for an ordinary one).

    Iterative post-order over the subgraph references (no recursion: nesting
    may be 10 000 deep); a reference cycle (validation rejects those) counts
    the cycle once instead of looping.
    """
    refs: dict[int, list[list[int]]] = {}
    height: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[int, bool]] = [(0, False)]
    while stack:
        number, expanded = stack.pop()
        if number in height:
            continue
        if number not in refs:
            refs[number] = _references(model, number)
        children = [c for op_refs in refs[number] for c in op_refs]
        if not expanded:
            on_path.add(number)
            stack.append((number, True))
            stack.extend((c, False) for c in children if c not in height and c not in on_path)
            continue
        on_path.discard(number)
        height[number] = max(_op_depths(refs[number], height), default=0)
    return _op_depths(refs[0], height)


def _op_depths(op_refs: list[list[int]], height: dict[int, int]) -> list[int]:
    """Depth under each operation: 0, or 1 + the deepest subgraph it names."""
    return [(1 + max(height.get(c, 0) for c in refs)) if refs else 0 for refs in op_refs]


def nesting_reason(depth: int, limits: Limits) -> str:
    return (
        f"IF/WHILE nested {depth} deep; this device runs at most {limits.max_nesting_depth} "
        "nested levels (limit max_nesting_depth)"
    )


def may_nest_deeper(model: Model, limit: int) -> bool:
    """Whether an operation of a validated ``model`` can nest IF/WHILE more than ``limit``
    deep: each level is another referenced subgraph (validation refuses reference
    cycles), so not with at most ``limit`` of them (no walk needed)."""
    return len(model.referenced) > limit


def check_nesting(model: Model, limits: Limits, depths: list[int] | None = None) -> None:
    """INVALID_ARGUMENT when a main operation nests IF/WHILE deeper than the limit
    (``depths``: ``nesting_depths(model)`` when the caller has them already)."""
    if depths is None:
        depths = nesting_depths(model)
    for index, depth in enumerate(depths):
        if depth > limits.max_nesting_depth:
            name = OperationType(model.main.operations[index].type).name
            raise InvalidArgument(
                f"{name} (subgraph 0, operation {index}): {nesting_reason(depth, limits)}"
            )


# ---------------------------------------------------------------------------
# Memory limits (RESOURCE_EXHAUSTED_PERSISTENT)
# ---------------------------------------------------------------------------


def tensor_bytes(type_code: int, dimensions: Sequence[int] | None) -> int:
    """Bytes of a tensor at least (unknown axes count as 1); 0 for non-tensors."""
    info = OPERAND_TYPE_INFO.get(type_code)
    if info is None or info.is_scalar or not dimensions:
        return 0
    if 0 in dimensions:
        return info.byte_size * math.prod(int(d) or 1 for d in dimensions)
    # Python ints (arbitrary precision: numpy dimensions could wrap in int64); map is
    # cheaper than the generator above, and every operand of a model comes through here
    return info.byte_size * math.prod(map(int, dimensions))


def tensor_reason(what: str, type_code: int, dims: Sequence[int], size: int, limit: int) -> str:
    shown = "[" + ", ".join(str(int(d)) for d in dims) + "]"
    return (
        f"{what} ({type_name(type_code)} {shown}) needs {size} bytes; this device's tensors "
        f"hold at most {limit} bytes (limit max_tensor_bytes)"
    )


def too_big(what: str, type_code: int, dims: Sequence[int], limits: Limits) -> str | None:
    """The reason a tensor exceeds ``max_tensor_bytes``, or None."""
    size = tensor_bytes(type_code, dims)
    if size > limits.max_tensor_bytes:
        return tensor_reason(what, type_code, dims, size, limits.max_tensor_bytes)
    return None


#: bytes per element of each tensor type (``tensor_bytes`` is 0 for the others)
_ELEMENT_BYTES = {
    code: info.byte_size for code, info in OPERAND_TYPE_INFO.items() if not info.is_scalar
}


def check_declared_tensors(model: Model, limits: Limits) -> None:
    """Every operand's declared size (a lower bound when axes are unknown)."""
    limit = limits.max_tensor_bytes
    empty_fits = limit >= 0  # no dimensions: 0 bytes (tensor_bytes)
    element_bytes = _ELEMENT_BYTES.get
    for number, subgraph in enumerate(model_subgraphs(model)):
        for index, operand in enumerate(subgraph.operands):
            dims = operand.dimensions
            if empty_fits and not dims:
                continue  # scalars and unknown ranks, a third of a model's operands
            # ``too_big``, with the operand named only when it is too big; the usual
            # operand (no unknown axis) without tensor_bytes' cases (as Python ints: numpy
            # dimensions could wrap in int64)
            count = math.prod(map(int, dims))
            size = (element_bytes(operand.type, 0) * count) if count else 0
            if size == 0 or size > limit:
                size = tensor_bytes(operand.type, dims)
            if size > limit:
                what = f"subgraph {number}, operand {index}"
                raise ResourceExhausted(
                    tensor_reason(what, operand.type, dims, size, limit), transient=False
                )


def check_request_pools(request: Request, limits: Limits) -> None:
    """Each request pool and their sum (token pools count as the HAL does: 0)."""
    total = 0
    for k, pool in enumerate(request.pools):
        if isinstance(pool, SharedMemory):
            size, kind = max(0, pool.size), f"shared memory {pool.name!r}"
        elif isinstance(pool, InlineMemory):
            size, kind = len(pool.data), "inline"
        else:
            continue
        if size > limits.max_pool_bytes:
            raise ResourceExhausted(
                f"request pool {k} ({kind}) is {size} bytes; this device maps at most "
                f"{limits.max_pool_bytes} bytes per pool (limit max_pool_bytes)",
                transient=False,
            )
        total += size
    if total > limits.max_request_bytes:
        raise ResourceExhausted(
            f"the request's {len(request.pools)} pools hold {total} bytes; this device takes "
            f"at most {limits.max_request_bytes} bytes per request (limit max_request_bytes)",
            transient=False,
        )


def out_of_memory(what: str, exc: BaseException | None = None) -> ResourceExhausted:
    """A MemoryError as RESOURCE_EXHAUSTED_TRANSIENT."""
    detail = f": {exc}" if exc is not None and str(exc) else ""
    return ResourceExhausted(f"{what}: out of memory{detail}", transient=True)


# ---------------------------------------------------------------------------
# gRPC
# ---------------------------------------------------------------------------


def grpc_options(devices: Iterable[Any]) -> list[tuple[str, int]]:
    """Server channel options: the largest ``max_message_bytes`` of the devices."""
    size = max((limits_of(d).max_message_bytes for d in devices), default=0)
    size = size or DEFAULT_LIMITS.max_message_bytes
    return [("grpc.max_receive_message_length", size), ("grpc.max_send_message_length", size)]


__all__ = [
    "DEFAULT_LIMITS",
    "EXECUTOR_MAX_NESTING",
    "LIMIT_KEYS",
    "Limits",
    "check_declared_tensors",
    "check_limit_value",
    "check_model_size",
    "check_nesting",
    "check_request_pools",
    "grpc_options",
    "limits_of",
    "message_subgraphs",
    "model_subgraphs",
    "nesting_depths",
    "out_of_memory",
    "parse_limit_options",
    "parse_limits",
    "too_big",
    "with_limits",
]
