"""NN HAL 1.3 types as Python values.

Enums carry the HAL's numeric values (android.hardware.neuralnetworks@1.3
types.hal). Structures are frozen dataclasses whose field names keep the HAL
spellings, so an Android engineer finds what they grep for. Sequences are
tuples so values are hashable and cannot be changed behind a validator's back;
use ``dataclasses.replace`` to derive a modified value.

``Operand.type`` and ``Operation.type`` are plain ints on purpose: vendor
extension types ``(prefix << 16) | code`` must pass through unchanged.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

# --------------------------------------------------------------------------
# Enums
# --------------------------------------------------------------------------


class OperandType(enum.IntEnum):
    FLOAT32 = 0
    INT32 = 1
    UINT32 = 2
    TENSOR_FLOAT32 = 3
    TENSOR_INT32 = 4
    TENSOR_QUANT8_ASYMM = 5
    BOOL = 6
    TENSOR_QUANT16_SYMM = 7
    TENSOR_FLOAT16 = 8
    TENSOR_BOOL8 = 9
    FLOAT16 = 10
    TENSOR_QUANT8_SYMM_PER_CHANNEL = 11
    TENSOR_QUANT16_ASYMM = 12
    TENSOR_QUANT8_SYMM = 13
    TENSOR_QUANT8_ASYMM_SIGNED = 14
    SUBGRAPH = 15
    OEM = 10000
    TENSOR_OEM_BYTE = 10001


class OperandTypeRange(enum.IntEnum):
    BASE_MIN = 0
    FUNDAMENTAL_MIN = 0
    FUNDAMENTAL_MAX = 15
    OEM_MIN = 10000
    OEM_MAX = 10001
    BASE_MAX = 0xFFFF


class OperationType(enum.IntEnum):
    ADD = 0
    AVERAGE_POOL_2D = 1
    CONCATENATION = 2
    CONV_2D = 3
    DEPTHWISE_CONV_2D = 4
    DEPTH_TO_SPACE = 5
    DEQUANTIZE = 6
    EMBEDDING_LOOKUP = 7
    FLOOR = 8
    FULLY_CONNECTED = 9
    HASHTABLE_LOOKUP = 10
    L2_NORMALIZATION = 11
    L2_POOL_2D = 12
    LOCAL_RESPONSE_NORMALIZATION = 13
    LOGISTIC = 14
    LSH_PROJECTION = 15
    LSTM = 16
    MAX_POOL_2D = 17
    MUL = 18
    RELU = 19
    RELU1 = 20
    RELU6 = 21
    RESHAPE = 22
    RESIZE_BILINEAR = 23
    RNN = 24
    SOFTMAX = 25
    SPACE_TO_DEPTH = 26
    SVDF = 27
    TANH = 28
    BATCH_TO_SPACE_ND = 29
    DIV = 30
    MEAN = 31
    PAD = 32
    SPACE_TO_BATCH_ND = 33
    SQUEEZE = 34
    STRIDED_SLICE = 35
    SUB = 36
    TRANSPOSE = 37
    ABS = 38
    ARGMAX = 39
    ARGMIN = 40
    AXIS_ALIGNED_BBOX_TRANSFORM = 41
    BIDIRECTIONAL_SEQUENCE_LSTM = 42
    BIDIRECTIONAL_SEQUENCE_RNN = 43
    BOX_WITH_NMS_LIMIT = 44
    CAST = 45
    CHANNEL_SHUFFLE = 46
    DETECTION_POSTPROCESSING = 47
    EQUAL = 48
    EXP = 49
    EXPAND_DIMS = 50
    GATHER = 51
    GENERATE_PROPOSALS = 52
    GREATER = 53
    GREATER_EQUAL = 54
    GROUPED_CONV_2D = 55
    HEATMAP_MAX_KEYPOINT = 56
    INSTANCE_NORMALIZATION = 57
    LESS = 58
    LESS_EQUAL = 59
    LOG = 60
    LOGICAL_AND = 61
    LOGICAL_NOT = 62
    LOGICAL_OR = 63
    LOG_SOFTMAX = 64
    MAXIMUM = 65
    MINIMUM = 66
    NEG = 67
    NOT_EQUAL = 68
    PAD_V2 = 69
    POW = 70
    PRELU = 71
    QUANTIZE = 72
    QUANTIZED_16BIT_LSTM = 73
    RANDOM_MULTINOMIAL = 74
    REDUCE_ALL = 75
    REDUCE_ANY = 76
    REDUCE_MAX = 77
    REDUCE_MIN = 78
    REDUCE_PROD = 79
    REDUCE_SUM = 80
    ROI_ALIGN = 81
    ROI_POOLING = 82
    RSQRT = 83
    SELECT = 84
    SIN = 85
    SLICE = 86
    SPLIT = 87
    SQRT = 88
    TILE = 89
    TOPK_V2 = 90
    TRANSPOSE_CONV_2D = 91
    UNIDIRECTIONAL_SEQUENCE_LSTM = 92
    UNIDIRECTIONAL_SEQUENCE_RNN = 93
    RESIZE_NEAREST_NEIGHBOR = 94
    QUANTIZED_LSTM = 95
    IF = 96
    WHILE = 97
    ELU = 98
    HARD_SWISH = 99
    FILL = 100
    RANK = 101
    OEM_OPERATION = 10000


class OperationTypeRange(enum.IntEnum):
    BASE_MIN = 0
    FUNDAMENTAL_MIN = 0
    FUNDAMENTAL_MAX = 101
    OEM_MIN = 10000
    OEM_MAX = 10000
    BASE_MAX = 0xFFFF


class ErrorStatus(enum.IntEnum):
    NONE = 0
    DEVICE_UNAVAILABLE = 1
    GENERAL_FAILURE = 2
    OUTPUT_INSUFFICIENT_SIZE = 3
    INVALID_ARGUMENT = 4
    MISSED_DEADLINE_TRANSIENT = 5
    MISSED_DEADLINE_PERSISTENT = 6
    RESOURCE_EXHAUSTED_TRANSIENT = 7
    RESOURCE_EXHAUSTED_PERSISTENT = 8


class OperandLifeTime(enum.IntEnum):
    TEMPORARY_VARIABLE = 0
    SUBGRAPH_INPUT = 1
    SUBGRAPH_OUTPUT = 2
    CONSTANT_COPY = 3
    CONSTANT_REFERENCE = 4
    NO_VALUE = 5
    SUBGRAPH = 6


class FusedActivationFunc(enum.IntEnum):
    NONE = 0
    RELU = 1
    RELU1 = 2
    RELU6 = 3


class DeviceStatus(enum.IntEnum):
    AVAILABLE = 0
    BUSY = 1
    OFFLINE = 2
    UNKNOWN = 3


class DeviceType(enum.IntEnum):
    OTHER = 1
    CPU = 2
    GPU = 3
    ACCELERATOR = 4


class ExecutionPreference(enum.IntEnum):
    LOW_POWER = 0
    FAST_SINGLE_ANSWER = 1
    SUSTAINED_SPEED = 2


class Priority(enum.IntEnum):
    LOW = 0
    MEDIUM = 1
    HIGH = 2


class MeasureTiming(enum.IntEnum):
    NO = 0
    YES = 1


class HalVersion(enum.IntEnum):
    """The HAL version an operation signature first appeared in."""

    V1_0 = 10
    V1_1 = 11
    V1_2 = 12
    V1_3 = 13

    def __str__(self) -> str:  # "1.2", as the HAL docs write it
        return f"{self.value // 10}.{self.value % 10}"


# Constants from the HAL (Constant, LoopTimeoutDurationNs, ExtensionTypeEncoding).
BYTE_SIZE_OF_CACHE_TOKEN = 32
MAX_NUMBER_OF_CACHE_FILES = 32
LOOP_TIMEOUT_DEFAULT_NS = 2_000_000_000
LOOP_TIMEOUT_MAXIMUM_NS = 15_000_000_000
EXTENSION_HIGH_BITS_PREFIX = 16
EXTENSION_LOW_BITS_TYPE = 16
UINT64_MAX = 2**64 - 1
#: steady-clock time points at or above this mean "no deadline" (VTS UNLIMITED).
TIME_POINT_MAX_NS = 2**63 - 1

# --------------------------------------------------------------------------
# Operand type facts (as data, not code)
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class OperandTypeInfo:
    """Static facts about one fundamental operand type."""

    byte_size: int  # element size in bytes (0 for SUBGRAPH and OEM)
    is_scalar: bool
    dtype: np.dtype | None  # numpy element type of the data
    version: HalVersion


_T = OperandType
_V = HalVersion
OPERAND_TYPE_INFO: dict[int, OperandTypeInfo] = {
    _T.FLOAT32: OperandTypeInfo(4, True, np.dtype(np.float32), _V.V1_0),
    _T.INT32: OperandTypeInfo(4, True, np.dtype(np.int32), _V.V1_0),
    _T.UINT32: OperandTypeInfo(4, True, np.dtype(np.uint32), _V.V1_0),
    _T.TENSOR_FLOAT32: OperandTypeInfo(4, False, np.dtype(np.float32), _V.V1_0),
    _T.TENSOR_INT32: OperandTypeInfo(4, False, np.dtype(np.int32), _V.V1_0),
    _T.TENSOR_QUANT8_ASYMM: OperandTypeInfo(1, False, np.dtype(np.uint8), _V.V1_0),
    _T.BOOL: OperandTypeInfo(1, True, np.dtype(np.bool_), _V.V1_2),
    _T.TENSOR_QUANT16_SYMM: OperandTypeInfo(2, False, np.dtype(np.int16), _V.V1_2),
    _T.TENSOR_FLOAT16: OperandTypeInfo(2, False, np.dtype(np.float16), _V.V1_2),
    _T.TENSOR_BOOL8: OperandTypeInfo(1, False, np.dtype(np.bool_), _V.V1_2),
    _T.FLOAT16: OperandTypeInfo(2, True, np.dtype(np.float16), _V.V1_2),
    _T.TENSOR_QUANT8_SYMM_PER_CHANNEL: OperandTypeInfo(1, False, np.dtype(np.int8), _V.V1_2),
    _T.TENSOR_QUANT16_ASYMM: OperandTypeInfo(2, False, np.dtype(np.uint16), _V.V1_2),
    _T.TENSOR_QUANT8_SYMM: OperandTypeInfo(1, False, np.dtype(np.int8), _V.V1_2),
    _T.TENSOR_QUANT8_ASYMM_SIGNED: OperandTypeInfo(1, False, np.dtype(np.int8), _V.V1_3),
    _T.SUBGRAPH: OperandTypeInfo(0, True, None, _V.V1_3),
    _T.OEM: OperandTypeInfo(0, True, None, _V.V1_0),
    _T.TENSOR_OEM_BYTE: OperandTypeInfo(1, False, np.dtype(np.uint8), _V.V1_0),
}
del _T, _V

FLOAT_TENSOR_TYPES = frozenset({OperandType.TENSOR_FLOAT32, OperandType.TENSOR_FLOAT16})
QUANT8_ASYMM_TYPES = frozenset(
    {OperandType.TENSOR_QUANT8_ASYMM, OperandType.TENSOR_QUANT8_ASYMM_SIGNED}
)


def is_extension_type(code: int) -> bool:
    """True for vendor extension operand/operation codes (prefix != 0)."""
    return code > 0xFFFF or code < 0


def extension_prefix(code: int) -> int:
    return (code & 0xFFFFFFFF) >> EXTENSION_LOW_BITS_TYPE


#: code -> name of every HAL operand type and operation: a dict lookup where the
#: enum's call costs a microsecond (names are asked for every operation prepared)
_TYPE_NAMES = {member.value: member.name for member in OperandType}
_OPERATION_NAMES = {member.value: member.name for member in OperationType}


def type_name(code: int) -> str:
    """HAL name of an operand type code, or a description of an unknown one."""
    if type(code) is int or type(code) is OperandType:
        name = _TYPE_NAMES.get(code)
        if name is not None:
            return name
    try:
        return OperandType(code).name
    except ValueError:
        if is_extension_type(code):
            return f"extension operand type 0x{code & 0xFFFFFFFF:08x}"
        return f"unknown operand type {code}"


def operation_name(code: int) -> str:
    """HAL name of an operation code, or a description of an unknown one."""
    if type(code) is int or type(code) is OperationType:
        name = _OPERATION_NAMES.get(code)
        if name is not None:
            return name
    try:
        return OperationType(code).name
    except ValueError:
        if is_extension_type(code):
            return f"extension operation 0x{code & 0xFFFFFFFF:08x}"
        return f"unknown operation {code}"


# --------------------------------------------------------------------------
# Structures
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class DataLocation:
    poolIndex: int = 0
    offset: int = 0
    length: int = 0


@dataclass(frozen=True)
class SymmPerChannelQuantParams:
    scales: tuple[float, ...]
    channelDim: int


#: Operand.extraParams: none | channelQuant | extension (opaque bytes).
ExtraParams = None | SymmPerChannelQuantParams | bytes


@dataclass(frozen=True)
class Operand:
    type: int
    dimensions: tuple[int, ...] = ()
    numberOfConsumers: int = 0
    scale: float = 0.0
    zeroPoint: int = 0
    lifetime: OperandLifeTime = OperandLifeTime.TEMPORARY_VARIABLE
    location: DataLocation = DataLocation()
    extraParams: ExtraParams = None


@dataclass(frozen=True)
class Operation:
    type: int
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]


@dataclass(frozen=True)
class Subgraph:
    operands: tuple[Operand, ...]
    operations: tuple[Operation, ...]
    inputIndexes: tuple[int, ...]
    outputIndexes: tuple[int, ...]


# ---- memory ---------------------------------------------------------------
# The HAL's hidl_memory / MemoryPool, as the three forms our wire carries.


@dataclass(frozen=True)
class InlineMemory:
    """Bytes carried in the message (small data, or a client on another host)."""

    data: bytes

    @property
    def size(self) -> int:
        return len(self.data)


@dataclass(frozen=True)
class SharedMemory:
    """A POSIX shared-memory segment named by the client (same host, zero copy).

    ``name`` is the name given to ``multiprocessing.shared_memory.SharedMemory``.
    """

    name: str
    size: int


@dataclass(frozen=True)
class TokenMemory:
    """A driver-managed buffer from IDevice::allocate (memory domains)."""

    token: int

    @property
    def size(self) -> int:  # the HAL counts a token pool as size 0
        return 0


MemoryPool = InlineMemory | SharedMemory | TokenMemory


@dataclass(frozen=True)
class ExtensionNameAndPrefix:
    name: str
    prefix: int


@dataclass(frozen=True)
class Model:
    main: Subgraph
    referenced: tuple[Subgraph, ...] = ()
    operandValues: bytes = b""
    pools: tuple[MemoryPool, ...] = ()
    relaxComputationFloat32toFloat16: bool = False
    extensionNameToPrefix: tuple[ExtensionNameAndPrefix, ...] = ()


@dataclass(frozen=True)
class RequestArgument:
    hasNoValue: bool = False
    location: DataLocation = DataLocation()
    dimensions: tuple[int, ...] = ()


@dataclass(frozen=True)
class Request:
    inputs: tuple[RequestArgument, ...]
    outputs: tuple[RequestArgument, ...]
    pools: tuple[MemoryPool, ...]


@dataclass(frozen=True)
class OutputShape:
    dimensions: tuple[int, ...]
    isSufficient: bool


@dataclass(frozen=True)
class Timing:
    """Microseconds; UINT64_MAX means "not available"."""

    timeOnDevice: int = UINT64_MAX
    timeInDriver: int = UINT64_MAX


NO_TIMING = Timing()


@dataclass(frozen=True)
class PerformanceInfo:
    execTime: float
    powerUsage: float


@dataclass(frozen=True)
class OperandPerformance:
    type: int
    info: PerformanceInfo


@dataclass(frozen=True)
class Capabilities:
    relaxedFloat32toFloat16PerformanceScalar: PerformanceInfo
    relaxedFloat32toFloat16PerformanceTensor: PerformanceInfo
    operandPerformance: tuple[OperandPerformance, ...]  # sorted by type, no SUBGRAPH
    ifPerformance: PerformanceInfo
    whilePerformance: PerformanceInfo


@dataclass(frozen=True)
class OperandTypeInformation:
    type: int
    isTensor: bool
    byteSize: int


@dataclass(frozen=True)
class Extension:
    name: str
    operandTypes: tuple[OperandTypeInformation, ...] = ()


@dataclass(frozen=True)
class BufferDesc:
    dimensions: tuple[int, ...] = ()


@dataclass(frozen=True)
class BufferRole:
    modelIndex: int
    ioIndex: int
    frequency: float


@dataclass(frozen=True)
class OptionalTimePoint:
    """A point on the steady (monotonic) clock, ns; None = no deadline."""

    nanosecondsSinceEpoch: int | None = None


@dataclass(frozen=True)
class OptionalTimeoutDuration:
    nanoseconds: int | None = None


# --------------------------------------------------------------------------
# Helpers shared by validation, the driver and the client
# --------------------------------------------------------------------------


def is_tensor_type(code: int) -> bool:
    info = OPERAND_TYPE_INFO.get(code)
    return info is not None and not info.is_scalar


def is_fully_specified(operand: Operand) -> bool:
    """Known rank and every axis known (scalars are always fully specified)."""
    info = OPERAND_TYPE_INFO.get(operand.type)
    if info is not None and info.is_scalar:
        return True
    return len(operand.dimensions) > 0 and all(d > 0 for d in operand.dimensions)


def element_count(dimensions: tuple[int, ...] | list[int]) -> int:
    n = 1
    for d in dimensions:
        n *= d
    return n


def operand_byte_size(type_code: int, dimensions: tuple[int, ...]) -> int:
    """Byte size of data of this type and shape; 0 when unknown (HAL rule)."""
    info = OPERAND_TYPE_INFO.get(type_code)
    if info is None:
        return 0
    if info.is_scalar:
        return info.byte_size
    if not dimensions:
        return 0
    return info.byte_size * element_count(dimensions)


def combine_dimensions(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """The HAL's combineDimensions: empty = unknown rank, 0 = unknown axis.

    Returns None when the two disagree (different ranks or a known axis differs).
    """
    if not a:
        return tuple(b)
    if not b:
        return tuple(a)
    if len(a) != len(b):
        return None
    out = []
    for x, y in zip(a, b):
        if x and y and x != y:
            return None
        out.append(x or y)
    return tuple(out)
