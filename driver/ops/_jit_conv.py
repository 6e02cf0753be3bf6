"""Compiled (numba) convolution kernels; ``kernels`` says when they run.

The numpy kernels of ``conv`` are the reference; these compute the same sums
in one pass over the input, which numpy cannot express without a temporary
per tap. Both work on NHWC arrays with a ``[KH, KW, C*M]`` filter (output
channel ``c * M + j`` reads input channel ``c``). Padding is never
materialized: a tap that falls outside the input is skipped, which is adding
zero (for quantized inputs, ``x - zp_x`` is zero on the padding).

- ``depthwise_float``: float32, the bias, the taps and the fused activation's
  clamp of each output pixel in one pass.
- ``im2col``: the im2col slab of a CONV_2D, quantized inputs centered on the
  way (float32 or float64, as the matmul takes it).
- ``bias_clamp``: the bias and the fused activation's clamp of a float32
  CONV_2D / GROUPED_CONV_2D slab in one pass (numpy makes two).
- ``depthwise_acc``: quantized accumulators ``sum (x - zp) * w`` for a slab of
  output rows of one image, in the accumulator type ``conv`` proved exact
  (float32 or float64 integers, whatever the order of the additions; int32
  wraps as the reference's int32 sums do).
- ``requantize``: the one-floor form of ``_qexact.float_requantizer`` (every
  quantized convolution whose clamp starts at or above the output zero point)
  in one pass per element instead of numpy's five or six over a chunk; the
  same float64 operations on values that are exact, so the same bytes.
- ``max_pool_float`` / ``average_pool_float``: MAX_POOL_2D and AVERAGE_POOL_2D
  of float32 inputs in one pass (numpy pads a copy of the input, then makes one
  ``np.maximum`` or ``np.add`` per tap over strided views).
- ``winograd_input`` / ``winograd_output``: the transforms of a float CONV_2D
  by Winograd's F(2x2, 3x3) (``_winograd`` runs them around its 16 GEMMs);
  ``winograd_filter`` transforms its filter once.
- ``transpose_conv_float``: a float TRANSPOSE_CONV_2D's output from its
  per-pixel products, each output pixel gathering its taps, the bias and the
  clamp in one pass.
- ``requantize_fixed``: the other outputs, by TFLite's integer
  ``MultiplyByQuantizedMultiplier`` itself, in int64 (exact for any
  accumulator, as the reference is).

The loops run over the output pixels with the pixel's contiguous channels
innermost, which LLVM turns into SIMD code. For a 3x3 filter without depth
multiplier (MobileNet's) and a window inside the input, the nine taps are one
expression: the pixel's accumulators stay in registers instead of being
loaded and stored once per tap. That expression indexes the input, the
filter and the output themselves, not a view per tap or pixel: LLVM
vectorizes a loop only after run-time checks that its stores overlap none
of its loads, one per pair of distinct arrays, and with nine input views and
nine filter rows it gave up and ran scalar code (measured on 1x112x112x64:
0.47 ms with views, 0.36-0.43 ms indexed). Other pixels and filters add tap
by tap, skipping the taps outside (an index is used only once it is known to
be inside, never negative). No ``fastmath``: float results differ from
numpy's only by the order of the additions (allowing fused multiply-adds
measured no faster).
"""

from __future__ import annotations

import numba
import numpy as np

_jit = numba.njit(cache=True, nogil=True)


@_jit
def _taps_float(x, w, img, y0, x0, a, dh, dw, m):
    """a [C*M] += the taps of the window at (y0, x0) that fall inside ``x``."""
    h, width, c = x.shape[1], x.shape[2], x.shape[3]
    kh, kw, co = w.shape
    for ky in range(kh):
        iy = y0 + ky * dh
        if iy < 0 or iy >= h:
            continue
        for kx in range(kw):
            ix = x0 + kx * dw
            if ix < 0 or ix >= width:
                continue
            p, wk = x[img, iy, ix], w[ky, kx]
            if m == 1:
                for ch in range(co):
                    a[ch] += p[ch] * wk[ch]
            else:
                for ci in range(c):
                    for j in range(m):
                        a[ci * m + j] += p[ci] * wk[ci * m + j]


