"""EMBEDDING_LOOKUP and HASHTABLE_LOOKUP: positive rows, misses, failures, negatives.

References index the values with Python loops over the lookups (a dict from
key to row for HASHTABLE_LOOKUP), independent of the kernels' vectorized
searches.
"""

from __future__ import annotations

import numpy as np
import pytest
from nnhal.driver.ops.registry import validate_operation
from ops_harness import (
    RNG,
    Bad,
    Row,
    X,
    assert_matches,
    b8,
    context,
    f16,
    f32,
    i32,
    ivec,
    out,
    s8,
    u8,
)

from nnhal.errors import GeneralFailure
from nnhal.types import HalVersion as V
from nnhal.types import OperandType as T
from nnhal.types import OperationType as Op

U8 = T.TENSOR_QUANT8_ASYMM


def embedding_reference(lookups: np.ndarray, values: np.ndarray) -> np.ndarray:
    return np.stack([values[int(i)] for i in lookups]) if lookups.size else values[:0]


def _out_like(x: X) -> X:
    return out(x.type, scale=x.scale, zp=x.zp)


EMBEDDING_ROWS = [
    Row("embedding-f32", Op.EMBEDDING_LOOKUP, [ivec([1, 0, 2]), f32((3, 2, 4))],
        out(T.TENSOR_FLOAT32), embedding_reference, V.V1_0, raw=True, shape=(3, 2, 4)),
    Row("embedding-i32-repeats", Op.EMBEDDING_LOOKUP, [ivec([2, 2, 0, 1, 2]), i32((3, 5))],
        out(T.TENSOR_INT32), embedding_reference, V.V1_2, raw=True, shape=(5, 5)),
    Row("embedding-u8", Op.EMBEDDING_LOOKUP, [ivec([0, 3]), u8((4, 2), scale=0.5, zp=127)],
        out(U8, scale=0.5, zp=127), embedding_reference, V.V1_2, raw=True),
    Row("embedding-f16", Op.EMBEDDING_LOOKUP, [ivec([1]), f16((2, 3, 2))],
        out(T.TENSOR_FLOAT16), embedding_reference, V.V1_3, raw=True),
    Row("embedding-s8-runtime-lookups", Op.EMBEDDING_LOOKUP,
        [ivec([1, 1, 0], const=False), s8((2, 2, 2, 2))],
        out(T.TENSOR_QUANT8_ASYMM_SIGNED, scale=0.5), embedding_reference, V.V1_3, raw=True,
        shape=(3, 2, 2, 2)),
    Row("embedding-unknown-count", Op.EMBEDDING_LOOKUP,
        [ivec([0, 1], const=False, dims=(0,)), f32((2, 3))], out(T.TENSOR_FLOAT32),
        embedding_reference, raw=True, shape=(0, 3)),
]  # fmt: skip


@pytest.mark.parametrize("row", EMBEDDING_ROWS, ids=lambda r: r.id)
def test_embedding_lookup(row: Row):
    row.check()


def test_embedding_lookup_zero_lookups():
    ctx = context(Op.EMBEDDING_LOOKUP, [ivec([0]), f32((3, 2))], [out(T.TENSOR_FLOAT32)])
    validate_operation(ctx)
    got = ctx.op.kernel(ctx)(np.zeros(0, np.int32), np.ones((3, 2), np.float32))
    assert got.shape == (0, 2)


# ---------------------------------------------------------------------------
# HASHTABLE_LOOKUP
# ---------------------------------------------------------------------------


def hashtable_reference(lookups, keys, values):
    table = {int(k): values[i] for i, k in enumerate(keys)}
    rows, hits = [], []
    for key in lookups:
        row = table.get(int(key))
        hits.append(row is not None)
        rows.append(np.zeros_like(values[0]) if row is None else row)
    output = np.stack(rows) if rows else values[:0]
    return output, np.array(hits, np.uint8)


def _sorted_keys(n: int) -> np.ndarray:
    return np.sort(RNG.choice(np.arange(-1000, 1000), n, replace=False)).astype(np.int32)


def _case(name, values: X, lookups: list[int] | None = None, keys=None, version=None):
    n = values.data.shape[0]
    keys = _sorted_keys(n) if keys is None else np.asarray(keys, np.int32)
    if lookups is None:  # half hits, half misses
        lookups = list(RNG.choice(keys, 3)) + [int(keys.max()) + 1, int(keys.min()) - 1, 5000]
    return name, ivec(lookups, const=False), ivec(keys, const=False), values, version


