"""HAL 1.3 structural validation of models and requests (hal13.md §3.2–§4.6).

``validate_model`` checks everything the AOSP ValidateHal/Utils validators
check without knowing any operation's signature: operand types, dimensions,
quantization parameters, lifetimes and data locations; operation operand
indexes, output lifetimes and known operation codes; subgraph inputs and
outputs; the graph walk (read before write, written once, consumer counts);
the IF/WHILE rules; reference cycles between subgraphs. The per-operation
signature check (arity, type per position, HAL version) is delegated to an
``operation_validator`` supplied by the caller -- the driver builds one on
``nnhal.driver.ops.registry`` -- so that nnhal never imports the driver.

``validate_request`` checks a Request against the model's main subgraph.
The IF/WHILE rules live in ``nnhal._validation_control_flow`` and the
request rules in ``nnhal._validation_request``; this module is the API.

Every violation raises ``InvalidArgument`` whose message names the subgraph
("subgraph 0" is main, "subgraph k" is ``referenced[k-1]``), the operation or
operand index, what was found and the rule that was broken.

Order of the checks (structural errors always win over signature errors, so
a model is rejected for the same reason with or without a validator):
extension prefixes and model pools -> every subgraph's operands and
input/output lists -> every subgraph's operations and graph walk -> reference
cycles -> ``operation_validator`` for each ordinary operation.
"""

from __future__ import annotations

from collections.abc import Callable

from nnhal._validation_control_flow import check_if, check_while
from nnhal._validation_control_flow import describe as _describe
from nnhal._validation_control_flow import dims_text as _dims
from nnhal._validation_control_flow import is_extension as _is_extension
from nnhal._validation_control_flow import lifetime_name as _lifetime_name
from nnhal._validation_control_flow import op_where as _op_where
from nnhal._validation_request import (
    validate_execution_preference,
    validate_priority,
    validate_request,
)
from nnhal.errors import InvalidArgument
from nnhal.types import (
    OPERAND_TYPE_INFO,
    InlineMemory,
    Model,
    Operand,
    OperandLifeTime,
    OperandType,
    OperationType,
    SharedMemory,
    Subgraph,
    SymmPerChannelQuantParams,
    TokenMemory,
    type_name,
)

OperationValidator = Callable[[Model, int, int], None]

__all__ = [
    "OperationValidator",
    "subgraph_of",
    "validate_execution_preference",
    "validate_model",
    "validate_priority",
    "validate_request",
]

# Plain ints: comparing ints (not IntEnum members) keeps the hot loops fast.
_TEMPORARY = int(OperandLifeTime.TEMPORARY_VARIABLE)
_INPUT = int(OperandLifeTime.SUBGRAPH_INPUT)
_OUTPUT = int(OperandLifeTime.SUBGRAPH_OUTPUT)
_COPY = int(OperandLifeTime.CONSTANT_COPY)
_REFERENCE = int(OperandLifeTime.CONSTANT_REFERENCE)
_NO_VALUE = int(OperandLifeTime.NO_VALUE)
_SUBGRAPH = int(OperandLifeTime.SUBGRAPH)
_ZERO_LOCATION_LIFETIMES = frozenset({_TEMPORARY, _INPUT, _OUTPUT, _NO_VALUE})
#: lifetimes whose value exists before any operation runs (§4.5).
_KNOWN_AT_START = frozenset({_INPUT, _COPY, _REFERENCE, _NO_VALUE, _SUBGRAPH})

_IF = int(OperationType.IF)
_WHILE = int(OperationType.WHILE)
_OEM_OPERATION = int(OperationType.OEM_OPERATION)
_FUNDAMENTAL_OPERATION_MAX = 101  # OperationTypeRange::FUNDAMENTAL_MAX (1.3)
_BOOL8 = int(OperandType.TENSOR_BOOL8)
_SUBGRAPH_TYPE = int(OperandType.SUBGRAPH)
_OEM_TYPES = frozenset({int(OperandType.OEM), int(OperandType.TENSOR_OEM_BYTE)})
_UINT32_MAX = 0xFFFFFFFF

