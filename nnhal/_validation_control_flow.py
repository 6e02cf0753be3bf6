"""IF/WHILE validation rules (hal13.md §3.2) and the text helpers validation shares.

Private to ``nnhal.validation``: ``check_if`` / ``check_while`` run during the
operation pass, after every subgraph's operands and input/output lists have
been checked, so referenced subgraphs can be indexed without further guards.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Sequence

from nnhal.errors import InvalidArgument
from nnhal.types import (
    OPERAND_TYPE_INFO,
    Model,
    Operand,
    OperandLifeTime,
    OperandType,
    Operation,
    Subgraph,
    SymmPerChannelQuantParams,
    operation_name,
    type_name,
)

_BOOL8 = int(OperandType.TENSOR_BOOL8)
_SUBGRAPH_TYPE = int(OperandType.SUBGRAPH)

# ---------------------------------------------------------------------------
# Text helpers for messages
# ---------------------------------------------------------------------------


def lifetime_name(lifetime: int) -> str:
    try:
        return OperandLifeTime(lifetime).name
    except ValueError:
        return f"unknown lifetime {lifetime}"


def dims_text(dimensions: Sequence[int]) -> str:
    return "[" + ", ".join(str(d) for d in dimensions) + "]"


def describe(operand: Operand) -> str:
    """``TENSOR_FLOAT32 [1, 2]``."""
    return f"{type_name(operand.type)} {dims_text(operand.dimensions)}"


def op_where(s: int, k: int, operation: Operation) -> str:
    """``ADD (subgraph 0, operation 3)``."""
    return f"{operation_name(operation.type)} (subgraph {s}, operation {k})"


def is_extension(code: int) -> bool:
    # -1 read as uint32 is 0xFFFFFFFF: an extension code with prefix 0xFFFF.
    return code > 0xFFFF or code < 0


# ---------------------------------------------------------------------------
# "compatible" and "known size"
# ---------------------------------------------------------------------------


def _extra_params_equal(a: object, b: object) -> bool:
    if isinstance(a, SymmPerChannelQuantParams) and isinstance(b, SymmPerChannelQuantParams):
        return a.channelDim == b.channelDim and tuple(a.scales) == tuple(b.scales)
    return a == b


def incompatibility(a: Operand, b: Operand) -> str | None:
    """Why two operands are not "compatible" (§3.2), or None when they are.

    Same type; ranks equal when both known, each axis known in both equal;
    equal scale, zeroPoint and extraParams.
    """
    da, db = a.dimensions, b.dimensions
    if (
        a.type == b.type
        and da == db
        and a.scale == b.scale
        and a.zeroPoint == b.zeroPoint
        and a.extraParams is None
        and b.extraParams is None
    ):
        return None  # the usual pair: declared alike
    if a.type != b.type:
        return f"types differ ({type_name(a.type)} vs {type_name(b.type)})"
    if da and db:
        if len(da) != len(db):
            return f"ranks differ ({dims_text(da)} vs {dims_text(db)})"
        for x, y in zip(da, db):
            if x and y and x != y:
                return f"dimensions differ ({dims_text(da)} vs {dims_text(db)})"
    if a.scale != b.scale:
        return f"scales differ ({a.scale} vs {b.scale})"
    if a.zeroPoint != b.zeroPoint:
        return f"zeroPoints differ ({a.zeroPoint} vs {b.zeroPoint})"
    if not _extra_params_equal(a.extraParams, b.extraParams):
        return f"extraParams differ ({a.extraParams!r} vs {b.extraParams!r})"
    return None


#: HAL types with a size of data, by kind (SUBGRAPH and OEM types have none)
_SIZED_TENSORS = frozenset(
    code for code, info in OPERAND_TYPE_INFO.items() if info.byte_size and not info.is_scalar
)
_SIZED_SCALARS = frozenset(
    code for code, info in OPERAND_TYPE_INFO.items() if info.byte_size and info.is_scalar
)


def has_known_size(operand: Operand) -> bool:
    """The HAL's nonExtensionOperandSizeOfData != 0 (extension types always pass)."""
    code = operand.type
    if code in _SIZED_TENSORS:
        dims = operand.dimensions
        return bool(dims) and all(dims)
    return code in _SIZED_SCALARS or is_extension(code)


# ---------------------------------------------------------------------------
# IF / WHILE
# ---------------------------------------------------------------------------


