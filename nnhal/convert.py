"""Protobuf messages (nnhal/_proto) <-> nnhal.types values, in both directions.

One pair of functions per HAL structure (``model_to_pb`` / ``model_from_pb``,
...). The legacy forms the older HAL methods carry (V1_0/V1_1/V1_2 flat
models and requests, down-converted capabilities) live in
``nnhal.convert_legacy``. ``to_pb`` / ``from_pb`` dispatch on the value's or
message's type, legacy messages included.

Enums arrive from the wire as plain ints. They become IntEnums where the
value is known; an unknown value stays an int so that validation (not the
decoder) reports it with the HAL's status. Operand and operation types stay
ints (extension types pass through); values >= 2**31 are sent as the int32
they are in the HAL (``enum : int32``) and come back negative.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any, TypeVar

from nnhal._proto.v1_3 import types_pb2 as pb
from nnhal.types import (
    BufferDesc,
    BufferRole,
    Capabilities,
    DataLocation,
    Extension,
    ExtensionNameAndPrefix,
    ExtraParams,
    InlineMemory,
    MemoryPool,
    Model,
    Operand,
    OperandLifeTime,
    OperandPerformance,
    OperandType,
    OperandTypeInformation,
    Operation,
    OptionalTimeoutDuration,
    OptionalTimePoint,
    OutputShape,
    PerformanceInfo,
    Request,
    RequestArgument,
    SharedMemory,
    Subgraph,
    SymmPerChannelQuantParams,
    Timing,
    TokenMemory,
)

E = TypeVar("E", bound=enum.IntEnum)

FLT_MAX = 3.4028234663852886e38
#: Missing operand performance entries are treated as {FLT_MAX, FLT_MAX} by the HAL.
NO_PERFORMANCE = PerformanceInfo(execTime=FLT_MAX, powerUsage=FLT_MAX)


def enum_or_int(cls: type[E], value: int) -> E | int:
    """``cls(value)`` when ``value`` is one of its members, else the plain int."""
    try:
        return cls(value)
    except ValueError:
        return int(value)


def int32(code: int) -> int:
    """An operand/operation type as the HAL's int32 (extension prefixes >= 0x8000 wrap)."""
    code = int(code)
    if code >= 2**31:
        code -= 2**32
    return code


# ---------------------------------------------------------------------------
# Small structures
# ---------------------------------------------------------------------------


def performance_info_to_pb(value: PerformanceInfo) -> pb.PerformanceInfo:
    return pb.PerformanceInfo(execTime=value.execTime, powerUsage=value.powerUsage)


def performance_info_from_pb(msg: pb.PerformanceInfo) -> PerformanceInfo:
    return PerformanceInfo(execTime=msg.execTime, powerUsage=msg.powerUsage)


def operand_performance_to_pb(value: OperandPerformance) -> pb.OperandPerformance:
    return pb.OperandPerformance(type=int32(value.type), info=performance_info_to_pb(value.info))


def operand_performance_from_pb(msg: pb.OperandPerformance) -> OperandPerformance:
    return OperandPerformance(
        type=enum_or_int(OperandType, msg.type), info=performance_info_from_pb(msg.info)
    )


def data_location_to_pb(value: DataLocation) -> pb.DataLocation:
    return pb.DataLocation(poolIndex=value.poolIndex, offset=value.offset, length=value.length)


def data_location_from_pb(msg: pb.DataLocation) -> DataLocation:
    return DataLocation(poolIndex=msg.poolIndex, offset=msg.offset, length=msg.length)


def channel_quant_to_pb(value: SymmPerChannelQuantParams) -> pb.SymmPerChannelQuantParams:
    return pb.SymmPerChannelQuantParams(scales=list(value.scales), channelDim=value.channelDim)


def channel_quant_from_pb(msg: pb.SymmPerChannelQuantParams) -> SymmPerChannelQuantParams:
    return SymmPerChannelQuantParams(scales=tuple(msg.scales), channelDim=msg.channelDim)


def output_shape_to_pb(value: OutputShape) -> pb.OutputShape:
    return pb.OutputShape(dimensions=list(value.dimensions), isSufficient=value.isSufficient)


