"""LSH_PROJECTION: locality-sensitive hashing of the input's rows into bits.

For every seed of the ``[num_hash, num_bits]`` hash tensor, the reference
(``LSHProjection.cpp``, ``runningSignBit``) hashes each row of the input
(its raw bytes) prefixed by the seed as a float32 (4 bytes, little-endian)
with ``farmhash::Fingerprint64`` (FarmHash's ``farmhashna::Hash64``), takes
the 64-bit fingerprint as a signed integer converted to double, and sums
these over the rows, each times the row's weight (1.0 without weights); the
bit is ``sum > 0``. Dense output is every bit; sparse output packs each hash
function's bits (first bit highest) into an int32, plus ``k << num_bits``
for hash function ``k`` (type 3; type 1, deprecated, without the offset).

The fingerprint is implemented here exactly, vectorized with numpy over all
(seed, row) keys at once: every key has the same length, so each step of
FarmHash is one array operation on uint64 words (which wrap mod 2**64 as in
C). As in the reference, sparse projection requires the weight to be
omitted and dense projection requires it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from nnhal.driver.ops._operand_rules import check_rank, runtime_failure
from nnhal.driver.ops.registry import Arg, OpContext, OperationDef, Shape, register

from nnhal.types import HalVersion, OperandType, OperationType

_T = OperandType
_V = HalVersion
U64 = np.uint64

SPARSE_DEPRECATED, DENSE, SPARSE = 1, 2, 3
_TYPE_NAMES = "1 (SPARSE_DEPRECATED), 2 (DENSE) or 3 (SPARSE)"
MAX_BITS = 32

# ---------------------------------------------------------------------------
# FarmHash Fingerprint64 (farmhashna::Hash64) over rows of equal length
# ---------------------------------------------------------------------------

_K0 = U64(0xC3A5C85C97CB3127)
_K1 = U64(0xB492B66FBE98F273)
_K2 = U64(0x9AE16A3B2F90404F)


def _rot(v: np.ndarray, shift: int) -> np.ndarray:
    return (v >> U64(shift)) | (v << U64(64 - shift))


def _shift_mix(v: np.ndarray) -> np.ndarray:
    return v ^ (v >> U64(47))


def _len16(u: np.ndarray, v: np.ndarray, mul) -> np.ndarray:
    a = (u ^ v) * mul
    a ^= a >> U64(47)
    b = (v ^ a) * mul
    b ^= b >> U64(47)
    return b * mul


class _Keys:
    """Little-endian word reads at a byte offset of every key (one row per key)."""

    def __init__(self, keys: np.ndarray) -> None:
        self.keys = keys

    def u64(self, offset: int) -> np.ndarray:
        return np.ascontiguousarray(self.keys[:, offset : offset + 8]).view("<u8")[:, 0]

    def u32(self, offset: int) -> np.ndarray:
        word = np.ascontiguousarray(self.keys[:, offset : offset + 4]).view("<u4")[:, 0]
        return word.astype(U64)


def _weak32(f: _Keys, pos: int, a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """WeakHashLen32WithSeeds over the 32 bytes at ``pos``."""
    w, x, y, z = f.u64(pos), f.u64(pos + 8), f.u64(pos + 16), f.u64(pos + 24)
    a = a + w
    b = _rot(b + a + z, 21)
    c = a
    a = a + x + y
    b = b + _rot(a, 44)
    return a + z, b + c


def _hash_0_to_16(f: _Keys, n: int, count: int) -> np.ndarray:
    if n >= 8:
        mul = _K2 + U64(2 * n)
        a = f.u64(0) + _K2
        b = f.u64(n - 8)
        c = _rot(b, 37) * mul + a
        d = (_rot(a, 25) + b) * mul
        return _len16(c, d, mul)
    if n >= 4:
        mul = _K2 + U64(2 * n)
        return _len16(U64(n) + (f.u32(0) << U64(3)), f.u32(n - 4), mul)
    if n > 0:
        keys = f.keys.astype(U64)
        y = keys[:, 0] + (keys[:, n >> 1] << U64(8))
        z = U64(n) + (keys[:, n - 1] << U64(2))
        return _shift_mix(y * _K2 ^ z * _K0) * _K2
    return np.full(count, _K2, U64)


def _hash_17_to_32(f: _Keys, n: int) -> np.ndarray:
    mul = _K2 + U64(2 * n)
    a = f.u64(0) * _K1
    b = f.u64(8)
    c = f.u64(n - 8) * mul
    d = f.u64(n - 16) * _K2
    return _len16(_rot(a + b, 43) + _rot(c, 30) + d, a + _rot(b + _K2, 18) + c, mul)


def _hash_33_to_64(f: _Keys, n: int) -> np.ndarray:
    mul = _K2 + U64(2 * n)
    a = f.u64(0) * _K2
    b = f.u64(8)
    c = f.u64(n - 8) * mul
    d = f.u64(n - 16) * _K2
    y = _rot(a + b, 43) + _rot(c, 30) + d
    z = _len16(y, a + _rot(b + _K2, 18) + c, mul)
    e = f.u64(16) * mul
    g = f.u64(24)
    h = (y + f.u64(n - 32)) * mul
    i = (z + f.u64(n - 24)) * mul
    return _len16(_rot(e + g, 43) + _rot(h, 30) + i, e + _rot(g + a, 18) + h, mul)


def _hash_long(f: _Keys, n: int, count: int) -> np.ndarray:
    """Keys over 64 bytes: 64-byte blocks, then the last 64 bytes."""
    seed = U64(81)
    x = np.full(count, seed, U64)
    y = x * _K1 + U64(113)
    z = _shift_mix(y * _K2 + U64(113)) * _K2
    v0 = v1 = w0 = w1 = np.zeros(count, U64)
    x = x * _K2 + f.u64(0)
    end = ((n - 1) // 64) * 64
    for pos in range(0, end, 64):
        x = _rot(x + y + v0 + f.u64(pos + 8), 37) * _K1
        y = _rot(y + v1 + f.u64(pos + 48), 42) * _K1
        x ^= w1
        y = y + v0 + f.u64(pos + 40)
        z = _rot(z + w0, 33) * _K1
        v0, v1 = _weak32(f, pos, v1 * _K1, x + w0)
        w0, w1 = _weak32(f, pos + 32, z + w1, y + f.u64(pos + 16))
        x, z = z, x
    mul = _K1 + ((z & U64(0xFF)) << U64(1))
    pos = n - 64
    w0 = w0 + U64((n - 1) & 63)
    v0 = v0 + w0
    w0 = w0 + v0
    x = _rot(x + y + v0 + f.u64(pos + 8), 37) * mul
    y = _rot(y + v1 + f.u64(pos + 48), 42) * mul
    x ^= w1 * U64(9)
    y = y + v0 * U64(9) + f.u64(pos + 40)
    z = _rot(z + w0, 33) * mul
    v0, v1 = _weak32(f, pos, v1 * mul, x + w0)
    w0, w1 = _weak32(f, pos + 32, z + w1, y + f.u64(pos + 16))
    x, z = z, x
    return _len16(_len16(v0, w0, mul) + _shift_mix(y) * _K0 + z, _len16(v1, w1, mul) + x, mul)


def fingerprint64(keys: np.ndarray) -> np.ndarray:
    """FarmHash ``Fingerprint64`` of each row of a ``[count, length]`` uint8 array (uint64)."""
    keys = np.ascontiguousarray(keys, dtype=np.uint8)
    count, n = keys.shape
    f = _Keys(keys)
    if n <= 16:
        return _hash_0_to_16(f, n, count)
    if n <= 32:
        return _hash_17_to_32(f, n)
    if n <= 64:
        return _hash_33_to_64(f, n)
    return _hash_long(f, n, count)


# ---------------------------------------------------------------------------
# The operation
# ---------------------------------------------------------------------------


def _projection_type(ctx: OpContext) -> int:
    kind = int(ctx.scalar(3))
    if kind not in (SPARSE_DEPRECATED, DENSE, SPARSE):
        raise ctx.fail(f"input 3 (type) has value {kind}; it must be {_TYPE_NAMES}")
    return kind


def _validate(ctx: OpContext) -> HalVersion | None:
    check_rank(ctx, 0, exact=2)
    check_rank(ctx, 1, min_rank=1)
    hash_dims = ctx.inputs[0].dimensions
    if hash_dims is not None and len(hash_dims) == 2 and hash_dims[1] > MAX_BITS:
        raise ctx.fail(
            f"input 0 (hash) has {hash_dims[1]} bits per hash function (axis 1); "
            f"at most {MAX_BITS} are supported"
        )
    if ctx.constant(3) is not None:
        kind = _projection_type(ctx)
        if kind == DENSE and ctx.is_omitted(2):
            raise ctx.fail("input 2 (weight) has no value; DENSE (2) projection needs it")
        if kind != DENSE and ctx.inputs[2].is_constant:
            raise ctx.fail(
                f"input 2 (weight) has a value; sparse ({kind}) projection needs it omitted"
            )
    if ctx.inputs[1].type == _T.TENSOR_FLOAT16:
        return _V.V1_2
    return None


def _prepare(ctx: OpContext) -> list[Shape]:
    kind = _projection_type(ctx)
    hash_dims = ctx.inputs[0].dimensions
    num_hash = hash_dims[0] if hash_dims else 0
    num_bits = hash_dims[1] if hash_dims else 0
    if kind == DENSE:
        weight, inp = ctx.inputs[2].dimensions, ctx.inputs[1].dimensions
        if weight is not None and len(weight) != 1:
            raise ctx.fail(f"input 2 (weight) has rank {len(weight)}; it must have rank 1")
        if weight and inp and weight[0] and inp[0] and weight[0] != inp[0]:
            raise ctx.fail(
                f"input 2 (weight) has {weight[0]} elements but input 1 (input) has "
                f"{inp[0]} rows (axis 0); they must match"
            )
        return [(num_hash * num_bits,)]
    return [(num_hash,)]


def _execute(ctx: OpContext) -> Callable[..., np.ndarray]:
    kind = _projection_type(ctx)
    hash_const = ctx.constant(0)

    def seeds_of(h: np.ndarray) -> np.ndarray:
        if h.ndim != 2 or h.shape[1] > MAX_BITS:
            raise runtime_failure(
                ctx, f"input 0 (hash) has shape {h.shape}; it must be [num_hash, <= 32]"
            )
        # The seed enters the key as a float32 (float16 seeds are converted).
        return np.ascontiguousarray(h, dtype="<f4").reshape(-1, 1).view(np.uint8)

    seeds_c = None if hash_const is None else seeds_of(hash_const)

    def signs(h: np.ndarray, x: np.ndarray, w: np.ndarray | None) -> np.ndarray:
        """The bit of every seed, shaped like the hash tensor."""
        seeds = seeds_c if seeds_c is not None else seeds_of(h)
        if x.ndim < 1:
            raise runtime_failure(ctx, "input 1 (input) must have rank 1 or more")
        rows = np.ascontiguousarray(x).reshape(x.shape[0], -1).view(np.uint8)
        n_seeds, n_rows = seeds.shape[0], rows.shape[0]
        keys = np.empty((n_seeds, n_rows, 4 + rows.shape[1]), np.uint8)
        keys[:, :, :4] = seeds[:, None, :]
        keys[:, :, 4:] = rows[None, :, :]
        hashed = fingerprint64(keys.reshape(n_seeds * n_rows, -1)).view(np.int64)
        values = hashed.astype(np.float64).reshape(n_seeds, n_rows)
        if w is not None:
            if w.shape != (n_rows,):
                raise runtime_failure(
                    ctx, f"input 2 (weight) has shape {w.shape}; input 1 has {n_rows} rows"
                )
            values *= w.astype(np.float64)
        # Summed row after row, as the reference's running score (cumsum is
        # sequential; a reduction could sum pairwise and round differently).
        score = np.cumsum(values, axis=1)[:, -1] if n_rows else np.zeros(n_seeds)
        return (score > 0).reshape(h.shape)

    if kind == DENSE:

        def dense(h, x, w):
            if w is None:
                raise runtime_failure(ctx, "input 2 (weight) has no value; DENSE needs it")
            return signs(h, x, w).astype(np.int32).reshape(-1)

        return dense

    def sparse(h, x, w):
        if w is not None:
            raise runtime_failure(ctx, "input 2 (weight) has a value; sparse projection omits it")
        bits = signs(h, x, None).astype(np.int64)
        num_hash, num_bits = bits.shape
        weights = np.left_shift(1, np.arange(num_bits - 1, -1, -1, dtype=np.int64))
        signature = bits @ weights
        if kind == SPARSE:
            signature += np.arange(num_hash, dtype=np.int64) << num_bits
        # int32 arithmetic in the reference: wrap to 32 bits.
        return (signature & 0xFFFFFFFF).astype(np.uint32).view(np.int32)

    return sparse


LSH_PROJECTION = register(
    OperationDef(
        OperationType.LSH_PROJECTION,
        inputs=(
            Arg("hash"),
            Arg(
                "input",
                frozenset(
                    {
                        _T.TENSOR_FLOAT16,
                        _T.TENSOR_FLOAT32,
                        _T.TENSOR_INT32,
                        _T.TENSOR_QUANT8_ASYMM,
                    }
                ),
            ),
            Arg("weight", optional=True),
            Arg("type", _T.INT32),
        ),
        outputs=(Arg("output", _T.TENSOR_INT32),),
        types={_T.TENSOR_FLOAT32: _V.V1_0, _T.TENSOR_FLOAT16: _V.V1_2},
        execute=_execute,
        prepare=_prepare,
        validate=_validate,
    )
)