# ---------------------------------------------------------------------------
# Per-type operand rules (§2.1, §4.2 items 2, 3, 5, 6, 7), kept as data.
# ---------------------------------------------------------------------------

_SCALE_ZERO, _SCALE_NONNEGATIVE, _SCALE_POSITIVE, _SCALE_UNCHECKED = range(4)
_EXTRA_NONE, _EXTRA_CHANNEL_QUANT, _EXTRA_UNCHECKED = range(3)
_SCALE_TEXT = {
    _SCALE_ZERO: "must be 0",
    _SCALE_NONNEGATIVE: "must be >= 0",
    _SCALE_POSITIVE: "must be > 0",
}

_T = OperandType
#: type -> (is_scalar, scale rule, zeroPoint range (lo, hi) or None, extraParams rule)
_TYPE_RULES: dict[int, tuple[bool, int, tuple[int, int] | None, int]] = {
    _T.FLOAT32: (True, _SCALE_ZERO, (0, 0), _EXTRA_NONE),
    _T.INT32: (True, _SCALE_ZERO, (0, 0), _EXTRA_NONE),
    _T.UINT32: (True, _SCALE_ZERO, (0, 0), _EXTRA_NONE),
    _T.BOOL: (True, _SCALE_ZERO, (0, 0), _EXTRA_NONE),
    _T.FLOAT16: (True, _SCALE_ZERO, (0, 0), _EXTRA_NONE),
    _T.SUBGRAPH: (True, _SCALE_ZERO, (0, 0), _EXTRA_NONE),
    _T.TENSOR_FLOAT32: (False, _SCALE_ZERO, (0, 0), _EXTRA_NONE),
    _T.TENSOR_FLOAT16: (False, _SCALE_ZERO, (0, 0), _EXTRA_NONE),
    _T.TENSOR_BOOL8: (False, _SCALE_ZERO, (0, 0), _EXTRA_NONE),
    # bias tensors carry input_scale * filter_scale, so TENSOR_INT32 allows a scale
    _T.TENSOR_INT32: (False, _SCALE_NONNEGATIVE, (0, 0), _EXTRA_NONE),
    _T.TENSOR_QUANT8_ASYMM: (False, _SCALE_POSITIVE, (0, 255), _EXTRA_NONE),
    _T.TENSOR_QUANT8_ASYMM_SIGNED: (False, _SCALE_POSITIVE, (-128, 127), _EXTRA_NONE),
    _T.TENSOR_QUANT8_SYMM: (False, _SCALE_POSITIVE, (0, 0), _EXTRA_NONE),
    _T.TENSOR_QUANT16_ASYMM: (False, _SCALE_POSITIVE, (0, 65535), _EXTRA_NONE),
    _T.TENSOR_QUANT16_SYMM: (False, _SCALE_POSITIVE, (0, 0), _EXTRA_NONE),
    # per-channel scales live in extraParams.channelQuant; Operand.scale stays 0
    _T.TENSOR_QUANT8_SYMM_PER_CHANNEL: (False, _SCALE_ZERO, (0, 0), _EXTRA_CHANNEL_QUANT),
    # deprecated OEM types: the HAL validator does not look at their parameters
    _T.OEM: (True, _SCALE_UNCHECKED, None, _EXTRA_UNCHECKED),
    _T.TENSOR_OEM_BYTE: (False, _SCALE_UNCHECKED, None, _EXTRA_UNCHECKED),
}
_TYPE_RULES = {int(k): v for k, v in _TYPE_RULES.items()}
#: types for which an operand with scale 0, zeroPoint 0 and no extraParams passes
#: _check_fundamental_operand (a scalar without dimensions, a tensor with some)
_PLAIN_SCALARS = frozenset(
    code for code, (scalar, scale, zp, extra) in _TYPE_RULES.items()
    if scalar and scale == _SCALE_ZERO and zp == (0, 0) and extra == _EXTRA_NONE
)  # fmt: skip
_PLAIN_TENSORS = frozenset(
    code for code, (scalar, scale, zp, extra) in _TYPE_RULES.items()
    if not scalar and scale in (_SCALE_ZERO, _SCALE_NONNEGATIVE) and zp == (0, 0)
    and extra == _EXTRA_NONE
)  # fmt: skip
del _T