#: output pixels of a row that ``_row4_float`` computes per step
ROW_STEP = 4
_U = np.uint64


@_jit
def _row4_float(x, w, bias, out, img, oy, y0, dh, x_from, ox_from, steps, lo, hi):
    """out[img, oy, ox_from : ox_from + 4 * steps] for a 3x3 filter, unit width stride
    and dilation, no depth multiplier, every window inside ``x`` (rows y0, y0 + dh,
    y0 + 2 dh; columns from x_from): four neighbouring output pixels per step, channels innermost.

    The four windows span six input columns, so each input value is loaded once per
    step instead of up to three times, and the channel's nine weights and bias once
    for four pixels: the one-pixel form was bound by its loads (19 vector loads per
    16 outputs). Rows are indexed flat (column * C + channel) with unsigned indices:
    numba wraps negative indices, and a signed index LLVM cannot prove non-negative
    turned the loads into gathers. The column offsets are variables, not ``k * c``
    written in the index: a Python int times an unsigned one is a float in numba.
    """
    n, h, width, c = x.shape
    xf = x.reshape(n, h, width * c)
    of = out.reshape(out.shape[0], out.shape[1], out.shape[2] * c)
    wf = w.reshape(9, c)
    y1, y2 = y0 + dh, y0 + 2 * dh
    u1, u2, u3, u4, u5 = _U(c), _U(2 * c), _U(3 * c), _U(4 * c), _U(5 * c)
    for s in range(steps):
        base = _U((x_from + 4 * s) * c)
        ob = _U((ox_from + 4 * s) * c)
        for ch in range(c):
            j = _U(ch)
            p = base + j
            w00, w01, w02 = wf[0, j], wf[1, j], wf[2, j]
            w10, w11, w12 = wf[3, j], wf[4, j], wf[5, j]
            w20, w21, w22 = wf[6, j], wf[7, j], wf[8, j]
            bj = bias[j]
            a0, a1, a2 = xf[img, y0, p], xf[img, y0, p + u1], xf[img, y0, p + u2]
            a3, a4, a5 = xf[img, y0, p + u3], xf[img, y0, p + u4], xf[img, y0, p + u5]
            b0, b1, b2 = xf[img, y1, p], xf[img, y1, p + u1], xf[img, y1, p + u2]
            b3, b4, b5 = xf[img, y1, p + u3], xf[img, y1, p + u4], xf[img, y1, p + u5]
            c0, c1, c2 = xf[img, y2, p], xf[img, y2, p + u1], xf[img, y2, p + u2]
            c3, c4, c5 = xf[img, y2, p + u3], xf[img, y2, p + u4], xf[img, y2, p + u5]
            # the additions in the one-pixel form's order (same results)
            v0 = bj + a0 * w00
            v0 += a1 * w01 + a2 * w02
            v0 += b0 * w10 + b1 * w11
            v0 += b2 * w12 + c0 * w20
            v0 += c1 * w21 + c2 * w22
            v1 = bj + a1 * w00
            v1 += a2 * w01 + a3 * w02
            v1 += b1 * w10 + b2 * w11
            v1 += b3 * w12 + c1 * w20
            v1 += c2 * w21 + c3 * w22
            v2 = bj + a2 * w00
            v2 += a3 * w01 + a4 * w02
            v2 += b2 * w10 + b3 * w11
            v2 += b4 * w12 + c2 * w20
            v2 += c3 * w21 + c4 * w22
            v3 = bj + a3 * w00
            v3 += a4 * w01 + a5 * w02
            v3 += b3 * w10 + b4 * w11
            v3 += b5 * w12 + c3 * w20
            v3 += c4 * w21 + c5 * w22
            if v0 < lo:
                v0 = lo
            elif v0 > hi:
                v0 = hi
            if v1 < lo:
                v1 = lo
            elif v1 > hi:
                v1 = hi
            if v2 < lo:
                v2 = lo
            elif v2 > hi:
                v2 = hi
            if v3 < lo:
                v3 = lo
            elif v3 > hi:
                v3 = hi
            # stored after all four are computed: a store between the loads would
            # need proof that it overlaps none of them before LLVM vectorizes
            of[img, oy, ob + j] = v0
            of[img, oy, ob + u1 + j] = v1
            of[img, oy, ob + u2 + j] = v2
            of[img, oy, ob + u3 + j] = v3