def output_shape_from_pb(msg: pb.OutputShape) -> OutputShape:
    return OutputShape(dimensions=tuple(msg.dimensions), isSufficient=msg.isSufficient)


def timing_to_pb(value: Timing) -> pb.Timing:
    return pb.Timing(timeOnDevice=value.timeOnDevice, timeInDriver=value.timeInDriver)


def timing_from_pb(msg: pb.Timing | None) -> Timing:
    """An absent Timing message means "not measured" (both UINT64_MAX)."""
    if msg is None:
        return Timing()
    return Timing(timeOnDevice=msg.timeOnDevice, timeInDriver=msg.timeInDriver)


def optional_time_point_to_pb(value: OptionalTimePoint | int | None) -> pb.OptionalTimePoint:
    """A deadline: an absolute ``time.monotonic_ns()`` value, or None for none."""
    ns = value.nanosecondsSinceEpoch if isinstance(value, OptionalTimePoint) else value
    if ns is None:
        return pb.OptionalTimePoint()
    return pb.OptionalTimePoint(nanosecondsSinceEpoch=int(ns))


def optional_time_point_from_pb(msg: pb.OptionalTimePoint) -> OptionalTimePoint:
    if msg.WhichOneof("timePoint") is None:
        return OptionalTimePoint()
    return OptionalTimePoint(nanosecondsSinceEpoch=msg.nanosecondsSinceEpoch)


def deadline_ns_from_pb(msg: pb.OptionalTimePoint) -> int | None:
    """``optional_time_point_from_pb(msg).nanosecondsSinceEpoch`` (read on every execution)."""
    return None if msg.WhichOneof("timePoint") is None else msg.nanosecondsSinceEpoch


def optional_timeout_to_pb(
    value: OptionalTimeoutDuration | int | None,
) -> pb.OptionalTimeoutDuration:
    ns = value.nanoseconds if isinstance(value, OptionalTimeoutDuration) else value
    if ns is None:
        return pb.OptionalTimeoutDuration()
    return pb.OptionalTimeoutDuration(nanoseconds=int(ns))


def optional_timeout_from_pb(msg: pb.OptionalTimeoutDuration) -> OptionalTimeoutDuration:
    if msg.WhichOneof("timeoutDuration") is None:
        return OptionalTimeoutDuration()
    return OptionalTimeoutDuration(nanoseconds=msg.nanoseconds)


def timeout_ns_from_pb(msg: pb.OptionalTimeoutDuration) -> int | None:
    """``optional_timeout_from_pb(msg).nanoseconds`` (read on every execution)."""
    return None if msg.WhichOneof("timeoutDuration") is None else msg.nanoseconds


def extension_name_and_prefix_to_pb(value: ExtensionNameAndPrefix) -> pb.ExtensionNameAndPrefix:
    return pb.ExtensionNameAndPrefix(name=value.name, prefix=value.prefix)


def extension_name_and_prefix_from_pb(msg: pb.ExtensionNameAndPrefix) -> ExtensionNameAndPrefix:
    return ExtensionNameAndPrefix(name=msg.name, prefix=msg.prefix)


def operand_type_information_to_pb(value: OperandTypeInformation) -> pb.OperandTypeInformation:
    return pb.OperandTypeInformation(
        type=value.type, isTensor=value.isTensor, byteSize=value.byteSize
    )


def operand_type_information_from_pb(msg: pb.OperandTypeInformation) -> OperandTypeInformation:
    return OperandTypeInformation(type=msg.type, isTensor=msg.isTensor, byteSize=msg.byteSize)


def extension_to_pb(value: Extension) -> pb.Extension:
    return pb.Extension(
        name=value.name,
        operandTypes=[operand_type_information_to_pb(t) for t in value.operandTypes],
    )


def extension_from_pb(msg: pb.Extension) -> Extension:
    return Extension(
        name=msg.name,
        operandTypes=tuple(operand_type_information_from_pb(t) for t in msg.operandTypes),
    )