# ---------------------------------------------------------------------------
# Small helpers
# ---------------------------------------------------------------------------


def subgraph_of(model: Model, index: int) -> Subgraph:
    """Subgraph ``index``: 0 is ``model.main``, k > 0 is ``model.referenced[k-1]``."""
    if index == 0:
        return model.main
    if 0 < index <= len(model.referenced):
        return model.referenced[index - 1]
    raise InvalidArgument(
        f"subgraph {index} does not exist: the model has {1 + len(model.referenced)} subgraphs"
        " (0 = main, k = referenced[k-1])"
    )


def _prefix(code: int) -> int:
    return (code & _UINT32_MAX) >> 16


def _in_int32_range(code: int) -> bool:
    # The wire carries int32; an extension code may arrive as a negative int32 or
    # as its uint32 spelling. Anything wider is not a HAL value at all.
    return -(2**31) <= code <= _UINT32_MAX


def _operand_where(s: int, index: int, operand: Operand) -> str:
    return f"subgraph {s}, operand {index} ({type_name(operand.type)})"


# ---------------------------------------------------------------------------
# Model-level: extension prefixes, pools
# ---------------------------------------------------------------------------


def _check_extension_prefixes(model: Model) -> frozenset[int]:
    # One-to-one mapping within a model (§6.1); the AOSP validator does not
    # enforce it, but an ambiguous prefix would make every extension type
    # meaningless to the driver.
    prefixes: set[int] = set()
    names: set[str] = set()
    for i, entry in enumerate(model.extensionNameToPrefix):
        if not isinstance(entry.prefix, int) or not 0 < entry.prefix <= 0xFFFF:
            raise InvalidArgument(
                f"extensionNameToPrefix[{i}] ({entry.name!r}) has prefix {entry.prefix!r};"
                " extension prefixes are 1..0xFFFF (0 means not an extension)"
            )
        if entry.prefix in prefixes:
            raise InvalidArgument(
                f"extensionNameToPrefix[{i}] ({entry.name!r}) reuses prefix 0x{entry.prefix:04x};"
                " each prefix may name only one extension"
            )
        if entry.name in names:
            raise InvalidArgument(
                f"extensionNameToPrefix[{i}] names extension {entry.name!r} twice;"
                " each extension gets exactly one prefix"
            )
        prefixes.add(entry.prefix)
        names.add(entry.name)
    return frozenset(prefixes)


def _model_pool_sizes(model: Model) -> list[int]:
    sizes = []
    for p, pool in enumerate(model.pools):
        if isinstance(pool, InlineMemory):
            sizes.append(len(pool.data))
        elif isinstance(pool, SharedMemory):
            if not pool.name or not isinstance(pool.size, int) or pool.size < 0:
                raise InvalidArgument(
                    f"Model.pools[{p}]: shared memory {pool.name!r} of size {pool.size!r} is not"
                    " valid memory (needs a name and a size >= 0)"
                )
            sizes.append(pool.size)
        elif isinstance(pool, TokenMemory):
            raise InvalidArgument(
                f"Model.pools[{p}] is a driver buffer token ({pool.token}); model pools must be"
                " memory (inline or shared), tokens are only valid in a Request"
            )
        else:
            raise InvalidArgument(f"Model.pools[{p}] is a {type(pool).__name__}, not a memory pool")
    return sizes


# ---------------------------------------------------------------------------
# Per-subgraph: operands (§4.2) and input/output lists (§4.4)
# ---------------------------------------------------------------------------