@_jit
def depthwise_float(x, w, bias, out, top, left, sh, sw, dh, dw, m, lo, hi):
    """out [N, OH, OW, C*M] = clamp(bias + taps), float32; ``w`` is [KH, KW, C*M].

    ``lo``/``hi`` are the activation's bounds (+-inf for none); NaN passes the clamp
    as it passes numpy's ``clip``.
    """
    n, oh, ow, co = out.shape
    h, width = x.shape[1], x.shape[2]
    kh, kw = w.shape[0], w.shape[1]
    fused = kh == 3 and kw == 3 and m == 1
    # unit stride and dilation: the output columns whose windows lie inside the
    # input, [ox_a, ox_b), go four at a time through _row4_float
    by_four = fused and sw == 1 and dw == 1
    ox_a = min(max(0, left), ow)
    ox_b = max(min(ow, width - 2 + left), ox_a)
    steps = (ox_b - ox_a) // ROW_STEP
    for img in range(n):
        for oy in range(oh):
            y0 = oy * sh - top
            y1, y2 = y0 + dh, y0 + 2 * dh
            rows_in = y0 >= 0 and y2 < h
            skip_a = skip_b = 0
            if by_four and rows_in and steps > 0:
                _row4_float(x, w, bias, out, img, oy, y0, dh, ox_a - left, ox_a, steps, lo, hi)
                skip_a, skip_b = ox_a, ox_a + ROW_STEP * steps
            for ox in range(ow):
                if skip_a <= ox < skip_b:
                    continue
                x0 = ox * sw - left
                if fused and rows_in and x0 >= 0 and x0 + 2 * dw < width:
                    x1, x2 = x0 + dw, x0 + 2 * dw
                    for ch in range(co):
                        v = bias[ch] + x[img, y0, x0, ch] * w[0, 0, ch]
                        v += x[img, y0, x1, ch] * w[0, 1, ch] + x[img, y0, x2, ch] * w[0, 2, ch]
                        v += x[img, y1, x0, ch] * w[1, 0, ch] + x[img, y1, x1, ch] * w[1, 1, ch]
                        v += x[img, y1, x2, ch] * w[1, 2, ch] + x[img, y2, x0, ch] * w[2, 0, ch]
                        v += x[img, y2, x1, ch] * w[2, 1, ch] + x[img, y2, x2, ch] * w[2, 2, ch]
                        if v < lo:
                            v = lo
                        elif v > hi:
                            v = hi
                        out[img, oy, ox, ch] = v
                    continue
                a = out[img, oy, ox]
                for ch in range(co):
                    a[ch] = bias[ch]
                _taps_float(x, w, img, y0, x0, a, dh, dw, m)
                for ch in range(co):
                    v = a[ch]
                    if v < lo:
                        a[ch] = lo
                    elif v > hi:
                        a[ch] = hi


@_jit
def bias_clamp(acc, bias, lo, hi):
    """acc [P, O] = clamp(acc + bias, lo, hi) in place, float32 (NaN passes, as in
    numpy's ``clip``): the bias and fused activation of a CONV_2D slab in one pass."""
    p, o = acc.shape
    for i in range(p):
        for ch in range(o):
            v = acc[i, ch] + bias[ch]
            if v < lo:
                v = lo
            elif v > hi:
                v = hi
            acc[i, ch] = v


