"""EMBEDDING_LOOKUP and HASHTABLE_LOOKUP: gather rows of a values tensor.

EMBEDDING_LOOKUP: ``output[i] = values[lookups[i]]`` (lookups a 1-D
TENSOR_INT32, values of rank >= 2); an index outside ``[0, rows)`` fails the
execution, as in the reference. Quantized rows are copied raw (the output
shares the values' scale and zero point).

HASHTABLE_LOOKUP: keys (1-D TENSOR_INT32, sorted ascending, one per row of
values) map to rows of values. For each lookup, the matching row or a row of
zero bytes when the key is absent, and a hit flag (TENSOR_QUANT8_ASYMM, 1 or
0). The reference binary-searches the sorted keys; ``np.searchsorted`` finds
the same row for sorted, distinct keys (keys that are not sorted, which NNAPI
forbids, may give other results than a C ``bsearch``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from nnhal.driver.ops._operand_rules import TENSOR_INT32, check_rank, runtime_failure
from nnhal.driver.ops.registry import Arg, OpContext, OperationDef, Shape, register

from nnhal.types import HalVersion, OperandType, OperationType

_T = OperandType
_V = HalVersion

# ---------------------------------------------------------------------------
# EMBEDDING_LOOKUP
# ---------------------------------------------------------------------------


def _embedding_validate(ctx: OpContext) -> None:
    check_rank(ctx, 0, exact=1)
    check_rank(ctx, 1, min_rank=2)


def _embedding_prepare(ctx: OpContext) -> list[Shape]:
    lookups, values = ctx.inputs[0].dimensions, ctx.inputs[1].dimensions
    if values is None:
        return [None]
    return [((lookups[0] if lookups else 0),) + tuple(values[1:])]


def _embedding_execute(ctx: OpContext) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    def embedding(lookups: np.ndarray, values: np.ndarray) -> np.ndarray:
        rows = values.shape[0]
        if lookups.size and (lookups.min() < 0 or lookups.max() >= rows):
            bad = lookups[(lookups < 0) | (lookups >= rows)][0]
            raise runtime_failure(
                ctx, f"input 0 (lookups) has index {bad}; input 1 (values) has {rows} rows"
            )
        return values[lookups]

    return embedding


EMBEDDING_LOOKUP = register(
    OperationDef(
        OperationType.EMBEDDING_LOOKUP,
        inputs=(Arg("lookups", TENSOR_INT32), Arg("values")),
        outputs=(Arg("output"),),
        types={
            _T.TENSOR_FLOAT32: _V.V1_0,
            _T.TENSOR_INT32: _V.V1_2,
            _T.TENSOR_QUANT8_ASYMM: _V.V1_2,
            _T.TENSOR_FLOAT16: _V.V1_3,
            _T.TENSOR_QUANT8_ASYMM_SIGNED: _V.V1_3,
        },
        execute=_embedding_execute,
        prepare=_embedding_prepare,
        validate=_embedding_validate,
        primary=1,
    )
)

# ---------------------------------------------------------------------------
# HASHTABLE_LOOKUP
# ---------------------------------------------------------------------------


def _hashtable_validate(ctx: OpContext) -> None:
    check_rank(ctx, 0, exact=1)
    check_rank(ctx, 1, exact=1)
    check_rank(ctx, 2, min_rank=1)
    _hashtable_prepare(ctx)


def _hashtable_prepare(ctx: OpContext) -> list[Shape]:
    lookups, keys, values = (ctx.inputs[i].dimensions for i in range(3))
    if keys and values and keys[0] and values[0] and keys[0] != values[0]:
        raise ctx.fail(
            f"input 1 (keys) has {keys[0]} keys but input 2 (values) has {values[0]} rows; "
            "there must be one key per row"
        )
    count = lookups[0] if lookups else 0
    output = None if values is None else (count,) + tuple(values[1:])
    return [output, (count,)]


def _hashtable_execute(ctx: OpContext) -> Callable[..., tuple]:
    def hashtable(
        lookups: np.ndarray, keys: np.ndarray, values: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        rows = values.shape[0]
        if keys.shape[0] != rows:
            raise runtime_failure(
                ctx, f"input 1 (keys) has {keys.shape[0]} keys but input 2 (values) has {rows} rows"
            )
        if not rows:
            output = np.zeros((lookups.shape[0],) + values.shape[1:], values.dtype)
            return output, np.zeros(lookups.shape[0], np.uint8)
        found = np.minimum(np.searchsorted(keys, lookups), rows - 1)
        hits = keys[found] == lookups
        output = values[found]
        output[~hits] = 0
        return output, hits.astype(np.uint8)

    return hashtable


HASHTABLE_LOOKUP = register(
    OperationDef(
        OperationType.HASHTABLE_LOOKUP,
        inputs=(Arg("lookups", TENSOR_INT32), Arg("keys", TENSOR_INT32), Arg("values")),
        outputs=(Arg("output"), Arg("hits", frozenset({_T.TENSOR_QUANT8_ASYMM}))),
        types={
            _T.TENSOR_FLOAT32: _V.V1_0,
            _T.TENSOR_INT32: _V.V1_0,
            _T.TENSOR_QUANT8_ASYMM: _V.V1_0,
        },
        execute=_hashtable_execute,
        prepare=_hashtable_prepare,
        validate=_hashtable_validate,
        primary=2,
    )
)