HASHTABLE_CASES = [
    _case("f32", f32((4, 2)), version=V.V1_0),
    _case("i32-3d", i32((5, 2, 3)), version=V.V1_0),
    _case("u8-1d-values", u8((6,), scale=0.5, zp=3), version=V.V1_0),
    _case("f32-documented", f32(data=[[0, 0.1], [1, 1.1], [2, 2.1]]),
          [1234, -292, -11, 0], [-11, 0, 1234]),
    _case("u8-extremes", u8((3, 2)), [-(2**31), 2**31 - 1, 0],
          [-(2**31), 0, 2**31 - 1]),
    _case("no-lookups", f32((3, 2)), []),
]  # fmt: skip


@pytest.mark.parametrize("case", HASHTABLE_CASES, ids=lambda c: c[0])
def test_hashtable_lookup(case):
    _, lookups, keys, values, version = case
    outs = [_out_like(values), out(U8, scale=1.0)]
    ctx = context(Op.HASHTABLE_LOOKUP, [lookups, keys, values], outs)
    got_version = validate_operation(ctx)
    if version is not None:
        assert got_version == version
    shapes = ctx.op.prepare(ctx)
    output, hits = ctx.op.kernel(ctx)(lookups.data, keys.data, values.data)
    want_output, want_hits = hashtable_reference(lookups.data, keys.data, values.data)
    assert output.dtype == values.data.dtype and hits.dtype == np.uint8
    assert np.array_equal(output, want_output) and np.array_equal(hits, want_hits)
    assert not np.shares_memory(output, values.data)
    for prepared, got in zip(shapes, (output, hits)):
        assert len(prepared) == got.ndim
        assert all(p in (0, s) for p, s in zip(prepared, got.shape))


def test_hashtable_documented_example():
    lookups, keys = ivec([1234, -292, -11, 0]), ivec([-11, 0, 1234])
    values = f32(data=[[0.0, 0.1], [1.0, 1.1], [2.0, 2.1]])
    ctx = context(
        Op.HASHTABLE_LOOKUP, [lookups, keys, values], [out(T.TENSOR_FLOAT32), out(U8, scale=1.0)]
    )
    validate_operation(ctx)
    assert ctx.op.prepare(ctx) == [(4, 2), (4,)]
    output, hits = ctx.op.kernel(ctx)(lookups.data, keys.data, values.data)
    assert output.tolist() == np.float32([[2.0, 2.1], [0, 0], [0, 0.1], [1.0, 1.1]]).tolist()
    assert hits.tolist() == [1, 0, 1, 1]


# ---------------------------------------------------------------------------
# Negative rows
# ---------------------------------------------------------------------------

F32_OUT = out(T.TENSOR_FLOAT32)
HITS = out(U8, scale=1.0)