@_jit
def im2col(x, zp, i0, i1, r0, r1, ow, kh, kw, top, left, sh, sw, dh, dw, cols):
    """cols [rows, KH*KW*C] = the windows (``x - zp``, zero in the padding) of output
    rows r0..r1 of images i0..i1, in ``cols``' type: a CONV_2D im2col slab.

    A window row that lies inside the input with unit dilation is one run of KW*C
    values; numpy's copy from a strided view makes one inner loop per such run and
    copies a padded input first. ``zp`` (the input zero point of a quantized
    convolution, else 0) centers while copying: no centered copy of the input.
    """
    n, h, width, c = x.shape
    xf = x.reshape(n, h, width * c)
    run = kw * c
    row = 0
    for img in range(i0, i1):
        for oy in range(r0, r1):
            y0 = oy * sh - top
            for ox in range(ow):
                x0 = ox * sw - left
                whole = dw == 1 and x0 >= 0 and x0 + kw <= width
                for ky in range(kh):
                    iy = y0 + ky * dh
                    d = _U(ky * run)
                    if iy < 0 or iy >= h:
                        for j in range(run):
                            cols[row, d + _U(j)] = 0
                        continue
                    if whole:
                        s = _U(x0 * c)
                        for j in range(run):
                            cols[row, d + _U(j)] = xf[img, iy, s + _U(j)] - zp
                        continue
                    for kx in range(kw):
                        ix = x0 + kx * dw
                        dk = d + _U(kx * c)
                        if ix < 0 or ix >= width:
                            for j in range(c):
                                cols[row, dk + _U(j)] = 0
                        else:
                            s = _U(ix * c)
                            for j in range(c):
                                cols[row, dk + _U(j)] = xf[img, iy, s + _U(j)] - zp
                row += 1


@_jit
def _taps_centered(x, zp, w, img, y0, x0, a, dh, dw, m):
    """a [C*M] += (x - zp) * w over the taps of the window at (y0, x0) inside ``x``."""
    h, width, c = x.shape[1], x.shape[2], x.shape[3]
    kh, kw, co = w.shape
    for ky in range(kh):
        iy = y0 + ky * dh
        if iy < 0 or iy >= h:
            continue
        for kx in range(kw):
            ix = x0 + kx * dw
            if ix < 0 or ix >= width:
                continue
            p, wk = x[img, iy, ix], w[ky, kx]
            if m == 1:
                for ch in range(co):
                    a[ch] += (p[ch] - zp) * wk[ch]
            else:
                for ci in range(c):
                    for j in range(m):
                        a[ci * m + j] += (p[ci] - zp) * wk[ci * m + j]


@_jit
def depthwise_acc(x, zp, w, img, r0, acc, top, left, sh, sw, dh, dw, m):
    """acc [rows, OW, C*M] = sum (x - zp) * w for output rows r0.. of image ``img``.

    ``zp`` and ``w`` have the accumulator's type, so ``x - zp`` is computed in it.
    """
    rows, ow, co = acc.shape
    h, width = x.shape[1], x.shape[2]
    kh, kw = w.shape[0], w.shape[1]
    fused = kh == 3 and kw == 3 and m == 1
    for r in range(rows):
        y0 = (r0 + r) * sh - top
        y1, y2 = y0 + dh, y0 + 2 * dh
        rows_in = y0 >= 0 and y2 < h
        for ox in range(ow):
            x0 = ox * sw - left
            if fused and rows_in and x0 >= 0 and x0 + 2 * dw < width:
                x1, x2 = x0 + dw, x0 + 2 * dw
                for ch in range(co):
                    v = (x[img, y0, x0, ch] - zp) * w[0, 0, ch]
                    v += (x[img, y0, x1, ch] - zp) * w[0, 1, ch]
                    v += (x[img, y0, x2, ch] - zp) * w[0, 2, ch]
                    v += (x[img, y1, x0, ch] - zp) * w[1, 0, ch]
                    v += (x[img, y1, x1, ch] - zp) * w[1, 1, ch]
                    v += (x[img, y1, x2, ch] - zp) * w[1, 2, ch]
                    v += (x[img, y2, x0, ch] - zp) * w[2, 0, ch]
                    v += (x[img, y2, x1, ch] - zp) * w[2, 1, ch]
                    acc[r, ox, ch] = v + (x[img, y2, x2, ch] - zp) * w[2, 2, ch]
                continue
            a = acc[r, ox]
            for ch in range(co):
                a[ch] = 0
            _taps_centered(x, zp, w, img, y0, x0, a, dh, dw, m)


@_jit
def requantize(acc, scale, offset, lo, hi, out):
    """out [P, C] = clamp(floor(acc * scale + offset), lo, hi) per channel, in float64.

    ``scale``/``offset`` are ``float_requantizer``'s one-floor coefficients (the bias
    folded into ``offset``); every intermediate is exact there, so this equals it.
    """
    p, c = acc.shape
    for i in range(p):
        for ch in range(c):
            v = np.floor(np.float64(acc[i, ch]) * scale[ch] + offset[ch])
            if v < lo:
                v = lo
            elif v > hi:
                v = hi
            out[i, ch] = int(v)


