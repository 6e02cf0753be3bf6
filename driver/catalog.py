"""The operation catalog: every HAL 1.3 operation, its operand types and status.

What ``nnhal ops`` prints. Built from the registry's data (each
registration's type table gives the primary operand types and the HAL version
each needs), so it can never disagree with what the driver runs.
"""

from __future__ import annotations

from dataclasses import dataclass

from nnhal.driver.ops.registry import registered

from nnhal.types import HalVersion, OperandType, OperationType

#: IF and WHILE are run by the executor, not registered operations.
_EXECUTOR_OWNED = {
    OperationType.IF: {OperandType.TENSOR_BOOL8: HalVersion.V1_3},
    OperationType.WHILE: {OperandType.SUBGRAPH: HalVersion.V1_3},
}

#: Column order and short labels for the text table.
COLUMNS: tuple[tuple[OperandType, str], ...] = (
    (OperandType.TENSOR_FLOAT32, "F32"),
    (OperandType.TENSOR_FLOAT16, "F16"),
    (OperandType.TENSOR_INT32, "I32"),
    (OperandType.TENSOR_QUANT8_ASYMM, "Q8A"),
    (OperandType.TENSOR_QUANT8_ASYMM_SIGNED, "Q8AS"),
    (OperandType.TENSOR_QUANT8_SYMM, "Q8S"),
    (OperandType.TENSOR_QUANT16_ASYMM, "Q16A"),
    (OperandType.TENSOR_QUANT16_SYMM, "Q16S"),
    (OperandType.TENSOR_BOOL8, "BOOL8"),
    (OperandType.SUBGRAPH, "SUBG"),
)


#: An operation whose primary operand is a scalar (FILL's value) shows it in
#: the column of the matching tensor type.
_SCALAR_COLUMN = {
    OperandType.FLOAT32: OperandType.TENSOR_FLOAT32,
    OperandType.FLOAT16: OperandType.TENSOR_FLOAT16,
    OperandType.INT32: OperandType.TENSOR_INT32,
    OperandType.BOOL: OperandType.TENSOR_BOOL8,
}


@dataclass(frozen=True)
class CatalogEntry:
    operation: OperationType
    implemented: bool
    #: primary operand type -> lowest HAL version (empty when not implemented)
    types: dict[int, HalVersion]
    note: str  # "executor" for IF/WHILE, the reason when not implemented


def catalog() -> list[CatalogEntry]:
    """One entry per HAL 1.3 operation (OEM_OPERATION excluded), in HAL order."""
    implemented = registered()
    entries = []
    for op in OperationType:
        if op == OperationType.OEM_OPERATION:
            continue
        if op in _EXECUTOR_OWNED:
            entries.append(CatalogEntry(op, True, dict(_EXECUTOR_OWNED[op]), "executor"))
        elif op in implemented:
            entries.append(CatalogEntry(op, True, dict(implemented[op].types), ""))
        else:
            entries.append(CatalogEntry(op, False, {}, "not implemented"))
    return entries


def catalog_json() -> list[dict]:
    return [
        {
            "operation": e.operation.name,
            "code": int(e.operation),
            "implemented": e.implemented,
            "types": {OperandType(t).name: str(v) for t, v in sorted(e.types.items())},
            "note": e.note,
        }
        for e in catalog()
    ]


def catalog_table() -> str:
    """A text table: one row per operation, the HAL version under each operand type."""
    entries = catalog()
    width = max(len(e.operation.name) for e in entries)
    header = f"{'operation':<{width}}  {'code':>4}  " + " ".join(
        f"{label:>5}" for _, label in COLUMNS
    )
    lines = [header, "-" * len(header)]
    for e in entries:
        shown = {_SCALAR_COLUMN.get(t, t): v for t, v in e.types.items()}
        cells = " ".join(f"{str(shown[t]) if t in shown else '-':>5}" for t, _ in COLUMNS)
        note = e.note if e.note else ""
        lines.append(
            f"{e.operation.name:<{width}}  {int(e.operation):>4}  {cells}  {note}".rstrip()
        )
    done = sum(e.implemented for e in entries)
    lines.append(
        f"{done} of {len(entries)} HAL 1.3 operations implemented; "
        "cells give the HAL version an operand type needs ('-' = not defined or not implemented)"
    )
    return "\n".join(lines)
