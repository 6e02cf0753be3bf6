"""RANDOM_MULTINOMIAL: the Philox generator, the sampling rule, statistics, seeds.

The generator is checked against the Random123 known-answer vectors of
Philox-4x32-10; the samples against a plain-Python inverse-CDF rule on the
same uniforms; the distribution statistically, as the vectors README does.
"""

from __future__ import annotations

import numpy as np
import pytest
from nnhal.driver.executor import compile_model
from nnhal.driver.ops.random_multinomial import philox4x32_10, philox_words, uniform_doubles
from nnhal.driver.ops.registry import validate_operation
from ops_harness import Bad, X, context, f16, f32, i32, ivec, out, scalar

from nnhal.builder import ModelBuilder
from nnhal.tolerance import check_multinomial
from nnhal.types import HalVersion as V
from nnhal.types import OperandType as T
from nnhal.types import OperationType as Op

OP = Op.RANDOM_MULTINOMIAL
I32_OUT = out(T.TENSOR_INT32)

# Random123 kat_vectors for philox4x32_10: (counter, key) -> output
PHILOX_KAT = [
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    (
        (0xFFFFFFFF,) * 4,
        (0xFFFFFFFF, 0xFFFFFFFF),
        (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD),
    ),
    (
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
]


@pytest.mark.parametrize("counter,key,want", PHILOX_KAT)
def test_philox_known_answers(counter, key, want):
    words = philox4x32_10(tuple(np.array([c], np.uint64) for c in counter), key)
    assert tuple(int(w[0]) for w in words) == want


def test_philox_stream_and_doubles():
    # The stream is block after block of four words; counter high half = seed1.
    stream = philox_words(5, 7, 10)
    blocks = philox4x32_10(
        (np.arange(3, dtype=np.uint64), np.zeros(3, np.uint64), np.full(3, 7), np.zeros(3)),
        (5, 0),
    )
    assert stream.tolist() == np.stack(blocks, axis=1).reshape(-1)[:10].tolist()
    u = uniform_doubles(5, 7, 5)
    mantissa = [(int(stream[2 * k]) & 0xFFFFF) << 32 | int(stream[2 * k + 1]) for k in range(5)]
    assert u.tolist() == [m / 2**52 for m in mantissa]
    assert ((0 <= u) & (u < 1)).all()
    # Negative int32 seeds are sign-extended to 64 bits, as in the reference.
    assert uniform_doubles(-1, 0, 3).tolist() == uniform_doubles(2**64 - 1, 0, 3).tolist()


def run(logits: X, count: int, seeds, *, const_seeds=True):
    ins = [logits, scalar(count), ivec(seeds, const=const_seeds)]
    ctx = context(OP, ins, [I32_OUT])
    version = validate_operation(ctx)
    shapes = ctx.op.prepare(ctx)
    samples = ctx.op.kernel(ctx)(logits.data, np.asarray(seeds, np.int32))
    assert samples.dtype == np.int32
    assert list(shapes[0]) == [logits.data.shape[0], count]
    return version, samples


def inverse_cdf(logits: np.ndarray, u: np.ndarray) -> np.ndarray:
    """The reference's rule, one sample at a time: first class whose cdf exceeds u * total."""
    out_ = np.zeros(u.shape, np.int64)
    for b, row in enumerate(logits.astype(np.float64)):
        finite = np.isfinite(row)
        top = np.float32(row[finite].max()) if finite.any() else np.finfo(np.float32).min
        weights = [np.exp(v - top) if ok else 0.0 for v, ok in zip(row, finite)]
        cdf = np.cumsum(weights)
        for j, uj in enumerate(u[b]):
            target = uj * cdf[-1]
            out_[b, j] = next((k for k, c in enumerate(cdf) if c > target), len(cdf))
    return out_


@pytest.mark.parametrize("make", [f32, f16])
def test_samples_follow_the_reference_rule(make):
    logits = make((3, 6))
    version, samples = run(logits, 50, [123, -456])
    assert version == V.V1_2
    u = uniform_doubles(123, -456, 3 * 50).reshape(3, 50)
    np.testing.assert_array_equal(samples, inverse_cdf(logits.data.astype(np.float32), u))


def test_seeded_and_reproducible():
    logits = f32((2, 8))
    _, a = run(logits, 64, [37, 42])
    _, b = run(logits, 64, [37, 42], const_seeds=False)
    _, c = run(logits, 64, [37, 43])
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_frequencies_match_softmax():
    logits = f32(data=[[0.0, 1.0, 2.0, -1.0, 0.5], [3.0, 0.0, 0.0, 0.0, -5.0]], shape=None)
    _, samples = run(logits, 20000, [1, 2])
    ok, _, why = check_multinomial(logits.data, samples, 0.02)
    assert ok, why


def test_non_finite_logits_are_never_drawn():
    data = [[0.0, -np.inf, 1.0, np.nan], [np.inf, 0.0, 0.0, 0.0]]
    _, samples = run(f32(data=data, shape=None), 500, [9, 9])
    assert set(np.unique(samples[0])) <= {0, 2}
    assert set(np.unique(samples[1])) <= {1, 2, 3}


def test_zero_seeds_draw_fresh_seeds():
    logits = f32((1, 50))
    _, a = run(logits, 200, [0, 0])
    _, b = run(logits, 200, [0, 0])
    assert ((0 <= a) & (a < 50)).all()
    assert not np.array_equal(a, b)  # 50**-200: never equal by chance


def test_through_the_executor_with_runtime_seeds():
    mb = ModelBuilder()
    g = mb.main
    logits, seeds = g.input(T.TENSOR_FLOAT32, [2, 4]), g.input(T.TENSOR_INT32, [2])
    samples = g.output(T.TENSOR_INT32, [2, 16])
    g.operation(OP, [logits, g.constant(T.INT32, 16), seeds], [samples])
    compiled = compile_model(mb.build())
    x = np.log(np.array([[0.1, 0.2, 0.3, 0.4], [0.7, 0.1, 0.1, 0.1]], np.float32))
    (first,) = compiled.run([x, np.array([5, 6], np.int32)])
    (again,) = compiled.run([x, np.array([5, 6], np.int32)])
    np.testing.assert_array_equal(first, again)
    np.testing.assert_array_equal(first, inverse_cdf(x, uniform_doubles(5, 6, 32).reshape(2, 16)))


_GOOD = [f32((2, 3)), scalar(4), ivec([1, 2])]
BAD_ROWS = [
    Bad("two-inputs", OP, _GOOD[:2], [I32_OUT], r"expected 3 inputs, got 2"),
    Bad(
        "int32-logits",
        OP,
        [i32((2, 3)), *_GOOD[1:]],
        [I32_OUT],
        r"input 0 \(input\) has type TENSOR_INT32; supported: TENSOR_FLOAT32 \(1\.2\), "
        r"TENSOR_FLOAT16 \(1\.2\)",
    ),
    Bad(
        "float-count",
        OP,
        [_GOOD[0], scalar(4.0, T.FLOAT32), _GOOD[2]],
        [I32_OUT],
        r"input 1 \(sample_count\) has type FLOAT32",
    ),
    Bad(
        "seeds-type",
        OP,
        [*_GOOD[:2], f32((2,))],
        [I32_OUT],
        r"input 2 \(seeds\) has type TENSOR_FLOAT32; .*supported: TENSOR_INT32",
    ),
    Bad(
        "output-type",
        OP,
        _GOOD,
        [out(T.TENSOR_FLOAT32)],
        r"output 0 \(output\) has type TENSOR_FLOAT32",
    ),
    Bad("rank-3", OP, [f32((1, 2, 3)), *_GOOD[1:]], [I32_OUT], r"input 0 has rank 3; it must"),
    Bad("three-seeds", OP, [*_GOOD[:2], ivec([1, 2, 3])], [I32_OUT], r"input 2 \(seeds\) has 3"),
    Bad(
        "negative-count",
        OP,
        [_GOOD[0], scalar(-1), _GOOD[2]],
        [I32_OUT],
        r"input 1 \(sample_count\) has value -1; it must not be negative",
    ),
]


@pytest.mark.parametrize("row", BAD_ROWS, ids=lambda r: r.id)
def test_invalid(row):
    row.check()
