"""CONV_2D 3x3, unit stride and dilation, float, by Winograd's F(2x2, 3x3).

Each 2x2 block of output pixels (a tile) comes from the 4x4 input window
``d`` under it: ``Y = A^T [(G g G^T) * (B^T d B)] A``, where ``*`` is an
element-wise product over the 16 positions of the tile. Summed over input
channels, each of the 16 positions is one matrix product ``[tiles, C] x [C,
O]``, so the convolution becomes 16 GEMMs with 16/36 of im2col's
multiplications (2.25x fewer), plus the input and output transforms, which
only add and subtract (``_jit_conv.winograd_input`` / ``winograd_output``).

Numerics: the filter is transformed once, in float64, then rounded to float32
(its coefficients are 1/2 and 1/4 multiples of the weights: exact up to that
rounding). The input transform adds or subtracts at most four inputs and the
output transform six products' sums, so each output differs from the direct
sum by a few float32 roundings of values of the size of the inputs' and
products' magnitudes: the same order as another order of summation (measured
on 1x112x112x32 with 64 random filters: 2.2e-6 against a float64 reference,
im2col and BLAS 7.6e-6; the tests bound it by NNAPI's float32 tolerance).
F(4x4, 3x3) would save more multiplications but its transform's coefficients
(up to 8, and 1/24) lose about ten times as much precision: not used.

The work goes by bands of tile rows: a band's transformed input, its 16
products and its outputs stay in the core's cache between the three steps.
With numba only (``kernels``): numpy without it runs the im2col path.
"""

from __future__ import annotations

import numpy as np
from nnhal.driver.ops import threads

#: output channels of the filter transformed at a time (``filter_transform_numpy``):
#: a block's float64 temporaries stay in cache (512 to 512 channels: 8.6 ms, against 31 ms
#: for one ``einsum`` over the whole filter, the same values)
FILTER_BLOCK = 16
#: the smallest input channels, output channels and their product for which the
#: 16 GEMMs beat im2col's one: a GEMM with few rows of K (C) or columns (O) runs far
#: below the core's peak, while the transforms cost per value. Measured on one
#: thread against im2col (Winograd's time / im2col's): C = O = 8 on 112x112 2.1x,
#: C = 4 to 64 filters on 56x56 4.9x, C = 3 to 32 on 112x112 1.4x; C = O = 16 on
#: 112x112 0.82x, C = 8 to 32 on 56x56 0.82x, 64 to 4 0.79x, and 0.51x-0.59x from
#: 32 to 64 channels up to 256 to 256 (0.79x at 14x14x512 to 512)
MIN_CHANNELS = 8
MIN_FILTERS = 8
MIN_PRODUCT = 128
#: the smallest output area (OH * OW): 4x4 outputs with 32 to 32 channels ran in
#: 0.77x of im2col's time
MIN_PIXELS = 16
#: elements of a band's transformed input and products together on one thread
#: (1 MB of float32: the core's L2 cache holds them between the three steps);
#: with more threads bands are larger, as each BLAS call synchronizes the pool
BAND_ELEMENTS_ONE_THREAD = 1 << 18
BAND_ELEMENTS = 1 << 22
#: the fewest tiles a band holds (all the tiles when there are fewer): each of a
#: band's 16 GEMMs reads its whole [C, O] plane of the filter, so deep layers with
#: few tiles per row spent their time packing the filter for a handful of rows
#: (14x14, 512 to 512 channels: 2 tile rows of 7 per band, 7.0 ms; 4.2 with one
#: band of 49 tiles). Measured on one thread, ResNet-18 interleaved in one
#: process: 24.5-25.1 ms with no minimum, 23.7-24.3 with 64 tiles, 22.9-23.9
#: with 256, alike from 512 tiles to whole images
MIN_BAND_TILES = 256


def eligible(w_shape, stride, dilation, c: int, oh: int, ow: int) -> bool:
    """Whether a float CONV_2D (filter ``[O, KH, KW, C]``) goes by Winograd: a 3x3
    filter at unit stride and dilation, with enough channels, filters and pixels
    for the 16 smaller GEMMs to beat im2col's one."""
    o, kh, kw, _ = w_shape
    return (
        kh == 3
        and kw == 3
        and tuple(stride) == (1, 1)
        and tuple(dilation) == (1, 1)
        and c >= MIN_CHANNELS
        and o >= MIN_FILTERS
        and c * o >= MIN_PRODUCT
        and oh * ow >= MIN_PIXELS
    )


#: weights up to this size are read in order into the cache before the compiled
#: transform (more would not stay there: the last-level cache is shared)
PREFETCH_BYTES = 12 << 20