@_jit
def requantize_fixed(acc, bias, mult, left, right, zp, lo, hi, out):
    """out [P, C] = clamp(MultiplyByQuantizedMultiplier(acc + bias) + zp, lo, hi), per
    channel, in int64 with the reference's int32 wraps; ``acc`` holds integers."""
    p, c = acc.shape
    for i in range(p):
        for ch in range(c):
            v = np.int64(acc[i, ch]) + bias[ch]
            v = ((v + 2**31) & 0xFFFFFFFF) - 2**31  # the int32 sum wraps
            v = (((v << left[ch]) + 2**31) & 0xFFFFFFFF) - 2**31  # so does the shift
            # SaturatingRoundingDoublingHighMul (never saturates: mult < 2**31), with
            # C's division truncating toward zero
            ab = v * mult[ch]
            ab += 2**30 if ab >= 0 else 1 - 2**30
            q = ab >> 31 if ab >= 0 else -((-ab) >> 31)
            # RoundingDivideByPOT: halves away from zero
            mask = (np.int64(1) << right[ch]) - 1
            threshold = (mask >> 1) + (1 if q < 0 else 0)
            r = (q >> right[ch]) + (1 if (q & mask) > threshold else 0) + zp
            if r < lo:
                r = lo
            elif r > hi:
                r = hi
            out[i, ch] = r


@_jit
def winograd_input(x, c0, top, left, ty0, ty1, rows, v):
    """v [16, T, C] = the Winograd F(2x2, 3x3) input tiles ``B^T d B`` of tile rows
    ty0..ty1 of channels c0 .. c0 + C of one NHWC image ``x`` [H, W, >= c0 + C] (zero
    outside it), T = (ty1 - ty0) * TW, C = ``v.shape[2]`` (a group of a
    GROUPED_CONV_2D reads its channels in place).

    Tile (ty, tx) reads the 4x4 window at input (2 ty - top, 2 tx - left). Its
    transform is separable: ``rows`` [(ty1 - ty0) * 2 + 2, TW, 4, C] first holds
    each input row's four horizontal combinations per tile column (computed once,
    though two tile rows read each input row), then each tile's four rows combine
    them. Only additions and subtractions: every value of ``v`` is a sum of at most
    four inputs with coefficients +-1.

    Returns 0 when every value of ``v`` is finite, else 1: an infinite or NaN
    input reaches more outputs through the transforms than through the direct sum
    (a tile's 16 values mix its whole window), so the caller then convolves
    another way.
    """
    h, w = x.shape[0], x.shape[1]
    c_count = v.shape[2]
    first = _U(c0)  # unsigned: a signed index numba cannot prove non-negative blocks SIMD
    tw = rows.shape[1]
    y_first = 2 * ty0 - top
    for r in range(2 * (ty1 - ty0) + 2):
        y = y_first + r
        if y < 0 or y >= h:
            for tx in range(tw):
                for j in range(4):
                    for c in range(c_count):
                        rows[r, tx, j, c] = 0.0
            continue
        for tx in range(tw):
            x0 = 2 * tx - left
            if x0 >= 0 and x0 + 4 <= w:
                for c in range(c_count):
                    a0 = x[y, x0, first + _U(c)]
                    a1 = x[y, x0 + 1, first + _U(c)]
                    a2 = x[y, x0 + 2, first + _U(c)]
                    a3 = x[y, x0 + 3, first + _U(c)]
                    rows[r, tx, 0, c] = a0 - a2
                    rows[r, tx, 1, c] = a1 + a2
                    rows[r, tx, 2, c] = a2 - a1
                    rows[r, tx, 3, c] = a1 - a3
            else:  # a tile on the left or right edge: its columns outside are zero
                for c in range(c_count):
                    a0 = x[y, x0, first + _U(c)] if 0 <= x0 < w else np.float32(0.0)
                    a1 = x[y, x0 + 1, first + _U(c)] if 0 <= x0 + 1 < w else np.float32(0.0)
                    a2 = x[y, x0 + 2, first + _U(c)] if 0 <= x0 + 2 < w else np.float32(0.0)
                    a3 = x[y, x0 + 3, first + _U(c)] if 0 <= x0 + 3 < w else np.float32(0.0)
                    rows[r, tx, 0, c] = a0 - a2
                    rows[r, tx, 1, c] = a1 + a2
                    rows[r, tx, 2, c] = a2 - a1
                    rows[r, tx, 3, c] = a1 - a3
    t = 0
    finite = 0  # stays 0 while every value is finite (x - x is 0 only for those)
    for ty in range(ty1 - ty0):
        r = 2 * ty
        for tx in range(tw):
            for j in range(4):
                for c in range(c_count):
                    r0 = rows[r, tx, j, c]
                    r1 = rows[r + 1, tx, j, c]
                    r2 = rows[r + 2, tx, j, c]
                    r3 = rows[r + 3, tx, j, c]
                    v0 = r0 - r2
                    v1 = r1 + r2
                    v2 = r2 - r1
                    v3 = r1 - r3
                    v[j, t, c] = v0
                    v[4 + j, t, c] = v1
                    v[8 + j, t, c] = v2
                    v[12 + j, t, c] = v3
                    finite |= (v0 - v0 != 0) | (v1 - v1 != 0) | (v2 - v2 != 0) | (v3 - v3 != 0)
            t += 1
    return finite


