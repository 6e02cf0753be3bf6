"""LSH_PROJECTION: FarmHash Fingerprint64, the sign bits, dense and sparse packing.

The fingerprint is checked against values of Google's FarmHash
``Fingerprint64`` (computed with the pyfarmhash bindings, one per code path:
0-3, 4-7, 8-16, 17-32, 33-64 and longer keys); when pyfarmhash is
installed, random keys of every length up to 300 bytes are compared too.
Operation rows compute the bits here with plain loops over seeds and rows.
"""

from __future__ import annotations

import struct

import numpy as np
import pytest
from nnhal.driver.ops.lsh_projection import fingerprint64
from nnhal.driver.ops.registry import OperandInfo, validate_operation
from ops_harness import RNG, Bad, X, context, f16, f32, i32, out, scalar, t

from nnhal.errors import GeneralFailure
from nnhal.types import HalVersion as V
from nnhal.types import OperandType as T
from nnhal.types import OperationType as Op

OP = Op.LSH_PROJECTION
I32_OUT = out(T.TENSOR_INT32)

#: FarmHash Fingerprint64 of bytes((i * 37 + 11) % 256 for i in range(n))
GOLDEN = {
    0: 0x9AE16A3B2F90404F,
    1: 0x4271B80E2915C76A,
    3: 0x373A2B2A12E0C581,
    4: 0xCC1E778137AE6D69,
    7: 0x960838FBC6D9C975,
    8: 0x7D507025ED4EECFD,
    12: 0x12A0D52D6F922439,
    16: 0xD836480326A974D6,
    17: 0x5CDED6CB65C9DAC6,
    24: 0xA71D9FC06B55102B,
    32: 0xA03300E1B2BE6DA7,
    33: 0x839154CA67815696,
    48: 0x698F96261BC531D3,
    64: 0x000F03EAC52D3535,
    65: 0xFB360C5023F60DB6,
    100: 0x094BB5559BBB1375,
    128: 0x33EF435F17AF1739,
    129: 0xC30A81B637D2E4DD,
    300: 0x70118FE7A7F708B5,
}


@pytest.mark.parametrize("length,want", sorted(GOLDEN.items()))
def test_fingerprint64_known_values(length, want):
    key = np.array([(i * 37 + 11) % 256 for i in range(length)], np.uint8).reshape(1, -1)
    assert int(fingerprint64(np.repeat(key, 3, axis=0))[2]) == want


def test_fingerprint64_against_pyfarmhash():
    farmhash = pytest.importorskip("farmhash")
    for length in range(301):
        keys = RNG.integers(0, 256, (4, length), dtype=np.uint8)
        want = [farmhash.fingerprint64(bytes(k)) for k in keys]
        assert fingerprint64(keys).tolist() == want, length


# ---------------------------------------------------------------------------
# Operation rows
# ---------------------------------------------------------------------------


def reference_bits(hash_: np.ndarray, rows: np.ndarray, weight) -> np.ndarray:
    """bit[i, j] = sum_r weight[r] * int64(fp(seed_ij as float32 ++ row_r bytes)) > 0."""
    data = np.ascontiguousarray(rows)
    row_bytes = [data[r].tobytes() for r in range(data.shape[0])]
    bits = np.zeros(hash_.shape, np.int64)
    for i in range(hash_.shape[0]):
        for j in range(hash_.shape[1]):
            seed = struct.pack("<f", float(hash_[i, j]))
            score = 0.0
            for r, raw in enumerate(row_bytes):
                key = np.frombuffer(seed + raw, np.uint8).reshape(1, -1)
                value = float(fingerprint64(key).view(np.int64)[0])
                score += value if weight is None else float(weight[r]) * value
            bits[i, j] = score > 0
    return bits


def run(ins: list[X]):
    ctx = context(OP, ins, [I32_OUT])
    version = validate_operation(ctx)
    shapes = ctx.op.prepare(ctx)
    result = ctx.op.kernel(ctx)(*(x.data for x in ins[:3]))
    assert result.dtype == np.int32
    assert tuple(shapes[0]) == result.shape
    return version, result


@pytest.mark.parametrize(
    "hash_,inp,version",
    [
        (f32((4, 3)), f32((5, 2)), V.V1_0),
        (f32((2, 8)), i32((3,)), V.V1_0),
        (f32((3, 2)), t(T.TENSOR_QUANT8_ASYMM, (4, 2, 3), scale=0.5, zp=128), V.V1_0),
        (f32((3, 5)), f16((6, 20)), V.V1_2),
        (f16((3, 4)), f32((2, 2)), V.V1_2),
    ],
)
def test_dense(hash_, inp, version):
    weight = (f16 if hash_.type == T.TENSOR_FLOAT16 else f32)((inp.data.shape[0],))
    got_version, bits = run([hash_, inp, weight, scalar(2)])
    assert got_version == version
    want = reference_bits(hash_.data, inp.data, weight.data)
    np.testing.assert_array_equal(bits, want.reshape(-1))


class NoValue(X):
    def info(self) -> OperandInfo:
        return OperandInfo(self.type, (), omitted=True)


@pytest.mark.parametrize("kind", [1, 3])
@pytest.mark.parametrize("weight_runtime", [False, True])
def test_sparse(kind, weight_runtime):
    hash_, inp = f32((5, 3)), i32((4, 2))
    # omitted in the model (NO_VALUE), or a model input given no value at run time
    weight = X(T.TENSOR_FLOAT32, None, (3,)) if weight_runtime else NoValue(T.TENSOR_FLOAT32)
    _, got = run([hash_, inp, weight, scalar(kind)])
    bits = reference_bits(hash_.data, inp.data, None)
    want = [int("".join(str(b) for b in row), 2) for row in bits]
    if kind == 3:  # offset k << num_bits against collisions between hash functions
        want = [w + k * 2**3 for k, w in enumerate(want)]
    assert got.tolist() == want