def _check_extension_operand(s: int, i: int, operand: Operand, prefixes: frozenset[int]) -> None:
    t = operand.type
    where = _operand_where(s, i, operand)
    if not _is_extension(t) or not _in_int32_range(t):
        raise InvalidArgument(
            f"{where}: type {t} is not an operand type; valid types are 0..15 (FLOAT32.."
            "SUBGRAPH), 10000 (OEM), 10001 (TENSOR_OEM_BYTE) and extension types > 0xFFFF"
        )
    if _prefix(t) not in prefixes:
        raise InvalidArgument(
            f"{where}: extension prefix 0x{_prefix(t):04x} is not declared in"
            " Model.extensionNameToPrefix"
        )
    if operand.scale != 0.0:
        raise InvalidArgument(f"{where}: scale is {operand.scale}; must be 0 for extension types")
    if operand.zeroPoint != 0:
        raise InvalidArgument(
            f"{where}: zeroPoint is {operand.zeroPoint}; must be 0 for extension types"
        )
    if operand.extraParams is not None and not isinstance(operand.extraParams, bytes):
        raise InvalidArgument(
            f"{where}: extraParams is {operand.extraParams!r}; extension types take none or"
            " an extension blob"
        )


def _check_fundamental_operand(
    s: int, i: int, operand: Operand, rule: tuple[bool, int, tuple[int, int] | None, int]
) -> None:
    scalar, scale_rule, zero_point_range, extra_rule = rule
    dims = operand.dimensions
    if scalar:
        if dims:
            raise InvalidArgument(
                f"{_operand_where(s, i, operand)}: has dimensions {_dims(dims)};"
                " scalar types must have no dimensions"
            )
    elif not dims and operand.lifetime in (_COPY, _REFERENCE):
        raise InvalidArgument(
            f"{_operand_where(s, i, operand)}: constant tensor has unknown rank (dimensions []);"
            " constant tensors must have rank >= 1"
        )
    scale = operand.scale
    if scale_rule == _SCALE_ZERO:
        bad = scale != 0.0
    elif scale_rule == _SCALE_POSITIVE:
        bad = not scale > 0.0  # written so that NaN is rejected too
    elif scale_rule == _SCALE_NONNEGATIVE:
        bad = not scale >= 0.0
    else:
        bad = False
    if bad:
        raise InvalidArgument(
            f"{_operand_where(s, i, operand)}: scale is {scale};"
            f" {_SCALE_TEXT[scale_rule]} for {type_name(operand.type)}"
        )
    if zero_point_range is not None:
        lo, hi = zero_point_range
        if not lo <= operand.zeroPoint <= hi:
            rule_text = "must be 0" if lo == hi == 0 else f"must be in [{lo}, {hi}]"
            raise InvalidArgument(
                f"{_operand_where(s, i, operand)}: zeroPoint is {operand.zeroPoint};"
                f" {rule_text} for {type_name(operand.type)}"
            )
    extra = operand.extraParams
    if extra_rule == _EXTRA_NONE:
        if extra is not None:
            raise InvalidArgument(
                f"{_operand_where(s, i, operand)}: extraParams is {extra!r}; must be none for"
                f" {type_name(operand.type)}"
            )
    elif extra_rule == _EXTRA_CHANNEL_QUANT:
        _check_channel_quant(s, i, operand)


def _check_channel_quant(s: int, i: int, operand: Operand) -> None:
    where = _operand_where(s, i, operand)
    params = operand.extraParams
    if not isinstance(params, SymmPerChannelQuantParams):
        raise InvalidArgument(
            f"{where}: extraParams is {params!r}; TENSOR_QUANT8_SYMM_PER_CHANNEL requires"
            " channelQuant (per-channel scales)"
        )
    dims = operand.dimensions
    dim = params.channelDim
    if not isinstance(dim, int) or not 0 <= dim < len(dims):
        raise InvalidArgument(
            f"{where}: channelQuant.channelDim is {dim} but the rank is {len(dims)};"
            " channelDim must be < rank"
        )
    if dims[dim] == 0:
        raise InvalidArgument(
            f"{where}: dimension {dim} (the channel dimension) is unknown (0);"
            " it must be known for per-channel quantization"
        )
    if len(params.scales) != dims[dim]:
        raise InvalidArgument(
            f"{where}: channelQuant has {len(params.scales)} scales but dimension {dim}"
            f" is {dims[dim]}; there must be one scale per channel"
        )
    for c, scale in enumerate(params.scales):
        if not scale > 0.0:
            raise InvalidArgument(
                f"{where}: channelQuant.scales[{c}] is {scale}; every scale must be > 0"
            )


