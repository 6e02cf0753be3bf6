"""RANDOM_MULTINOMIAL: samples class indexes from softmax(logits), seeded.

As the reference (``Multinomial.cpp``, TensorFlow's kernel): per batch, the
cumulative sums of ``exp(logit - max)`` in double (non-finite logits count
zero), then each sample is ``upper_bound(cdf, u * total)`` for a uniform
double ``u``. The uniforms come from the same generator: TensorFlow's
``PhiloxRandom`` (Philox-4x32-10) keyed by the two int32 seeds of input 2
(``GuardedPhiloxRandom::Init(seed0, seed1)``: key = seed0 as 64 bits,
counter high half = seed1), read as a stream of 32-bit words two per sample
(``SimplePhilox::RandDouble``: 20 + 32 mantissa bits), batch after batch.
So the seed tensor determines the samples, and they are the reference's
samples bit for bit except where ``exp`` rounds differently in the last
place. As the documentation says, seeds (0, 0) mean fresh random seeds for
every execution.

The vectors check this operation statistically (class frequencies against
the softmax probabilities).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

import numpy as np
from nnhal.driver.ops._operand_rules import check_rank, runtime_failure
from nnhal.driver.ops.registry import Arg, OpContext, OperationDef, Shape, register

from nnhal.types import HalVersion, OperandType, OperationType

_T = OperandType
_V = HalVersion
U64 = np.uint64
_MASK32 = U64(0xFFFFFFFF)

_W32A, _W32B = 0x9E3779B9, 0xBB67AE85
_M4x32A, _M4x32B = U64(0xD2511F53), U64(0xCD9E8D57)


def philox4x32_10(
    counter: tuple[np.ndarray, ...], key: tuple[int, int]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Philox-4x32-10 (TensorFlow's ``PhiloxRandom::operator()``) on arrays of counters.

    ``counter`` is four arrays of 32-bit words (held in uint64), ``key`` two
    32-bit words; returns the four output words of every counter.
    """
    c0, c1, c2, c3 = (np.asarray(c, U64) for c in counter)
    k0, k1 = key
    for _ in range(10):
        p0 = _M4x32A * c0
        p1 = _M4x32B * c2
        c0, c1, c2, c3 = (
            (p1 >> U64(32)) ^ c1 ^ U64(k0),
            p1 & _MASK32,
            (p0 >> U64(32)) ^ c3 ^ U64(k1),
            p0 & _MASK32,
        )
        k0, k1 = (k0 + _W32A) & 0xFFFFFFFF, (k1 + _W32B) & 0xFFFFFFFF
    return c0, c1, c2, c3


def philox_words(key: int, counter_hi: int, count: int) -> np.ndarray:
    """The first ``count`` 32-bit outputs of ``PhiloxRandom(key, counter_hi)``.

    ``key`` and ``counter_hi`` are the two 64-bit seeds (two's complement);
    block ``k`` has counter ``(k mod 2**32, k >> 32, counter_hi low, high)``
    and gives four words, in order.
    """
    blocks = (count + 3) // 4
    k = np.arange(blocks, dtype=U64)
    counter = (
        k & _MASK32,
        k >> U64(32),
        np.full(blocks, U64(counter_hi & 0xFFFFFFFF)),
        np.full(blocks, U64((counter_hi >> 32) & 0xFFFFFFFF)),
    )
    words = philox4x32_10(counter, (key & 0xFFFFFFFF, (key >> 32) & 0xFFFFFFFF))
    return np.stack(words, axis=1).reshape(-1)[:count]


def uniform_doubles(seed0: int, seed1: int, count: int) -> np.ndarray:
    """``count`` draws of ``SimplePhilox::RandDouble`` for the int32 seeds."""
    words = philox_words(seed0 & (2**64 - 1), seed1 & (2**64 - 1), 2 * count)
    high, low = words[0::2] & U64(0xFFFFF), words[1::2]
    # 1.mantissa - 1.0 is exactly mantissa / 2**52.
    return ((high << U64(32)) | low).astype(np.float64) / float(2**52)


def _sample_count(ctx: OpContext) -> int:
    count = int(ctx.scalar(1))
    if count < 0:
        raise ctx.fail(f"input 1 (sample_count) has value {count}; it must not be negative")
    return count


def _validate(ctx: OpContext) -> None:
    check_rank(ctx, 0, exact=2)
    check_rank(ctx, 2, exact=1)
    seeds = ctx.inputs[2].dimensions
    if seeds and seeds[0] and seeds[0] != 2:
        raise ctx.fail(f"input 2 (seeds) has {seeds[0]} elements; it must have 2")
    if ctx.constant(1) is not None:
        _sample_count(ctx)


def _prepare(ctx: OpContext) -> list[Shape]:
    dims = ctx.inputs[0].dimensions
    return [(dims[0] if dims else 0, _sample_count(ctx))]


def _execute(ctx: OpContext) -> Callable[..., np.ndarray]:
    count = _sample_count(ctx)

    def multinomial(logits: np.ndarray, seeds: np.ndarray) -> np.ndarray:
        if logits.ndim != 2 or seeds.shape != (2,):
            raise runtime_failure(
                ctx,
                f"input 0 has shape {logits.shape} and input 2 {seeds.shape}; "
                "expected [batches, classes] and [2]",
            )
        batches, classes = logits.shape
        s0, s1 = int(seeds[0]), int(seeds[1])
        if s0 == 0 and s1 == 0:
            s0, s1 = secrets.randbits(64), secrets.randbits(64)
        target = uniform_doubles(s0, s1, batches * count).reshape(batches, count)
        x = logits.astype(np.float32)
        finite = np.isfinite(x)
        high = np.where(finite, x, -np.inf).max(axis=1, initial=np.finfo(np.float32).min)
        # exp(-inf) = 0: non-finite logits add nothing to the running total.
        weights = np.exp(np.where(finite, x.astype(np.float64) - high[:, None], -np.inf))
        cdf = np.cumsum(weights, axis=1)
        total = cdf[:, -1:] if classes else np.zeros((batches, 1))
        target *= total
        out = np.empty((batches, count), np.int32)
        for b in range(batches):  # one searchsorted per batch row
            out[b] = np.searchsorted(cdf[b], target[b], side="right")
        return out

    return multinomial


RANDOM_MULTINOMIAL = register(
    OperationDef(
        OperationType.RANDOM_MULTINOMIAL,
        inputs=(
            Arg("input"),
            Arg("sample_count", _T.INT32),
            Arg("seeds", _T.TENSOR_INT32),
        ),
        outputs=(Arg("output", _T.TENSOR_INT32),),
        types={_T.TENSOR_FLOAT32: _V.V1_2, _T.TENSOR_FLOAT16: _V.V1_2},
        execute=_execute,
        prepare=_prepare,
        validate=_validate,
        pure=False,  # the reference draws anew at every execution
    )
)