def _referenced_subgraph(
    model: Model, where: str, role: str, operands: Sequence[Operand], index: int
) -> tuple[int, Subgraph]:
    operand = operands[index]
    if operand.type != _SUBGRAPH_TYPE:
        raise InvalidArgument(
            f"{where}: {role} is operand {index} of type {type_name(operand.type)};"
            " it must be a SUBGRAPH operand"
        )
    # type SUBGRAPH implies lifetime SUBGRAPH and offset < len(referenced) (operand checks)
    k = operand.location.offset + 1
    return k, model.referenced[k - 1]


def _require_pair(
    where: str,
    inner: Operand,
    inner_text: tuple,
    outer: Operand,
    outer_text: tuple,
    *,
    sized_inner: bool = False,
    sized_outer: bool = False,
) -> None:
    """``inner`` compatible with ``outer`` and, where asked, each of known size (the
    HAL 1.3 WHILE rule, ``_require_known_size``). The texts naming the two are
    ``(format, *values)``, formatted only for an operand that fails: checking a valid
    model formats nothing."""
    reason = incompatibility(inner, outer)
    if reason is not None:
        raise InvalidArgument(
            f"{where}: {_text(inner_text)} is not compatible with {_text(outer_text)}: {reason}"
        )
    if sized_inner and not has_known_size(inner):
        _require_known_size(where, inner_text, inner)
    if sized_outer and not has_known_size(outer):
        _require_known_size(where, outer_text, outer)


def _text(spec: tuple) -> str:
    return spec[0].format(*spec[1:])


#: ValidationMode::RUNTIME (the NNAPI runtime validating a model it interprets itself):
#: control-flow operands of unknown size are allowed. Set with ``runtime_validation()``.
_RUNTIME_MODE: contextvars.ContextVar[bool] = contextvars.ContextVar("runtime_mode", default=False)


@contextlib.contextmanager
def runtime_validation() -> Iterator[None]:
    """Validate as the NNAPI runtime does (unknown sizes in WHILE allowed) within the block."""
    token = _RUNTIME_MODE.set(True)
    try:
        yield
    finally:
        _RUNTIME_MODE.reset(token)


def _require_known_size(where: str, text: tuple, operand: Operand) -> None:
    if not has_known_size(operand) and not _RUNTIME_MODE.get():
        raise InvalidArgument(
            f"{where}: {_text(text)} ({describe(operand)}) has unknown size; HAL 1.3 drivers"
            " require every WHILE operand to be fully specified (known rank and dimensions)"
        )


def _check_condition_operand(where: str, text: str, operand: Operand) -> None:
    if operand.type != _BOOL8 or tuple(operand.dimensions) != (1,):
        raise InvalidArgument(
            f"{where}: {text} is {describe(operand)}; it must be TENSOR_BOOL8 of dimensions [1]"
        )


def check_if(
    model: Model, s: int, k: int, operation: Operation, operands: Sequence[Operand]
) -> None:
    # Choice for IF (HAL text: "fully specified"; Android 11 code: no size check):
    # the condition must be fully specified -- TENSOR_BOOL8 [1] is -- and the
    # branch operands only need to be "compatible" with the IF operands, as in
    # Android 11 (unknown sizes in branches are legal there and in our executor).
    where = op_where(s, k, operation)
    ins, outs = operation.inputs, operation.outputs
    if len(ins) < 3 or len(outs) < 1:
        raise InvalidArgument(
            f"{where}: has {len(ins)} inputs and {len(outs)} outputs; IF needs at least 3"
            " inputs (condition, then, else, values...) and at least 1 output"
        )
    _check_condition_operand(where, f"input 0 (condition, operand {ins[0]})", operands[ins[0]])
    for role, pos in (("then", 1), ("else", 2)):
        b, branch = _referenced_subgraph(
            model, where, f"input {pos} ({role} branch)", operands, ins[pos]
        )
        name = f"{role} branch (subgraph {b})"
        if len(ins) != 3 + len(branch.inputIndexes):
            raise InvalidArgument(
                f"{where}: {name} has {len(branch.inputIndexes)} inputs but the IF passes"
                f" {len(ins) - 3} values (inputs 3..); the counts must match"
            )
        if len(outs) != len(branch.outputIndexes):
            raise InvalidArgument(
                f"{where}: {name} has {len(branch.outputIndexes)} outputs but the IF has"
                f" {len(outs)}; the counts must match"
            )
        inner_ops = branch.operands
        for j, idx in enumerate(branch.inputIndexes):
            _require_pair(
                where,
                inner_ops[idx],
                ("{} input {} (operand {})", name, j, idx),
                operands[ins[3 + j]],
                ("IF input {} (operand {})", 3 + j, ins[3 + j]),
            )
        for j, idx in enumerate(branch.outputIndexes):
            _require_pair(
                where,
                inner_ops[idx],
                ("{} output {} (operand {})", name, j, idx),
                operands[outs[j]],
                ("IF output {} (operand {})", j, outs[j]),
            )