def _check_operands(
    model: Model,
    s: int,
    subgraph: Subgraph,
    pool_sizes: list[int],
    prefixes: frozenset[int],
) -> list[int]:
    """Check every operand of subgraph ``s``; return the subgraphs it references."""
    values_size = len(model.operandValues)
    n_referenced = len(model.referenced)
    references: list[int] = []
    rules = _TYPE_RULES
    for i, operand in enumerate(subgraph.operands):
        t = operand.type
        rule = rules.get(t)
        if rule is None:
            _check_extension_operand(s, i, operand, prefixes)
        dims = operand.dimensions
        if dims and (min(dims) < 0 or max(dims) > _UINT32_MAX):
            raise InvalidArgument(
                f"{_operand_where(s, i, operand)}: dimensions {_dims(dims)} are not uint32 values"
            )
        if rule is not None and not (
            (t in _PLAIN_TENSORS if dims else t in _PLAIN_SCALARS)
            and operand.scale == 0.0
            and operand.zeroPoint == 0
            and operand.extraParams is None
        ):  # (the usual operand has nothing for the rules to find: a third of the walk)
            _check_fundamental_operand(s, i, operand, rule)

        lifetime = operand.lifetime
        loc = operand.location
        pool, offset, length = loc.poolIndex, loc.offset, loc.length
        if lifetime in _ZERO_LOCATION_LIFETIMES:
            if pool or offset or length:
                raise InvalidArgument(
                    f"{_operand_where(s, i, operand)}: lifetime {_lifetime_name(lifetime)} has"
                    f" location (poolIndex {pool}, offset {offset}, length {length});"
                    " it must be all zero"
                )
        elif lifetime == _COPY:
            if pool != 0 or offset < 0 or length < 0 or offset + length > values_size:
                raise InvalidArgument(
                    f"{_operand_where(s, i, operand)}: CONSTANT_COPY location (poolIndex {pool},"
                    f" offset {offset}, length {length}) is outside Model.operandValues"
                    f" ({values_size} bytes); poolIndex must be 0 and offset + length <= size"
                )
        elif lifetime == _REFERENCE:
            if not 0 <= pool < len(pool_sizes):
                raise InvalidArgument(
                    f"{_operand_where(s, i, operand)}: CONSTANT_REFERENCE poolIndex {pool}"
                    f" is out of range; the model has {len(pool_sizes)} pools"
                )
            if offset < 0 or length < 0 or offset + length > pool_sizes[pool]:
                raise InvalidArgument(
                    f"{_operand_where(s, i, operand)}: CONSTANT_REFERENCE location (offset"
                    f" {offset}, length {length}) is outside Model.pools[{pool}]"
                    f" ({pool_sizes[pool]} bytes)"
                )
        elif lifetime == _SUBGRAPH:
            if pool != 0 or length != 0 or not 0 <= offset < n_referenced:
                raise InvalidArgument(
                    f"{_operand_where(s, i, operand)}: SUBGRAPH location (poolIndex {pool},"
                    f" offset {offset}, length {length}) is invalid; poolIndex and length must"
                    f" be 0 and offset < {n_referenced} (the number of referenced subgraphs)"
                )
            references.append(offset + 1)
        else:
            raise InvalidArgument(
                f"{_operand_where(s, i, operand)}: {_lifetime_name(lifetime)} is not an operand"
                " lifetime"
            )
        if (t == _SUBGRAPH_TYPE) != (lifetime == _SUBGRAPH):
            raise InvalidArgument(
                f"{_operand_where(s, i, operand)}: lifetime {_lifetime_name(lifetime)};"
                " operands of type SUBGRAPH must have lifetime SUBGRAPH and vice versa"
            )
        if (
            (lifetime == _COPY or lifetime == _REFERENCE)
            and rule is not None
            and t not in _OEM_TYPES
        ):
            # An unknown axis makes the HAL's expected length 0; a constant's shape
            # must be known (§2.4), so say so instead of "length must be 0".
            if not rule[0] and 0 in dims:
                raise InvalidArgument(
                    f"{_operand_where(s, i, operand)}: constant has dimensions {_dims(dims)};"
                    " constants must be fully specified"
                )
            expected = OPERAND_TYPE_INFO[t].byte_size
            for d in dims:
                expected *= d
            if length != expected:
                raise InvalidArgument(
                    f"{_operand_where(s, i, operand)}: constant location.length is {length};"
                    f" {_describe(operand)} data is exactly {expected} bytes"
                )
    return references