def buffer_desc_to_pb(value: BufferDesc) -> pb.BufferDesc:
    return pb.BufferDesc(dimensions=list(value.dimensions))


def buffer_desc_from_pb(msg: pb.BufferDesc) -> BufferDesc:
    return BufferDesc(dimensions=tuple(msg.dimensions))


def buffer_role_to_pb(value: BufferRole) -> pb.BufferRole:
    return pb.BufferRole(
        modelIndex=value.modelIndex, ioIndex=value.ioIndex, frequency=value.frequency
    )


def buffer_role_from_pb(msg: pb.BufferRole) -> BufferRole:
    return BufferRole(modelIndex=msg.modelIndex, ioIndex=msg.ioIndex, frequency=msg.frequency)


# ---------------------------------------------------------------------------
# Memory
# ---------------------------------------------------------------------------


def _fill_memory(msg: pb.Memory | pb.MemoryPool, value: MemoryPool) -> None:
    if isinstance(value, InlineMemory):
        msg.inlineData = bytes(value.data)
    elif isinstance(value, SharedMemory):
        msg.sharedMemory.name = value.name
        msg.sharedMemory.size = int(value.size)
    else:
        raise TypeError(f"not a memory pool: {value!r}")


def memory_to_pb(value: InlineMemory | SharedMemory) -> pb.Memory:
    """hidl_memory (Model.pools, V1_0 request pools, IBuffer copies): no tokens."""
    if isinstance(value, TokenMemory):
        raise TypeError(
            f"memory token {value.token}: a driver buffer token is only valid in a 1.3 Request"
        )
    msg = pb.Memory()
    _fill_memory(msg, value)
    return msg


def memory_from_pb(msg: pb.Memory) -> InlineMemory | SharedMemory:
    """An unset Memory decodes as an empty inline pool (it holds no bytes)."""
    if msg.WhichOneof("memory") == "sharedMemory":
        return SharedMemory(name=msg.sharedMemory.name, size=msg.sharedMemory.size)
    return InlineMemory(data=msg.inlineData)


def memory_pool_to_pb(value: MemoryPool) -> pb.MemoryPool:
    msg = pb.MemoryPool()
    if isinstance(value, TokenMemory):
        msg.token = value.token
    else:
        _fill_memory(msg, value)
    return msg


def memory_pool_from_pb(msg: pb.MemoryPool) -> MemoryPool:
    kind = msg.WhichOneof("memory")
    if kind == "token":
        return TokenMemory(token=msg.token)
    if kind == "sharedMemory":
        return SharedMemory(name=msg.sharedMemory.name, size=msg.sharedMemory.size)
    return InlineMemory(data=msg.inlineData)


# ---------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------


def _extra_params_from(msg: Any) -> ExtraParams:
    kind = msg.WhichOneof("extraParams")
    if kind == "channelQuant":
        return channel_quant_from_pb(msg.channelQuant)
    if kind == "extension":
        return bytes(msg.extension)
    return None


def fill_operand(msg: Any, value: Operand, *, extra_params: bool = True) -> None:
    msg.type = int32(value.type)
    msg.dimensions.extend(value.dimensions)
    msg.numberOfConsumers = value.numberOfConsumers
    msg.scale = value.scale
    msg.zeroPoint = value.zeroPoint
    msg.lifetime = int(value.lifetime)
    msg.location.CopyFrom(data_location_to_pb(value.location))
    extra = value.extraParams
    if extra is None:
        return
    if not extra_params:
        raise ValueError("a 1.0/1.1 operand has no extraParams")
    if isinstance(extra, SymmPerChannelQuantParams):
        msg.channelQuant.CopyFrom(channel_quant_to_pb(extra))
    else:
        msg.extension = bytes(extra)


def operand_from_message(msg: Any, *, extra_params: bool = True) -> Operand:
    return Operand(
        type=msg.type,
        dimensions=tuple(msg.dimensions),
        numberOfConsumers=msg.numberOfConsumers,
        scale=msg.scale,
        zeroPoint=msg.zeroPoint,
        lifetime=enum_or_int(OperandLifeTime, msg.lifetime),
        location=data_location_from_pb(msg.location),
        extraParams=_extra_params_from(msg) if extra_params else None,
    )