#: channels a pass of ``winograd_filter`` transforms (its scratch holds 16 values
#: for each of them and every filter: 512 KB for 512 filters, in the core's L2)
FILTER_CHANNELS = 16


@_jit
def _columns(out, i, step, g0, g1, g2):
    """out[i + k step], k = 0..3 = ``G`` applied to (g0, g1, g2), rounded to float32:
    g0, (g0 + g2 + g1) / 2, (g0 + g2 - g1) / 2, g2."""
    q = g0 + g2
    out[i] = np.float32(g0)
    out[i + step] = np.float32((q + g1) * 0.5)
    out[i + _U(2) * step] = np.float32((q - g1) * 0.5)
    out[i + _U(3) * step] = np.float32(g2)


@_jit
def winograd_filter(w, u):
    """u [16, C, O] = ``G g G^T`` of each float32 filter ``w`` [O, 3, 3, C] (C-contiguous)
    and channel: the numpy form's operations (``_winograd.filter_transform_numpy``) in
    the same order, in float64, one rounding to float32, so the same values.

    Two passes per block of 16 channels. The first reads the filters in their order
    and leaves the block's 16 values per filter and channel in a scratch array with
    the filters in rows; the second copies each row into ``u``'s rows, where the
    filters are contiguous. Written straight into ``u``, the 16 planes (``C * O * 4``
    bytes apart: the same cache sets for the usual powers of two) and the rows of a
    block (``O * 4`` apart) evicted each other's lines: 512 to 512 channels took
    6.5-30 ms that way, 3.4-3.8 ms in two passes (numpy's form 8.4-10.7). The
    scratch planes are 16 floats longer than the data for the same reason. Indices
    are unsigned: numba wraps negative ones, which costs a test per access.

    Returns 0 when every value of ``u`` is finite, else 1.
    """
    o_count, _, _, c_count = w.shape
    bad = 0
    block = FILTER_CHANNELS
    plane = _U(o_count * block + 16)
    scratch = np.empty(16 * (o_count * block + 16), dtype=np.float32)
    wf = w.reshape(w.size)
    uc = _U(c_count)
    ub = _U(block)
    for c0 in range(0, c_count, block):
        bc = min(c0 + block, c_count) - c0
        for o in range(o_count):
            row = _U(o) * ub
            tap0 = _U(o * 9 * c_count + c0)
            for jj in range(bc):
                j = _U(jj)
                r = tap0 + j
                # the filter's rows (ky) are a, b, d; its columns (kx) 0, 1, 2
                a0 = np.float64(wf[r])
                a1 = np.float64(wf[r + uc])
                a2 = np.float64(wf[r + _U(2) * uc])
                b0 = np.float64(wf[r + _U(3) * uc])
                b1 = np.float64(wf[r + _U(4) * uc])
                b2 = np.float64(wf[r + _U(5) * uc])
                d0 = np.float64(wf[r + _U(6) * uc])
                d1 = np.float64(wf[r + _U(7) * uc])
                d2 = np.float64(wf[r + _U(8) * uc])
                # along the rows first: g0, (g0 + g2 + g1) / 2, (g0 + g2 - g1) / 2, g2
                s0, s1, s2 = a0 + d0, a1 + d1, a2 + d2
                p0, p1, p2 = (s0 + b0) * 0.5, (s1 + b1) * 0.5, (s2 + b2) * 0.5
                m0, m1, m2 = (s0 - b0) * 0.5, (s1 - b1) * 0.5, (s2 - b2) * 0.5
                # then along the columns of each of the four
                i = row + j
                _columns(scratch, i, plane, a0, a1, a2)
                _columns(scratch, i + _U(4) * plane, plane, p0, p1, p2)
                _columns(scratch, i + _U(8) * plane, plane, m0, m1, m2)
                _columns(scratch, i + _U(12) * plane, plane, d0, d1, d2)
        for k in range(16):
            first = _U(k) * plane
            for jj in range(bc):
                dst = u[k, c0 + jj]
                src = first + _U(jj)
                for o in range(o_count):
                    v = scratch[src + _U(o) * ub]
                    dst[o] = v
                    bad |= v - v != 0  # not 0 for an infinity or NaN alone
    return bad