def _check_io_lists(s: int, subgraph: Subgraph) -> None:
    operands = subgraph.operands
    n = len(operands)
    # how many operands have each lifetime, in one walk for both lists
    lifetimes = [o.lifetime for o in operands]
    listed = {_INPUT: lifetimes.count(_INPUT), _OUTPUT: lifetimes.count(_OUTPUT)}
    for field, wanted in (("inputIndexes", _INPUT), ("outputIndexes", _OUTPUT)):
        indexes = getattr(subgraph, field)
        seen: set[int] = set()
        for pos, idx in enumerate(indexes):
            if not isinstance(idx, int) or not 0 <= idx < n:
                raise InvalidArgument(
                    f"subgraph {s}: {field}[{pos}] is {idx}; the subgraph has {n} operands"
                )
            if lifetimes[idx] != wanted:
                raise InvalidArgument(
                    f"subgraph {s}: {field}[{pos}] is operand {idx} with lifetime"
                    f" {_lifetime_name(operands[idx].lifetime)}; it must be"
                    f" {_lifetime_name(wanted)}"
                )
            if idx in seen:
                raise InvalidArgument(f"subgraph {s}: operand {idx} appears twice in {field}")
            seen.add(idx)
        # every operand with that lifetime must be listed (len(seen) counts listed ones)
        if len(seen) != listed[wanted]:
            for i, o in enumerate(operands):
                if o.lifetime == wanted and i not in seen:
                    raise InvalidArgument(
                        f"subgraph {s}, operand {i} ({type_name(o.type)}): lifetime"
                        f" {_lifetime_name(wanted)} but it is not listed in {field}"
                    )


# ---------------------------------------------------------------------------
# Per-subgraph: operations (§4.3), IF/WHILE (§3.2, in _validation_control_flow), graph (§4.5)
# ---------------------------------------------------------------------------