def operand_to_pb(value: Operand) -> pb.Operand:
    msg = pb.Operand()
    fill_operand(msg, value)
    return msg


def operand_from_pb(msg: pb.Operand) -> Operand:
    return operand_from_message(msg)


def operation_to_pb(value: Operation) -> pb.Operation:
    return pb.Operation(
        type=int32(value.type), inputs=list(value.inputs), outputs=list(value.outputs)
    )


def operation_from_pb(msg: Any) -> Operation:
    """From a 1.3 or a V1_0 Operation (same fields)."""
    return Operation(type=msg.type, inputs=tuple(msg.inputs), outputs=tuple(msg.outputs))


def subgraph_to_pb(value: Subgraph) -> pb.Subgraph:
    return pb.Subgraph(
        operands=[operand_to_pb(o) for o in value.operands],
        operations=[operation_to_pb(o) for o in value.operations],
        inputIndexes=list(value.inputIndexes),
        outputIndexes=list(value.outputIndexes),
    )


def subgraph_from_pb(msg: pb.Subgraph) -> Subgraph:
    return Subgraph(
        operands=tuple(operand_from_pb(o) for o in msg.operands),
        operations=tuple(operation_from_pb(o) for o in msg.operations),
        inputIndexes=tuple(msg.inputIndexes),
        outputIndexes=tuple(msg.outputIndexes),
    )


def model_to_pb(value: Model) -> pb.Model:
    return pb.Model(
        main=subgraph_to_pb(value.main),
        referenced=[subgraph_to_pb(s) for s in value.referenced],
        operandValues=bytes(value.operandValues),
        pools=[memory_to_pb(p) for p in value.pools],
        relaxComputationFloat32toFloat16=value.relaxComputationFloat32toFloat16,
        extensionNameToPrefix=[
            extension_name_and_prefix_to_pb(e) for e in value.extensionNameToPrefix
        ],
    )


def model_from_pb(msg: pb.Model) -> Model:
    return Model(
        main=subgraph_from_pb(msg.main),
        referenced=tuple(subgraph_from_pb(s) for s in msg.referenced),
        operandValues=bytes(msg.operandValues),
        pools=tuple(memory_from_pb(p) for p in msg.pools),
        relaxComputationFloat32toFloat16=msg.relaxComputationFloat32toFloat16,
        extensionNameToPrefix=tuple(
            extension_name_and_prefix_from_pb(e) for e in msg.extensionNameToPrefix
        ),
    )


# ---------------------------------------------------------------------------
# Requests
# ---------------------------------------------------------------------------


def request_argument_to_pb(value: RequestArgument) -> pb.RequestArgument:
    return pb.RequestArgument(
        hasNoValue=value.hasNoValue,
        location=data_location_to_pb(value.location),
        dimensions=list(value.dimensions),
    )


def request_argument_from_pb(msg: pb.RequestArgument) -> RequestArgument:
    return RequestArgument(
        hasNoValue=msg.hasNoValue,
        location=data_location_from_pb(msg.location),
        dimensions=tuple(msg.dimensions),
    )


def request_to_pb(value: Request) -> pb.Request:
    return pb.Request(
        inputs=[request_argument_to_pb(a) for a in value.inputs],
        outputs=[request_argument_to_pb(a) for a in value.outputs],
        pools=[memory_pool_to_pb(p) for p in value.pools],
    )