BAD_ROWS = [
    Bad("embedding-one-input", Op.EMBEDDING_LOOKUP, [ivec([0])], [F32_OUT],
        r"expected 2 inputs, got 1"),
    Bad("embedding-lookups-float", Op.EMBEDDING_LOOKUP, [f32((2,)), f32((3, 2))], [F32_OUT],
        r"input 0 \(lookups\) has type TENSOR_FLOAT32; with TENSOR_FLOAT32 supported: "
        r"TENSOR_INT32"),
    Bad("embedding-values-bool", Op.EMBEDDING_LOOKUP, [ivec([0]), b8((3, 2))],
        [out(T.TENSOR_BOOL8)],
        r"input 1 \(values\) has type TENSOR_BOOL8; supported: TENSOR_FLOAT32 \(1.0\), "
        r"TENSOR_INT32 \(1.2\)"),
    Bad("embedding-output-type", Op.EMBEDDING_LOOKUP, [ivec([0]), f32((3, 2))],
        [out(T.TENSOR_FLOAT16)],
        r"output 0 \(output\) has type TENSOR_FLOAT16; with TENSOR_FLOAT32 supported: "
        r"TENSOR_FLOAT32"),
    Bad("embedding-values-rank1", Op.EMBEDDING_LOOKUP, [ivec([0]), f32((3,))], [F32_OUT],
        r"input 1 has rank 1; the minimum rank is 2"),
    Bad("embedding-lookups-rank2", Op.EMBEDDING_LOOKUP,
        [X(T.TENSOR_INT32, np.zeros((1, 1), np.int32), const=True), f32((3, 2))], [F32_OUT],
        r"input 0 has rank 2; it must have rank 1"),
    Bad("hashtable-two-outputs-missing", Op.HASHTABLE_LOOKUP,
        [ivec([0]), ivec([0]), f32((1, 2))], [F32_OUT], r"expected 2 outputs, got 1"),
    Bad("hashtable-f16-values", Op.HASHTABLE_LOOKUP, [ivec([0]), ivec([0]), f16((1, 2))],
        [out(T.TENSOR_FLOAT16), HITS],
        r"input 2 \(values\) has type TENSOR_FLOAT16; supported: TENSOR_FLOAT32 \(1.0\), "
        r"TENSOR_INT32 \(1.0\), TENSOR_QUANT8_ASYMM \(1.0\)"),
    Bad("hashtable-keys-float", Op.HASHTABLE_LOOKUP, [ivec([0]), f32((1,)), f32((1, 2))],
        [F32_OUT, HITS], r"input 1 \(keys\) has type TENSOR_FLOAT32; .*supported: TENSOR_INT32"),
    Bad("hashtable-hits-bool8", Op.HASHTABLE_LOOKUP, [ivec([0]), ivec([0]), f32((1, 2))],
        [F32_OUT, out(T.TENSOR_BOOL8)],
        r"output 1 \(hits\) has type TENSOR_BOOL8; with TENSOR_FLOAT32 supported: "
        r"TENSOR_QUANT8_ASYMM"),
    Bad("hashtable-output-type", Op.HASHTABLE_LOOKUP, [ivec([0]), ivec([0]), u8((1, 2))],
        [F32_OUT, HITS], r"output 0 \(output\) has type TENSOR_FLOAT32; with TENSOR_QUANT8_ASYMM"),
    Bad("hashtable-keys-rank2", Op.HASHTABLE_LOOKUP,
        [ivec([0]), X(T.TENSOR_INT32, np.zeros((1, 1), np.int32), const=True), f32((1, 2))],
        [F32_OUT, HITS], r"input 1 has rank 2; it must have rank 1"),
    Bad("hashtable-key-count", Op.HASHTABLE_LOOKUP, [ivec([0]), ivec([0, 1]), f32((3, 2))],
        [F32_OUT, HITS],
        r"HASHTABLE_LOOKUP .*input 1 \(keys\) has 2 keys but input 2 \(values\) has 3 rows; "
        r"there must be one key per row"),
    Bad("hashtable-s8", Op.HASHTABLE_LOOKUP, [ivec([0]), ivec([0]), s8((1, 2))],
        [out(T.TENSOR_QUANT8_ASYMM_SIGNED, scale=0.5), HITS],
        r"input 2 \(values\) has type TENSOR_QUANT8_ASYMM_SIGNED; supported"),
]  # fmt: skip


@pytest.mark.parametrize("row", BAD_ROWS, ids=lambda r: r.id)
def test_invalid_argument(row: Bad):
    row.check()


RUNTIME_BAD = [
    ("embedding-index-too-big", Op.EMBEDDING_LOOKUP, [ivec([0, 3], const=False), f32((3, 2))],
     [F32_OUT], r"EMBEDDING_LOOKUP .*input 0 \(lookups\) has index 3; input 1 \(values\) has 3"),
    ("embedding-index-negative", Op.EMBEDDING_LOOKUP, [ivec([-1], const=False), f32((3, 2))],
     [F32_OUT], r"input 0 \(lookups\) has index -1"),
    ("hashtable-runtime-key-count", Op.HASHTABLE_LOOKUP,
     [ivec([0]), ivec([0, 1], const=False, dims=(0,)), f32((3, 2), dims=(0, 2))],
     [F32_OUT, HITS], r"input 1 \(keys\) has 2 keys but input 2 \(values\) has 3 rows"),
]  # fmt: skip


@pytest.mark.parametrize("case", RUNTIME_BAD, ids=lambda c: c[0])
def test_runtime_failure(case):
    _, op, ins, outs, pattern = case
    ctx = context(op, ins, outs)
    validate_operation(ctx)
    kernel = ctx.op.kernel(ctx)
    with pytest.raises(GeneralFailure) as err:
        kernel(*[x.data for x in ins])
    assert_matches(err.value.message, pattern)