def test_sparse_32_bits_wrap_like_int32():
    hash_, inp = f32((3, 32)), f32((3,))
    _, got = run([hash_, inp, NoValue(T.TENSOR_FLOAT32), scalar(3)])
    bits = reference_bits(hash_.data, inp.data, None)
    want = []
    for row in bits:  # the int32 signature: the first bit is the sign bit
        value = int("".join(str(b) for b in row), 2)  # + k << 32 vanishes in 32 bits
        want.append(value - 2**32 if value >= 2**31 else value)
    assert got.tolist() == want


def test_float16_seeds_are_hashed_as_float32():
    seeds = np.array([[0.5, -1.25, 3.0]], np.float16)
    rows = f32((4,))
    _, a = run([X(T.TENSOR_FLOAT16, seeds), rows, f16(data=[1, 2, 3, 4], shape=None), scalar(2)])
    _, b = run(
        [
            X(T.TENSOR_FLOAT32, seeds.astype(np.float32)),
            rows,
            f32(data=[1, 2, 3, 4], shape=None),
            scalar(2),
        ]
    )
    np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------------------
# Negative rows
# ---------------------------------------------------------------------------

_DENSE = [f32((2, 3)), f32((4, 2)), f32((4,)), scalar(2)]
_SPARSE = [f32((2, 3)), f32((4, 2)), NoValue(T.TENSOR_FLOAT32), scalar(3)]
BAD_ROWS = [
    Bad("three-inputs", OP, _DENSE[:3], [I32_OUT], r"expected 4 inputs, got 3"),
    Bad(
        "int32-hash",
        OP,
        [i32((2, 3)), *_DENSE[1:]],
        [I32_OUT],
        r"input 0 \(hash\) has type TENSOR_INT32; supported: TENSOR_FLOAT32 \(1\.0\), "
        r"TENSOR_FLOAT16 \(1\.2\)",
    ),
    Bad(
        "signed-input",
        OP,
        [_DENSE[0], t(T.TENSOR_QUANT8_ASYMM_SIGNED, (4, 2), scale=1.0), *_DENSE[2:]],
        [I32_OUT],
        r"input 1 \(input\) has type TENSOR_QUANT8_ASYMM_SIGNED; with TENSOR_FLOAT32 "
        r"supported: TENSOR_FLOAT16, TENSOR_FLOAT32, TENSOR_INT32, TENSOR_QUANT8_ASYMM",
    ),
    Bad(
        "f16-weight",
        OP,
        [*_DENSE[:2], f16((4,)), _DENSE[3]],
        [I32_OUT],
        r"input 2 \(weight\) has type TENSOR_FLOAT16",
    ),
    Bad("output-type", OP, _DENSE, [out(T.TENSOR_FLOAT32)], r"output 0 \(output\) has type"),
    Bad(
        "hash-rank-1",
        OP,
        [f32((3,)), *_DENSE[1:]],
        [I32_OUT],
        r"input 0 has rank 1; it must have rank 2",
    ),
    Bad(
        "33-bits",
        OP,
        [f32((2, 33)), *_SPARSE[1:]],
        [I32_OUT],
        r"input 0 \(hash\) has 33 bits per hash function \(axis 1\); at most 32",
    ),
    Bad("type-0", OP, [*_DENSE[:3], scalar(0)], [I32_OUT], r"input 3 \(type\) has value 0"),
    Bad("type-4", OP, [*_DENSE[:3], scalar(4)], [I32_OUT], r"it must be 1 \(SPARSE_DEPRECATED\)"),
    Bad(
        "dense-without-weight",
        OP,
        [*_SPARSE[:3], scalar(2)],
        [I32_OUT],
        r"input 2 \(weight\) has no value; DENSE \(2\) projection needs it",
    ),
    Bad(
        "sparse-with-weight",
        OP,
        [*_DENSE[:2], f32((4,), const=True), scalar(1)],
        [I32_OUT],
        r"input 2 \(weight\) has a value; sparse \(1\) projection needs it omitted",
    ),
    Bad(
        "weight-length",
        OP,
        [*_DENSE[:2], f32((5,)), _DENSE[3]],
        [I32_OUT],
        r"input 2 \(weight\) has 5 elements but input 1 \(input\) has 4 rows",
    ),
    Bad(
        "weight-rank",
        OP,
        [*_DENSE[:2], f32((4, 1)), _DENSE[3]],
        [I32_OUT],
        r"input 2 \(weight\) has rank 2; it must have rank 1",
    ),
]


@pytest.mark.parametrize("row", BAD_ROWS, ids=lambda r: r.id)
def test_invalid(row):
    row.check()


@pytest.mark.parametrize(
    "kind,weight,match",
    [
        (3, np.ones(4, np.float32), r"weight\) has a value; sparse projection omits it"),
        (2, None, r"weight\) has no value; DENSE needs it"),
    ],
)
def test_weight_presence_checked_at_run_time(kind, weight, match):
    ins = [f32((2, 3)), f32((4, 2)), X(T.TENSOR_FLOAT32, None, (4,)), scalar(kind)]
    ctx = context(OP, ins, [I32_OUT])
    validate_operation(ctx)
    kernel = ctx.op.kernel(ctx)
    with pytest.raises(GeneralFailure, match=rf"LSH_PROJECTION.*{match}"):
        kernel(ins[0].data, ins[1].data, weight)