class RequestEncoder:
    """Fills empty request messages in place (what ``request_to_pb`` and, with ``v1_0``,
    ``convert_legacy.request_to_v1_0_pb`` build), for a client that sends one request
    after another.

    A sub-message handed to a constructor is copied, so the messages are filled where
    they are. Clients repeat their arguments (the same ``Request`` again, new bytes in
    its pools), so the encoding of the last arguments is kept and parsed back into the
    next message: it is found by identity, and the entry holds the argument tuples it
    was made from (immutable, and alive while the entry is), so it only ever serves
    those very arguments. Safe across threads (an entry is replaced in one assignment).
    ``fill_execution`` and ``fill_burst_execution`` do the same for a whole execution
    message, each with an entry of its own.
    """

    def __init__(self) -> None:
        self._last: tuple[Any, Any, type, bytes] | None = None
        # one entry per message type (unary execution, burst): a client may alternate them
        self._last_fixed: dict[type, tuple[Any, Any, tuple[Any, ...], bytes]] = {}

    def fill(self, msg: Any, value: Request, *, v1_0: bool = False) -> None:
        """``msg``: an empty ``Request`` message (``V1_0.Request`` with ``v1_0``)."""
        inputs, outputs = value.inputs, value.outputs
        last = self._last
        if last is not None and last[0] is inputs and last[1] is outputs and last[2] is type(msg):
            msg.MergeFromString(last[3])
        else:
            _fill_arguments(msg, inputs, outputs)
            self._last = (inputs, outputs, type(msg), msg.SerializeToString())
        _fill_pools(msg, value.pools, v1_0)

    def fill_execution(
        self,
        msg: Any,
        prepared_model: int,
        measure: int,
        value: Request,
        deadline: OptionalTimePoint | int | None = None,
        loop_timeout: OptionalTimeoutDuration | int | None = None,
    ) -> None:
        """An empty ``ExecuteRequest_1_3`` ``msg``, filled as the message built with
        ``preparedModel``, ``measure``, ``request=request_to_pb(value)``,
        ``deadline=optional_time_point_to_pb(deadline)`` and
        ``loopTimeoutDuration=optional_timeout_to_pb(loop_timeout)``. Without a deadline
        and a loop timeout (a deadline differs on every call), all but the pools is parsed
        back from the last such message of the same arguments, prepared model and measure."""
        if deadline is not None or loop_timeout is not None:
            msg.preparedModel, msg.measure = prepared_model, measure
            self.fill(msg.request, value)
            fill_time_point(msg.deadline, deadline)
            fill_timeout(msg.loopTimeoutDuration, loop_timeout)
            return
        self._fill_fixed(msg, prepared_model, measure, value, _mark_execution_fields)
        _fill_pools(msg.request, value.pools, False)

    def fill_burst_execution(
        self, msg: Any, prepared_model: int, measure: int, value: Request, pool_slots: Any = ()
    ) -> None:
        """An empty ``ExecuteRequest_1_2`` ``msg`` of a burst, filled as the message built
        with ``preparedModel``, ``measure``, ``request=request_to_v1_0_pb(value)`` and
        ``slots=BurstSlots(poolSlots=pool_slots)``. Without pool slots, all but the pools is
        parsed back from the last such message of the same arguments, prepared model and
        measure."""
        if pool_slots:
            msg.preparedModel, msg.measure = prepared_model, measure
            self.fill(msg.request, value, v1_0=True)
            msg.slots.poolSlots.extend(pool_slots)
            return
        self._fill_fixed(msg, prepared_model, measure, value, _mark_burst_fields)
        _fill_pools(msg.request, value.pools, True)

    def _fill_fixed(
        self, msg: Any, prepared_model: int, measure: int, value: Request, mark: Any
    ) -> None:
        """All of an execution message but its pools: parsed from the bytes of the last
        message of its kind when the arguments, prepared model and measure are the same,
        else filled (``mark`` sets the fields that are present and empty) and kept."""
        inputs, outputs = value.inputs, value.outputs
        kind = type(msg)
        fixed = (prepared_model, measure)
        last = self._last_fixed.get(kind)
        if last is not None and last[0] is inputs and last[1] is outputs and last[2] == fixed:
            msg.MergeFromString(last[3])
            return
        msg.preparedModel, msg.measure = prepared_model, measure
        _fill_arguments(msg.request, inputs, outputs)
        mark(msg)
        self._last_fixed[kind] = (inputs, outputs, fixed, msg.SerializeToString())


def _mark_execution_fields(msg: Any) -> None:
    msg.deadline.SetInParent()  # optional_time_point_to_pb(None): present, unset
    msg.loopTimeoutDuration.SetInParent()