def filter_transform(w: np.ndarray, module=None) -> np.ndarray | None:
    """The 3x3 filters ``w`` [O, 3, 3, C] as the 16 GEMMs take them: ``G g G^T`` per
    filter and channel, [16, C, O] float32 (C-contiguous: as a transposed view of a
    [16, O, C] array, which would be quicker to fill, ResNet-18 ran 7% slower), or
    None when a weight is not finite (or a transformed one overflows float32).

    ``module`` (``_jit_conv``; its compile errors propagate): its ``winograd_filter``
    computes the same values 2.5x-2.7x faster (512 to 512 channels: 3.4-3.8 ms against
    8.4-10.7); None: ``filter_transform_numpy``.
    """
    if module is None:
        return filter_transform_numpy(w)
    o, _, _, c = w.shape
    u = np.empty((16, c, o), dtype=np.float32)
    # float16 weights widen exactly, as the numpy form's float64 does
    w = np.ascontiguousarray(w, dtype=np.float32)
    if w.nbytes <= PREFETCH_BYTES:
        # one read per cache line, in order: the kernel reads a block of channels of
        # every filter at a time (lines 2-18 KB apart), slow from memory (a 512 to 512
        # layer: 5.7 ms with the weights out of cache, 4.6 after this, 3.0 in cache)
        # (as integers: a float sum of extreme weights would warn of an overflow)
        w.reshape(-1).view(np.int32)[::16].sum()
    if module.winograd_filter(w, u) != 0:
        return None
    return u


def filter_transform_numpy(w: np.ndarray) -> np.ndarray | None:
    """``filter_transform`` in numpy, the reference of the compiled form.

    ``G`` is [[1, 0, 0], [1/2, 1/2, 1/2], [1/2, -1/2, 1/2], [0, 0, 1]]: each of the
    two passes keeps the outer taps and adds half their sum plus or minus the middle
    one, in float64 (exact for float32 weights but in the extreme exponents), then
    rounds once to float32.
    """
    o, _, _, c = w.shape
    u = np.empty((16, c, o), dtype=np.float32)
    with np.errstate(all="ignore"):  # a non-finite result is the answer None, not a warning
        for o0 in range(0, o, FILTER_BLOCK):
            block = w[o0 : o0 + FILTER_BLOCK].astype(np.float64)  # [b, kh, kw, C]
            both = _combine(_combine(block, 1), 2)  # [b, 4, 4, C]
            u[:, :, o0 : o0 + len(block)] = both.reshape(len(block), 16, c).transpose(1, 2, 0)
    return u if np.isfinite(u).all() else None


def _combine(a: np.ndarray, axis: int) -> np.ndarray:
    """``G`` applied along ``axis`` (3 taps to 4): g0, (g0 + g2 + g1) / 2,
    (g0 + g2 - g1) / 2, g2."""
    g0, g1, g2 = (a.take(k, axis=axis) for k in range(3))
    outer = g0 + g2
    return np.stack([g0, (outer + g1) * 0.5, (outer - g1) * 0.5, g2], axis=axis)


def band_rows(tw: int, c: int, o: int) -> int:
    """Tile rows per band: as many as keep the band's input tiles and products
    within the band's size, and at least ``MIN_BAND_TILES`` tiles' rows (and one)."""
    per_row = 16 * tw * (c + o)
    limit = BAND_ELEMENTS_ONE_THREAD if threads.single_threaded() else BAND_ELEMENTS
    return max(1, limit // max(per_row, 1), -(-MIN_BAND_TILES // max(tw, 1)))


def convolve(
    module, x: np.ndarray, u: np.ndarray, bias: np.ndarray, geo, out, lo, hi, c0=0, o0=0
) -> bool:
    """``out`` [N, OH, OW, O] = clamp(conv(x, filters) + bias) for NHWC float32 ``x``,
    ``u`` from ``filter_transform`` (finite), ``geo`` = (top, left, OH, OW); ``module``
    is ``_jit_conv`` (its compile errors propagate to the caller). With ``c0`` /
    ``o0`` (a group of a GROUPED_CONV_2D) the convolution reads ``u.shape[1]``
    channels of ``x`` from c0 and writes ``u.shape[2]`` of ``out`` from o0, in place.

    False when a transformed input was not finite (``out`` is then partly written):
    the caller convolves another way, so an infinite or NaN input reaches the
    outputs the direct sum's way. Finite inputs whose sums overflow float32 (values
    near 3.4e38 / 9) may give infinities at other outputs than the direct sum's.
    """
    top, left, oh, ow = geo
    n = x.shape[0]
    c, o = u.shape[1], u.shape[2]
    th, tw = (oh + 1) // 2, (ow + 1) // 2
    rows = min(band_rows(tw, c, o), th)
    scratch = np.empty((2 * rows + 2, tw, 4, c), dtype=np.float32)
    v = np.empty((16, rows * tw, c), dtype=np.float32)
    m = np.empty((16, rows * tw, o), dtype=np.float32)
    x = np.ascontiguousarray(x)
    for image in range(n):
        xi, oi = x[image], out[image]
        for ty0 in range(0, th, rows):
            ty1 = min(ty0 + rows, th)
            t = (ty1 - ty0) * tw
            if module.winograd_input(xi, c0, top, left, ty0, ty1, scratch, v) != 0:
                return False
            np.matmul(v[:, :t], u, out=m[:, :t])
            module.winograd_output(m, bias, ty0, ty1, oi, o0, lo, hi)
    return True