def _check_operations(
    model: Model,
    s: int,
    subgraph: Subgraph,
    prefixes: frozenset[int],
    pending: list[tuple[int, int]],
) -> None:
    """Operation checks and the graph walk of subgraph ``s``.

    Appends (s, k) to ``pending`` for each operation the operation validator
    must see (everything but IF/WHILE).
    """
    operands = subgraph.operands
    n = len(operands)
    known = bytearray([operand.lifetime in _KNOWN_AT_START for operand in operands])
    consumers = [0] * n
    for k, operation in enumerate(subgraph.operations):
        ins, outs = operation.inputs, operation.outputs
        for pos, idx in enumerate(ins):
            if not isinstance(idx, int) or not 0 <= idx < n:
                raise InvalidArgument(
                    f"{_op_where(s, k, operation)}: input {pos} is operand {idx}; the subgraph"
                    f" has {n} operands"
                )
        for pos, idx in enumerate(outs):
            if not isinstance(idx, int) or not 0 <= idx < n:
                raise InvalidArgument(
                    f"{_op_where(s, k, operation)}: output {pos} is operand {idx}; the subgraph"
                    f" has {n} operands"
                )
            lifetime = operands[idx].lifetime
            if lifetime != _TEMPORARY and lifetime != _OUTPUT:
                raise InvalidArgument(
                    f"{_op_where(s, k, operation)}: output {pos} is operand {idx} with lifetime"
                    f" {_lifetime_name(lifetime)}; operation outputs must be TEMPORARY_VARIABLE"
                    " or SUBGRAPH_OUTPUT"
                )
        t = operation.type
        if t == _IF:
            check_if(model, s, k, operation, operands)
        elif t == _WHILE:
            check_while(model, s, k, operation, operands)
        elif (isinstance(t, int) and 0 <= t <= _FUNDAMENTAL_OPERATION_MAX) or t == _OEM_OPERATION:
            pending.append((s, k))
        elif isinstance(t, int) and _is_extension(t) and _in_int32_range(t):
            if _prefix(t) not in prefixes:
                raise InvalidArgument(
                    f"{_op_where(s, k, operation)}: extension prefix 0x{_prefix(t):04x} is not"
                    " declared in Model.extensionNameToPrefix"
                )
            pending.append((s, k))
        else:
            raise InvalidArgument(
                f"subgraph {s}, operation {k}: operation type {t} is not a HAL 1.3 operation;"
                " valid codes are 0..101, 10000 (OEM_OPERATION) and extension codes > 0xFFFF"
            )
        # graph walk: every input already has a value, every output gets one once
        for pos, idx in enumerate(ins):
            if not known[idx]:
                raise InvalidArgument(
                    f"{_op_where(s, k, operation)}: input {pos} reads operand {idx}"
                    f" ({_lifetime_name(operands[idx].lifetime)}) before any operation writes"
                    " it; operations must be in execution order (and without cycles)"
                )
            consumers[idx] += 1
        for pos, idx in enumerate(outs):
            if known[idx]:
                raise InvalidArgument(
                    f"{_op_where(s, k, operation)}: output {pos} writes operand {idx}, which"
                    " is already written; each operand has at most one writer"
                )
            known[idx] = 1
    if all(known) and [operand.numberOfConsumers for operand in operands] == consumers:
        return  # (the walk below only finds the first operand that fails, for its message)
    for i, operand in enumerate(operands):
        if operand.numberOfConsumers != consumers[i]:
            raise InvalidArgument(
                f"{_operand_where(s, i, operand)}: numberOfConsumers is"
                f" {operand.numberOfConsumers} but {consumers[i]} operation inputs read it"
            )
        if not known[i]:
            raise InvalidArgument(
                f"{_operand_where(s, i, operand)}: lifetime"
                f" {_lifetime_name(operand.lifetime)} but no operation writes it"
            )


def _check_reference_cycles(edges: list[list[int]]) -> None:
    """Iterative DFS over subgraph references (no recursion: chains may be deep).

    Starts from every subgraph, not only main, so that an unreachable cycle is
    rejected too (the AOSP check starts at main only).
    """
    state = bytearray(len(edges))  # 0 unvisited, 1 on the current path, 2 finished
    for root in range(len(edges)):
        if state[root]:
            continue
        state[root] = 1
        path = [root]
        stack = [iter(edges[root])]
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state[nxt] == 1:
                cycle = path[path.index(nxt) :] + [nxt]
                raise InvalidArgument(
                    "reference cycle between subgraphs: "
                    + " -> ".join(f"subgraph {x}" for x in cycle)
                    + "; a subgraph may not reference itself directly or through IF/WHILE"
                )
            elif state[nxt] == 0:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(edges[nxt]))


# ---------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------


def validate_model(model: Model, *, operation_validator: OperationValidator | None = None) -> None:
    """Raise InvalidArgument unless ``model`` is a structurally valid HAL 1.3 model.

    ``operation_validator(model, subgraph_index, operation_index)`` is called
    for every operation other than IF/WHILE (fundamental, OEM_OPERATION and
    extension operations) once all structural checks passed.
    """
    main = model.main
    if not main.operations or not main.operands:
        raise InvalidArgument(
            f"subgraph 0 (main) has {len(main.operands)} operands and {len(main.operations)}"
            " operations; the main subgraph must have at least one of each"
        )
    prefixes = _check_extension_prefixes(model)
    pool_sizes = _model_pool_sizes(model)
    subgraphs = (main, *model.referenced)
    edges: list[list[int]] = []
    for s, subgraph in enumerate(subgraphs):
        references = _check_operands(model, s, subgraph, pool_sizes, prefixes)
        edges.append(sorted(set(references)))
        _check_io_lists(s, subgraph)
    pending: list[tuple[int, int]] = []
    for s, subgraph in enumerate(subgraphs):
        _check_operations(model, s, subgraph, prefixes, pending)
    _check_reference_cycles(edges)
    if operation_validator is not None:
        for s, k in pending:
            operation_validator(model, s, k)