def _mark_burst_fields(msg: Any) -> None:
    msg.slots.SetInParent()  # present and empty, as BurstSlots()


def _fill_arguments(msg: Any, inputs: Any, outputs: Any) -> None:
    """The inputs and outputs of an empty request message."""
    for arguments, field in ((inputs, msg.inputs), (outputs, msg.outputs)):
        add = field.add
        for arg in arguments:
            loc = arg.location
            add(
                hasNoValue=arg.hasNoValue,
                location={
                    "poolIndex": loc.poolIndex,
                    "offset": loc.offset,
                    "length": loc.length,
                },
                dimensions=list(arg.dimensions),
            )


def _fill_pools(msg: Any, pools: Any, v1_0: bool) -> None:
    """The pools of a request message (V1_0 Memory with ``v1_0``)."""
    add_pool, field = msg.pools.add, msg.pools
    for pool in pools:
        if type(pool) is InlineMemory:
            data = pool.data
            add_pool(inlineData=data if type(data) is bytes else bytes(data))
        elif v1_0:
            field.append(memory_to_pb(pool))
        else:
            field.append(memory_pool_to_pb(pool))


def fill_time_point(msg: pb.OptionalTimePoint, value: OptionalTimePoint | int | None) -> None:
    """``optional_time_point_to_pb(value)``, in the (empty) field ``msg``: set either way."""
    ns = value.nanosecondsSinceEpoch if isinstance(value, OptionalTimePoint) else value
    if ns is None:
        msg.SetInParent()
    else:
        msg.nanosecondsSinceEpoch = int(ns)


def fill_timeout(
    msg: pb.OptionalTimeoutDuration, value: OptionalTimeoutDuration | int | None
) -> None:
    """``optional_timeout_to_pb(value)``, in the (empty) field ``msg``: set either way."""
    ns = value.nanoseconds if isinstance(value, OptionalTimeoutDuration) else value
    if ns is None:
        msg.SetInParent()
    else:
        msg.nanoseconds = int(ns)


def request_from_pb(msg: pb.Request) -> Request:
    return Request(
        inputs=tuple(request_argument_from_pb(a) for a in msg.inputs),
        outputs=tuple(request_argument_from_pb(a) for a in msg.outputs),
        pools=tuple(memory_pool_from_pb(p) for p in msg.pools),
    )


# ---------------------------------------------------------------------------
# Capabilities
# ---------------------------------------------------------------------------


def capabilities_to_pb(value: Capabilities) -> pb.Capabilities:
    return pb.Capabilities(
        relaxedFloat32toFloat16PerformanceScalar=performance_info_to_pb(
            value.relaxedFloat32toFloat16PerformanceScalar
        ),
        relaxedFloat32toFloat16PerformanceTensor=performance_info_to_pb(
            value.relaxedFloat32toFloat16PerformanceTensor
        ),
        operandPerformance=[operand_performance_to_pb(p) for p in value.operandPerformance],
        ifPerformance=performance_info_to_pb(value.ifPerformance),
        whilePerformance=performance_info_to_pb(value.whilePerformance),
    )


def capabilities_from_pb(msg: pb.Capabilities) -> Capabilities:
    return Capabilities(
        relaxedFloat32toFloat16PerformanceScalar=performance_info_from_pb(
            msg.relaxedFloat32toFloat16PerformanceScalar
        ),
        relaxedFloat32toFloat16PerformanceTensor=performance_info_from_pb(
            msg.relaxedFloat32toFloat16PerformanceTensor
        ),
        operandPerformance=tuple(operand_performance_from_pb(p) for p in msg.operandPerformance),
        ifPerformance=performance_info_from_pb(msg.ifPerformance),
        whilePerformance=performance_info_from_pb(msg.whilePerformance),
    )


# ---------------------------------------------------------------------------
# Generic dispatch
# ---------------------------------------------------------------------------