@_jit
def winograd_output(m, bias, ty0, ty1, out, o0, lo, hi):
    """Output rows 2 ty0 .. 2 ty1 of channels o0 .. o0 + O of one NHWC image ``out``
    [OH, OW, >= o0 + O] from the products ``m`` [16, T, O] of those tile rows:
    ``A^T m A`` per tile, plus the bias, clamped to [lo, hi] (NaN passes); a tile's
    pixels beyond OH or OW are dropped."""
    oh, ow = out.shape[0], out.shape[1]
    o_count = m.shape[2]
    first = _U(o0)  # unsigned: a signed index numba cannot prove non-negative blocks SIMD
    tw = (ow + 1) // 2
    t = 0
    for ty in range(ty0, ty1):
        oy = 2 * ty
        for tx in range(tw):
            ox = 2 * tx
            for oi in range(o_count):
                o = _U(oi)
                oc = first + o
                r00 = m[0, t, o] + m[4, t, o] + m[8, t, o]
                r01 = m[1, t, o] + m[5, t, o] + m[9, t, o]
                r02 = m[2, t, o] + m[6, t, o] + m[10, t, o]
                r03 = m[3, t, o] + m[7, t, o] + m[11, t, o]
                r10 = m[4, t, o] - m[8, t, o] - m[12, t, o]
                r11 = m[5, t, o] - m[9, t, o] - m[13, t, o]
                r12 = m[6, t, o] - m[10, t, o] - m[14, t, o]
                r13 = m[7, t, o] - m[11, t, o] - m[15, t, o]
                b = bias[o]
                y00 = r00 + r01 + r02 + b
                y01 = r01 - r02 - r03 + b
                y10 = r10 + r11 + r12 + b
                y11 = r11 - r12 - r13 + b
                out[oy, ox, oc] = lo if y00 < lo else (hi if y00 > hi else y00)  # noqa: FURB136 (NaN passes)
                if ox + 1 < ow:
                    out[oy, ox + 1, oc] = lo if y01 < lo else (hi if y01 > hi else y01)  # noqa: FURB136 (NaN passes)
                if oy + 1 < oh:
                    out[oy + 1, ox, oc] = lo if y10 < lo else (hi if y10 > hi else y10)  # noqa: FURB136 (NaN passes)
                    if ox + 1 < ow:
                        out[oy + 1, ox + 1, oc] = lo if y11 < lo else (hi if y11 > hi else y11)  # noqa: FURB136 (NaN passes)
            t += 1


