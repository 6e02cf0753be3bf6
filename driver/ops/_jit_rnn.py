"""Compiled (numba) recurrent cells: RNN and the tanh LSTM cell without
peepholes, layer normalization or projection; ``kernels`` says when they run.

The numpy kernels of ``rnn`` and ``lstm`` are the reference. A recurrent cell
on one time step is a matrix-vector product and a few hundred elementwise
operations, so numpy spends more time dispatching its ten-odd calls per step
than computing; here a step (or a whole time loop) is one call.

- ``rnn_step``: ``out = act(bias + [x, h] [W | R].T)`` for activations NONE,
  RELU, RELU1, RELU6 and TANH.
- ``rnn_sequence``: the time loop of both sequence RNNs over the input terms
  of every step (one BLAS matmul ahead of it).
- ``lstm_step``: one LSTM step from the input, the stacked (transposed,
  gate order input, forget, output, cell; the sigmoid gates' weights and
  biases halved as ``FloatCell`` arranges them) weights, into new states and
  the reference's scratch buffer.
- ``lstm_sequence``: the time loop of ``FloatCell`` from the input terms of
  every step (one BLAS matmul ahead of it), updating the states in place.

The LSTM's products accumulate eight input rows at a time into the gate row
(``_accumulate``): each pass loads and stores the gates once for eight
multiply-adds, and the inner loop over contiguous columns is SIMD code. The
RNN's is one dot product per unit of its weights side by side (``[W | R]``,
the HAL's [units, size] layouts as they are) with ``[x, h]``: a row of the
weights streams through once, and one horizontal sum per unit (measured
for 128 inputs and 256 units: 2.8 against 3.6 us for accumulating rows;
alike for the LSTM's shapes).

tanh is a rational approximation (the odd degree-13 / even degree-6 one of
Eigen and onnxruntime's MLAS, the input clamped to +-7.905, where float32
tanh rounds to 1): numba has no vector tanh (without Intel's SVML it calls
the scalar libm function per element, about 20 times slower than numpy's),
and a division stays vectorizable only with ``error_model="numpy"`` (no
ZeroDivisionError branch; q >= 0.0049 is never zero anyway). Its error is
below 4e-7 absolute against float64 tanh, within 3e-7 of numpy's float32
tanh; sigmoid is ``0.5 + 0.5 tanh(x / 2)`` as in the numpy cell. NaN stays
NaN (min and max keep it).

No ``fastmath`` flags but contraction (fused multiply-add) and
reassociation (the order of the sums in the products): no assumption that values
are finite.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import types

f32 = np.float32
_FLAGS = {"contract", "reassoc"}
_inline = numba.njit(inline="always", fastmath=_FLAGS, error_model="numpy")


def _jit(*signature):
    """Compiled for exactly one signature, when the module is imported (from numba's
    cache when it has it); other argument types raise TypeError."""
    return numba.njit(
        [types.void(*signature)], cache=True, nogil=True, fastmath=_FLAGS, error_model="numpy"
    )


# Arrays only read are declared read-only (a writable array converts to that at no
# cost; a constant operand's array is read-only), the inputs of any layout.
_IN = types.Array(types.float32, 2, "A", readonly=True)
_W = types.Array(types.float32, 2, "C", readonly=True)
_W1 = types.Array(types.float32, 1, "C", readonly=True)
_W3 = types.Array(types.float32, 3, "C", readonly=True)
_OUT = types.float32[:, ::1]
_OUT1 = types.float32[::1]
_OUT3 = types.float32[:, :, ::1]
_CLIP, _FLAG, _CODE = types.float32, types.boolean, types.int64

#: |x| above which float32 tanh is 1.0 (the clamp keeps the rational below 1)
_LIMIT = f32(7.90531110763549805)
_A1, _A3 = f32(4.89352455891786e-03), f32(6.37261928875436e-04)
_A5, _A7 = f32(1.48572235717979e-05), f32(5.12229709037114e-08)
_A9, _A11 = f32(-8.60467152213735e-11), f32(2.00018790482477e-13)
_A13 = f32(-2.76076847742355e-16)
_B0, _B2 = f32(4.89352518554385e-03), f32(2.26843463243900e-03)
_B4, _B6 = f32(1.18534705686654e-04), f32(1.19825839466702e-06)
_HALF, _ONE = f32(0.5), f32(1.0)


@_inline
def _tanh(x):
    x = min(max(x, -_LIMIT), _LIMIT)
    x2 = x * x
    p = ((((((_A13 * x2 + _A11) * x2 + _A9) * x2 + _A7) * x2 + _A5) * x2 + _A3) * x2 + _A1) * x
    q = ((_B6 * x2 + _B4) * x2 + _B2) * x2 + _B0
    return p / q


@_jit(_OUT1)
def tanh_inplace(a):
    """a = tanh(a) for a 1-D float32 array (the approximation the cells use)."""
    for j in range(a.shape[0]):
        a[j] = _tanh(a[j])


@_inline
def _dot(row, v):
    """row @ v for two contiguous vectors (SIMD partial sums, added at the end)."""
    total = f32(0)
    for k in range(v.shape[0]):
        total += row[k] * v[k]
    return total


@_inline
def _accumulate(v, w, g):
    """g += v @ w for v [K], w [K, N], g [N]."""
    k, size, n = 0, w.shape[0], w.shape[1]
    while k + 8 <= size:
        a0, a1, a2, a3 = v[k], v[k + 1], v[k + 2], v[k + 3]
        a4, a5, a6, a7 = v[k + 4], v[k + 5], v[k + 6], v[k + 7]
        r0, r1, r2, r3 = w[k], w[k + 1], w[k + 2], w[k + 3]
        r4, r5, r6, r7 = w[k + 4], w[k + 5], w[k + 6], w[k + 7]
        for j in range(n):
            g[j] += ((a0 * r0[j] + a1 * r1[j]) + (a2 * r2[j] + a3 * r3[j])) + (
                (a4 * r4[j] + a5 * r5[j]) + (a6 * r6[j] + a7 * r7[j])
            )
        k += 8
    while k < size:
        a, r = v[k], w[k]
        for j in range(n):
            g[j] += a * r[j]
        k += 1


@_inline
def _activate(o, act):
    """The RNN activation (0..4: NONE .. TANH) in place over a row."""
    if act == 4:
        for j in range(o.shape[0]):
            o[j] = _tanh(o[j])
    elif act == 1:
        for j in range(o.shape[0]):
            o[j] = max(o[j], f32(0))
    elif act == 2:
        for j in range(o.shape[0]):
            o[j] = min(max(o[j], f32(-1)), f32(1))
    elif act == 3:
        for j in range(o.shape[0]):
            o[j] = min(max(o[j], f32(0)), f32(6))


@_jit(_IN, _IN, _W, _W1, _CODE, _OUT)
def rnn_step(x, h, weights, bias, act, out):
    """out[b] = act(bias + [x[b], h[b]] @ weights.T); weights is [W | R] ([units,
    input + units], the HAL's layouts side by side); act is 0..4 (NONE .. TANH)."""
    size = x.shape[1]
    xh = np.empty(weights.shape[1], np.float32)
    for b in range(x.shape[0]):
        xh[:size] = x[b]
        xh[size:] = h[b]
        o = out[b]
        for j in range(o.shape[0]):
            o[j] = bias[j] + _dot(weights[j], xh)
        _activate(o, act)


@_jit(_W3, _IN, _W, _CODE, _OUT3, _FLAG)
def rnn_sequence(pre, h, r, act, out, reverse):
    """The RNN time loop: out[t, b] = act(pre[t, b] + out[t - 1, b] @ r.T) over the
    time-major input terms pre [T, batch, units] (bias included), from h [batch,
    units] (r is the HAL's [units, units]); ``reverse`` runs t = T-1 .. 0."""
    steps, batch = pre.shape[0], pre.shape[1]
    first = np.ascontiguousarray(h)
    for s in range(steps):
        t = steps - 1 - s if reverse else s
        before = t + 1 if reverse else t - 1
        for b in range(batch):
            prev = first[b] if s == 0 else out[before, b]
            o = out[t, b]
            for j in range(o.shape[0]):
                o[j] = pre[t, b, j] + _dot(r[j], prev)
            _activate(o, act)


@_inline
def _cell(g, c, n, cifg, clip, h_out, c_out, act_c):
    """One batch row: gate pre-activations g (sigmoid gates halved) -> c_out, h_out,
    and act_c = tanh(c_out); g is left holding the gates (sigmoids, then tanh)."""
    ns = g.shape[0] - n
    for j in range(g.shape[0]):
        g[j] = _tanh(g[j])
    for j in range(ns):
        g[j] = g[j] * _HALF + _HALF
    k = 0 if cifg else n  # the forget gate's column
    for j in range(n):
        f = g[k + j]
        i = _ONE - f if cifg else g[j]
        cell = f * c[j] + i * g[ns + j]
        if clip > 0:
            cell = min(max(cell, -clip), clip)
        c_out[j] = cell
        a = _tanh(cell)
        act_c[j] = a
        h_out[j] = g[k + n + j] * a


@_jit(_IN, _IN, _IN, _W, _W, _W1, _FLAG, _CLIP, _OUT, _OUT, _OUT)
def lstm_step(x, h, c, wx, wh, bias, cifg, clip, h_out, c_out, scratch):
    """One LSTM step for every batch row; scratch [batch, gates * n] is filled as
    the reference leaves it: blocks [batch, n] of (i, act(c), f, h) or, with
    CIFG, (act(c), i, h), one after another in memory."""
    batch, n = c.shape
    g = np.empty(bias.shape[0], np.float32)
    blocks = scratch.reshape(-1, batch, n)
    act = 0 if cifg else 1  # the block of act(c)
    for b in range(batch):
        g[:] = bias
        _accumulate(x[b], wx, g)
        _accumulate(h[b], wh, g)
        _cell(g, c[b], n, cifg, clip, h_out[b], c_out[b], blocks[act, b])
        if cifg:
            for j in range(n):
                blocks[1, b, j] = _ONE - g[j]
                blocks[2, b, j] = h_out[b, j]
        else:
            for j in range(n):
                blocks[0, b, j] = g[j]
                blocks[2, b, j] = g[n + j]
                blocks[3, b, j] = h_out[b, j]


@_jit(_W3, _OUT, _OUT, _W, _FLAG, _CLIP, _OUT3, _FLAG)
def lstm_sequence(gx, h, c, wh, cifg, clip, out, reverse):
    """The time loop over the input terms gx [T, batch, gates] (bias included):
    h and c (contiguous [batch, n]) are updated in place, out [T, batch, n]
    receives h of every step; ``reverse`` runs t = T-1 .. 0."""
    steps, batch = gx.shape[0], gx.shape[1]
    n = c.shape[1]
    g = np.empty(gx.shape[2], np.float32)
    act_c = np.empty(n, np.float32)
    for s in range(steps):
        t = steps - 1 - s if reverse else s
        for b in range(batch):
            g[:] = gx[t, b]
            _accumulate(h[b], wh, g)
            _cell(g, c[b], n, cifg, clip, h[b], c[b], act_c)
            out[t, b] = h[b]