_TO_PB: dict[type, Callable[[Any], Any]] = {
    PerformanceInfo: performance_info_to_pb,
    OperandPerformance: operand_performance_to_pb,
    Capabilities: capabilities_to_pb,
    DataLocation: data_location_to_pb,
    SymmPerChannelQuantParams: channel_quant_to_pb,
    Operand: operand_to_pb,
    Operation: operation_to_pb,
    Subgraph: subgraph_to_pb,
    ExtensionNameAndPrefix: extension_name_and_prefix_to_pb,
    Model: model_to_pb,
    RequestArgument: request_argument_to_pb,
    Request: request_to_pb,
    InlineMemory: memory_pool_to_pb,
    SharedMemory: memory_pool_to_pb,
    TokenMemory: memory_pool_to_pb,
    OutputShape: output_shape_to_pb,
    Timing: timing_to_pb,
    OptionalTimePoint: optional_time_point_to_pb,
    OptionalTimeoutDuration: optional_timeout_to_pb,
    OperandTypeInformation: operand_type_information_to_pb,
    Extension: extension_to_pb,
    BufferDesc: buffer_desc_to_pb,
    BufferRole: buffer_role_to_pb,
}

_FROM_PB: dict[str, Callable[[Any], Any]] = {
    "nnhal.v1_3.PerformanceInfo": performance_info_from_pb,
    "nnhal.v1_3.OperandPerformance": operand_performance_from_pb,
    "nnhal.v1_3.Capabilities": capabilities_from_pb,
    "nnhal.v1_3.DataLocation": data_location_from_pb,
    "nnhal.v1_3.SymmPerChannelQuantParams": channel_quant_from_pb,
    "nnhal.v1_3.Operand": operand_from_pb,
    "nnhal.v1_3.Operation": operation_from_pb,
    "nnhal.v1_3.Subgraph": subgraph_from_pb,
    "nnhal.v1_3.ExtensionNameAndPrefix": extension_name_and_prefix_from_pb,
    "nnhal.v1_3.Model": model_from_pb,
    "nnhal.v1_3.RequestArgument": request_argument_from_pb,
    "nnhal.v1_3.Request": request_from_pb,
    "nnhal.v1_3.Memory": memory_from_pb,
    "nnhal.v1_3.MemoryPool": memory_pool_from_pb,
    "nnhal.v1_3.OutputShape": output_shape_from_pb,
    "nnhal.v1_3.Timing": timing_from_pb,
    "nnhal.v1_3.OptionalTimePoint": optional_time_point_from_pb,
    "nnhal.v1_3.OptionalTimeoutDuration": optional_timeout_from_pb,
    "nnhal.v1_3.OperandTypeInformation": operand_type_information_from_pb,
    "nnhal.v1_3.Extension": extension_from_pb,
    "nnhal.v1_3.BufferDesc": buffer_desc_from_pb,
    "nnhal.v1_3.BufferRole": buffer_role_from_pb,
}
#: legacy messages, decoded by nnhal.convert_legacy (imported on first use: it imports us)
_FROM_PB_LEGACY = {
    "nnhal.v1_3.V1_0.Model": "model_from_v1_0_pb",
    "nnhal.v1_3.V1_1.Model": "model_from_v1_1_pb",
    "nnhal.v1_3.V1_2.Model": "model_from_v1_2_pb",
    "nnhal.v1_3.V1_0.Request": "request_from_v1_0_pb",
}


def to_pb(value: Any) -> Any:
    """The 1.3 message for any nnhal.types structure (memory pools become MemoryPool)."""
    try:
        fn = _TO_PB[type(value)]
    except KeyError:
        raise TypeError(f"no protobuf form for {type(value).__name__}") from None
    return fn(value)


def from_pb(msg: Any) -> Any:
    """The nnhal.types value of a message (legacy models/requests become 1.3 values)."""
    name = msg.DESCRIPTOR.full_name
    fn = _FROM_PB.get(name)
    if fn is None and name in _FROM_PB_LEGACY:
        from nnhal import convert_legacy

        fn = getattr(convert_legacy, _FROM_PB_LEGACY[name])
    if fn is None:
        raise TypeError(f"no nnhal.types value for message {name}")
    return fn(msg)