@_jit
def transpose_conv_float(cols, sh, sw, top, left, bias, lo, hi, out):
    """out [N, OH, OW, O] = clamp(taps + bias) of a float TRANSPOSE_CONV_2D from
    ``cols`` [N, H, W, KH, KW, O], the product of each input pixel by the filter.

    Output pixel (oy, ox) sits at (oy + top, ox + left) of the uncropped output,
    where input pixel (iy, ix) puts its tap (ky, kx) at (iy sh + ky, ix sw + kx):
    each output pixel gathers the taps that land on it and is written once, where
    numpy's form zeroes the uncropped output, adds each tap's strided plane into
    it, crops a copy, then adds the bias and clamps in two more passes. The sums
    are numpy's: from zero, taps in (ky, kx) order, then the bias.
    """
    n, h, w, kh, kw, o_count = cols.shape
    oh, ow = out.shape[1], out.shape[2]
    acc = np.empty(o_count, dtype=np.float32)
    for img in range(n):
        for oy in range(oh):
            y = oy + top
            for ox in range(ow):
                x = ox + left
                for o in range(o_count):
                    acc[o] = 0.0
                for ky in range(kh):
                    dy = y - ky
                    if dy < 0 or dy % sh != 0 or dy // sh >= h:
                        continue
                    iy = dy // sh
                    for kx in range(kw):
                        dx = x - kx
                        if dx < 0 or dx % sw != 0 or dx // sw >= w:
                            continue
                        tap = cols[img, iy, dx // sw, ky, kx]
                        for o in range(o_count):
                            acc[o] += tap[o]
                dst = out[img, oy, ox]
                for o in range(o_count):
                    v = acc[o] + bias[o]
                    dst[o] = lo if v < lo else (hi if v > hi else v)  # noqa: FURB136 (NaN passes)


@_jit
def _taps(o, stride, head, k, size):
    """(first input index, first tap inside, end of the taps inside) of the window
    of output position ``o`` along one axis of a pool."""
    start = o * stride - head
    return start, max(0, -start), min(k, size - start)


@_jit
def max_pool_float(x, top, left, sh, sw, kh, kw, out):
    """out [N, OH, OW, C] = the maximum of each window of NHWC float32 ``x``, taps
    outside the input skipped (numpy's path pads with -inf, which no maximum takes),
    in the same order and with ``np.maximum(acc, tap)``'s rules: NaN wins, and of
    two equal values (signed zeros) the later tap is taken, as numpy's x86 SIMD
    maximum does (the sign of a zero maximum is not specified; numpy elsewhere
    may choose otherwise)."""
    n, h, w, c_count = x.shape
    oh, ow = out.shape[1], out.shape[2]
    for b in range(n):
        for oy in range(oh):
            y0, i0, i1 = _taps(oy, sh, top, kh, h)
            for ox in range(ow):
                x0, j0, j1 = _taps(ox, sw, left, kw, w)
                for ch in range(c_count):
                    out[b, oy, ox, ch] = -np.inf
                for i in range(i0, i1):
                    for j in range(j0, j1):
                        for ch in range(c_count):
                            v = x[b, y0 + i, x0 + j, ch]
                            m = out[b, oy, ox, ch]
                            out[b, oy, ox, ch] = m if (m > v) | np.isnan(m) else v


@_jit
def average_pool_float(x, top, left, sh, sw, kh, kw, out):
    """out [N, OH, OW, C] = the average of each window of NHWC float32 ``x`` over the
    input elements it covers (taps in the padding skipped), summed in row-major
    tap order from 0.0 and divided by the count in float32. numpy's path sums the
    same taps in an order that depends on the output's size (a fold per tap, or
    one reduction): the two agree to float32 rounding, and a sum of -0.0 may come
    out 0.0 here."""
    n, h, w, c_count = x.shape
    oh, ow = out.shape[1], out.shape[2]
    for b in range(n):
        for oy in range(oh):
            y0, i0, i1 = _taps(oy, sh, top, kh, h)
            for ox in range(ow):
                x0, j0, j1 = _taps(ox, sw, left, kw, w)
                count = np.float32((i1 - i0) * (j1 - j0))
                for ch in range(c_count):
                    out[b, oy, ox, ch] = 0.0
                for i in range(i0, i1):
                    for j in range(j0, j1):
                        for ch in range(c_count):
                            out[b, oy, ox, ch] += x[b, y0 + i, x0 + j, ch]
                for ch in range(c_count):
                    out[b, oy, ox, ch] /= count