def _require_while_inputs(
    where: str, name: str, sub: Subgraph, operands: Sequence[Operand], ins: Sequence[int]
) -> None:
    """Each input of a WHILE's condition or body (``name``, ``sub``) compatible with the
    WHILE input that feeds it (inputs 2..), both of known size."""
    for j, idx in enumerate(sub.inputIndexes):
        _require_pair(
            where,
            sub.operands[idx],
            ("{} input {} (operand {})", name, j, idx),
            operands[ins[2 + j]],
            ("WHILE input {} (operand {})", 2 + j, ins[2 + j]),
            sized_inner=True,
            sized_outer=True,
        )


def check_while(
    model: Model, s: int, k: int, operation: Operation, operands: Sequence[Operand]
) -> None:
    # DRIVER validation mode (b/132458982): every operand checked below, inner and
    # outer, must have a known size -- an emulated HAL 1.3 driver cannot run a
    # loop whose state changes shape between iterations.
    where = op_where(s, k, operation)
    ins, outs = operation.inputs, operation.outputs
    if len(ins) < 3 or len(outs) < 1:
        raise InvalidArgument(
            f"{where}: has {len(ins)} inputs and {len(outs)} outputs; WHILE needs at least 3"
            " inputs (condition, body, values...) and at least 1 output"
        )
    c, cond = _referenced_subgraph(model, where, "input 0 (condition)", operands, ins[0])
    name = f"condition (subgraph {c})"
    if len(ins) != 2 + len(cond.inputIndexes):
        raise InvalidArgument(
            f"{where}: {name} has {len(cond.inputIndexes)} inputs but the WHILE passes"
            f" {len(ins) - 2} values (inputs 2..); the counts must match"
        )
    if len(cond.outputIndexes) != 1:
        raise InvalidArgument(
            f"{where}: {name} has {len(cond.outputIndexes)} outputs; it must have exactly 1"
        )
    _require_while_inputs(where, name, cond, operands, ins)
    out_idx = cond.outputIndexes[0]
    _check_condition_operand(where, f"{name} output 0 (operand {out_idx})", cond.operands[out_idx])

    b, body = _referenced_subgraph(model, where, "input 1 (body)", operands, ins[1])
    name = f"body (subgraph {b})"
    n_in, n_out = len(body.inputIndexes), len(body.outputIndexes)
    if len(ins) != 2 + n_in:
        raise InvalidArgument(
            f"{where}: {name} has {n_in} inputs but the WHILE passes {len(ins) - 2} values"
            " (inputs 2..); the counts must match"
        )
    if n_out < len(outs):
        raise InvalidArgument(
            f"{where}: {name} has {n_out} outputs but the WHILE has {len(outs)}; the body"
            " must output at least every input-output value"
        )
    if n_in < n_out:
        raise InvalidArgument(
            f"{where}: {name} has {n_out} outputs but only {n_in} inputs; each body output"
            " feeds the body input at the same position"
        )
    _require_while_inputs(where, name, body, operands, ins)
    for j, idx in enumerate(outs):
        inner_idx = body.outputIndexes[j]
        _require_pair(
            where,
            body.operands[inner_idx],
            ("{} output {} (operand {})", name, j, inner_idx),
            operands[idx],
            ("WHILE output {} (operand {})", j, idx),
            sized_outer=True,
        )
    for j in range(n_out):
        in_idx, out_idx = body.inputIndexes[j], body.outputIndexes[j]
        _require_pair(
            where,
            body.operands[in_idx],
            ("{} input {} (operand {})", name, j, in_idx),
            body.operands[out_idx],
            ("{} output {} (operand {})", name, j, out_idx),
            sized_outer=True,
        )
