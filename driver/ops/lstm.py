"""LSTM: one step of a long short-term memory cell, and the float cell math
shared with BIDIRECTIONAL_SEQUENCE_LSTM and UNIDIRECTIONAL_SEQUENCE_LSTM.

The cell is the reference's ``LSTMCell::LSTMStep``: gates
``i, f, z, o = W_x x + W_h h (+ aux) + b`` with optional peephole terms
(``c * w_c*``), optional layer normalization (mean/stddev over the cells,
epsilon 1e-8, then ``* w_ln + b``: the bias moves after the normalization),
CIFG (no input gate: ``i = 1 - f``), ``c' = f c + i act(z)`` clipped to
``cell_clip``, ``h' = sigmoid(o) act(c')``, and an optional projection
``h' W_p + b_p`` clipped to ``proj_clip``. Float16 runs in float32 and is
rounded once at the end, as the reference converts buffers around its
float32 evaluation.

For speed the four gate matrices are stacked once (``[in, 4 n_cell]``) in
the order input, forget, output, cell, so the three sigmoid gates are one
contiguous block; the input contribution of a whole sequence is one matmul
ahead of the time loop, and each step is one ``h @ W_h`` plus elementwise
work. Parameters that are constants are arranged when the kernel is bound;
parameters that are model inputs (which may also be omitted per execution)
are arranged on each call.

The LSTM operation has 23 inputs (HAL 1.0) or 27 (HAL 1.2: the four layer
normalization weights), and four outputs: the scratch buffer (the gate
values of the step, laid out gate after gate as the reference leaves them),
output_state_out, cell_state_out and output.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from nnhal.driver.ops import kernels
from nnhal.driver.ops._lstm_util import (
    CellLayout,
    Geometry,
    activation_fn,
    cell_args,
    check_activation_value,
    check_cell,
    check_nonnegative,
    clip_scalar_type,
    compiled_cell,
    fully_declared,
    layer_norm,
    layer_norm_args,
    runtime_state,
    sigmoid,
    tensor_positions,
)
from nnhal.driver.ops._operand_rules import INT32_SCALAR, dtype_of, runtime_failure
from nnhal.driver.ops._rnn_util import jit_cells, ran_cell
from nnhal.driver.ops.registry import Arg, OpContext, OperationDef, Shape, register

from nnhal.types import HalVersion, OperandType, OperationType

_T = OperandType
_V = HalVersion
f32 = np.float32

#: internal gate order (indexes into the HAL's input, forget, cell, output)
_ORDER = (0, 1, 3, 2)
_ORDER_CIFG = (1, 3, 2)
#: rows of a gate's weights transposed at a time when stacking them (``FloatCell``)
_TILE = 64


def _f32(a: np.ndarray | None) -> np.ndarray | None:
    return None if a is None else np.asarray(a, dtype=f32)


class FloatCell:
    """One cell's parameters arranged for the time loop, and the loop itself."""

    def __init__(
        self,
        arrays: Sequence[np.ndarray | None],
        layout: CellLayout,
        geo: Geometry,
        activation: int,
        cell_clip: float,
        proj_clip: float,
        aux_weights: tuple[int, int, int, int] | None = None,
    ) -> None:
        def arr(i):
            return arrays[i] if i is not None and i < len(arrays) else None

        self.cifg = arr(layout.i2x[0]) is None
        order = _ORDER_CIFG if self.cifg else _ORDER
        self.n_cell = n = geo.n_cell or arr(layout.i2x[3]).shape[0]
        self.gates = len(order)

        def stack(indexes) -> np.ndarray:
            # each gate's [n, in] block transposed straight into its columns (the
            # transpose of the concatenated blocks had been the larger part of binding),
            # _TILE rows at a time: a tile's reads and writes stay in cache, where a whole
            # block at once strides through memory (four 256x256 blocks: 90 against 234 µs)
            blocks = [np.asarray(arr(indexes[k]), f32) for k in order]
            stacked = np.empty((blocks[0].shape[1], sum(b.shape[0] for b in blocks)), f32)
            start = 0
            for block in blocks:
                for row in range(0, block.shape[0], _TILE):
                    tile = block[row : row + _TILE]
                    stacked[:, start + row : start + row + tile.shape[0]] = tile.T
                start += block.shape[0]
            return stacked

        self.wx = stack(layout.i2x)
        self.wh = stack(layout.r2x)
        self.n_output = self.wh.shape[0]
        self.waux = None
        if aux_weights is not None and arr(aux_weights[1]) is not None:
            self.waux = stack(aux_weights)
        bias = np.concatenate([np.asarray(arr(layout.bias[k]), f32) for k in order])
        ln = layout.ln
        self.layer_norm = ln is not None and arr(ln[3]) is not None
        if self.layer_norm:
            self.ln_w = np.stack([np.asarray(arr(ln[k]), f32) for k in order])
            self.ln_b = bias.reshape(self.gates, n)
            self.bias = None
        else:
            self.bias = bias
        self.peephole = arr(layout.c2x[2]) is not None
        self.w_ci, self.w_cf, self.w_co = (
            (None if self.cifg else _f32(arr(layout.c2x[0]))),
            _f32(arr(layout.c2x[1])),
            _f32(arr(layout.c2x[2])),
        )
        pw = arr(layout.proj_w)
        self.proj_w = None if pw is None else np.ascontiguousarray(np.asarray(pw, f32).T)
        self.proj_b = _f32(arr(layout.proj_b))
        self._wxh: np.ndarray | None = None  # [W_x; W_h] for single steps, made on first use
        self._sequence: Callable | None = None  # a fused time loop for this configuration
        self.compiled = False
        self.act = activation_fn(activation)
        self.cell_clip = f32(cell_clip)
        self.proj_clip = f32(proj_clip)
        if self.layer_norm or self.peephole:
            self.step = self._step
        elif activation == 4:
            # sigmoid(x) = 0.5 + 0.5 tanh(x / 2): with the sigmoid gates' weights and
            # biases halved (exact in binary floating point) one tanh covers all gates.
            ns = (self.gates - 1) * n
            for w in (self.wx, self.wh, self.waux, self.bias):
                if w is not None:
                    w[..., :ns] *= f32(0.5)
            self.step = self._tanh_step()
            self._sequence = self._tanh_sequence
            # the compiled cells (_jit_rnn) when kernels wants them; chosen when bound
            self.compiled = self.proj_w is None and kernels.jit_wanted()
            self._step_args = (self.wx, self.wh, self.bias, self.cifg, self.cell_clip)
        else:
            self.step = self._simple_step()

    # -- one time step ---------------------------------------------------

    def _project(self, hc: np.ndarray) -> np.ndarray:
        if self.proj_w is None:
            return hc
        out = hc @ self.proj_w
        if self.proj_b is not None:
            out += self.proj_b
        if self.proj_clip > 0:
            np.clip(out, -self.proj_clip, self.proj_clip, out=out)
        return out

    def _simple_step(self) -> Callable:
        n, ns, wh, act, cifg = (
            self.n_cell,
            (self.gates - 1) * self.n_cell,
            self.wh,
            self.act,
            self.cifg,
        )
        clip = self.cell_clip
        project = self._project if self.proj_w is not None else None

        def step(gx: np.ndarray, h: np.ndarray | None, c: np.ndarray):
            if h is None:  # gx already holds every term (one fused step)
                g = gx
            else:
                g = h @ wh
                g += gx
            s = sigmoid(g[:, :ns])
            z = act(g[:, ns:])
            if cifg:
                f, o = s[:, :n], s[:, n:]
                i = f32(1) - f
            else:
                i, f, o = s[:, :n], s[:, n : 2 * n], s[:, 2 * n :]
            c_new = f * c
            c_new += i * z
            if clip > 0:
                np.clip(c_new, -clip, clip, out=c_new)
            act_c = act(c_new)
            hc = o * act_c
            out = hc if project is None else project(hc)
            return out, c_new, (i, f, act_c, hc)

        return step

    def _tanh_step(self) -> Callable:
        n, ns, wh, cifg = self.n_cell, (self.gates - 1) * self.n_cell, self.wh, self.cifg
        clip, half, tanh = self.cell_clip, f32(0.5), np.tanh
        project = self._project if self.proj_w is not None else None

        def step(gx: np.ndarray, h: np.ndarray | None, c: np.ndarray):
            if h is None:  # gx already holds every term (one fused step)
                g = gx
            else:
                g = h @ wh
                g += gx
            tanh(g, out=g)
            s = g[:, :ns]
            s *= half
            s += half
            if cifg:
                f, o = s[:, :n], s[:, n:]
                i = f32(1) - f
            else:
                i, f, o = s[:, :n], s[:, n : 2 * n], s[:, 2 * n :]
            c_new = f * c
            c_new += i * g[:, ns:]
            if clip > 0:
                np.clip(c_new, -clip, clip, out=c_new)
            act_c = tanh(c_new)
            hc = o * act_c
            out = hc if project is None else project(hc)
            return out, c_new, (i, f, act_c, hc)

        return step

    def _tanh_sequence(self, gx: np.ndarray, h: np.ndarray, c: np.ndarray, out, steps, time_major):
        """The time loop of ``_tanh_step`` without a projection, in preallocated buffers.

        Per step: the recurrent matmul into the gate buffer, the input terms added,
        one tanh over all gates, the cell state updated in place and the output
        written straight into ``out``; no allocation, no per-step Python call.
        Returns (h, c, parts) as the step-by-step loop does.
        """
        n, ns, wh, cifg = self.n_cell, (self.gates - 1) * self.n_cell, self.wh, self.cifg
        clip, half, tanh = self.cell_clip, f32(0.5), np.tanh
        batch = h.shape[0]
        g = np.empty((batch, self.gates * n), f32)
        s, z = g[:, :ns], g[:, ns:]
        if cifg:
            f, o = s[:, :n], s[:, n:]
            i = None
        else:
            i, f, o = s[:, :n], s[:, n : 2 * n], s[:, 2 * n :]
        c = np.array(c, dtype=f32)  # updated in place: never the caller's array
        tmp = np.empty((batch, n), f32)
        act_c = np.empty((batch, n), f32)
        # np.dot reaches BLAS with less dispatch than matmul (0.4 us a step at 256 units)
        dot, multiply = np.dot, np.multiply
        for t in steps:
            dot(h, wh, out=g)
            g += gx[t] if time_major else gx[:, t]
            tanh(g, out=g)
            s *= half
            s += half
            c *= f
            if cifg:  # i = 1 - f: i * z = z - f * z
                multiply(f, z, out=tmp)
                np.subtract(z, tmp, out=tmp)
            else:
                multiply(i, z, out=tmp)
            c += tmp
            if clip > 0:
                np.clip(c, -clip, clip, out=c)
            tanh(c, out=act_c)
            h = out[t] if time_major else out[:, t]
            multiply(o, act_c, out=h)
        i_gate = f32(1) - f if cifg else i
        return h, c, (i_gate, f, act_c, h)

    def _compiled_sequence(self, gx, h, c, out, time_major: bool, reverse: bool):
        """``_jit_rnn.lstm_sequence`` over gx; (h, c) after the last step, or None when
        the compiled cells are unavailable (the numpy loop runs instead)."""
        cells = jit_cells()
        batch = gx.shape[1 if time_major else 0]
        # the compiled loop trusts its shapes (no bounds checks): they are checked here
        if cells is None or h.shape != (batch, self.n_output) or c.shape != (batch, self.n_cell):
            return None
        h, c = np.array(h, f32), np.array(c, f32)  # updated in place: never the caller's
        # the kernel is compiled for contiguous time-major arrays
        out_tm = out if time_major else np.empty((gx.shape[1], batch, self.n_output), f32)
        if not time_major:
            gx = np.ascontiguousarray(gx.swapaxes(0, 1))
        args = (gx, h, c, self.wh, self.cifg, self.cell_clip, out_tm, reverse)
        if not ran_cell(cells.lstm_sequence, *args):
            return None
        if not time_major:
            out[...] = out_tm.swapaxes(0, 1)
        return h, c

    def single_outputs(self, x: np.ndarray, h: np.ndarray, c: np.ndarray, float32: bool):
        """One step from [batch, in]: (scratch buffer, out, c) as the LSTM operation
        returns them (float32). ``float32``: the operation's type is TENSOR_FLOAT32,
        so its arrays are float32 and the compiled step may run."""
        if float32 and self.compiled:
            cells = jit_cells()
            batch = x.shape[0]
            n_in, n_out, n = self.wx.shape[0], self.n_output, self.n_cell
            # the compiled step trusts its shapes (no bounds checks): they are checked here
            if (
                cells is not None
                and x.shape[1] == n_in
                and h.shape == (batch, n_out)
                and c.shape == (batch, n)
            ):
                out = np.empty((batch, n_out), f32)
                c_new = np.empty((batch, n), f32)
                scratch = np.empty((batch, self.gates * n), f32)
                if ran_cell(cells.lstm_step, x, h, c, *self._step_args, out, c_new, scratch):
                    return scratch, out, c_new
        out, c_new, parts = self.single(x, h, c)
        return scratch_buffer(self, parts), out, c_new

    def _step(self, gx: np.ndarray, h: np.ndarray | None, c: np.ndarray):
        n, cifg, act = self.n_cell, self.cifg, self.act
        if h is None:
            g = gx
        else:
            g = h @ self.wh
            g += gx
        batch = g.shape[0]
        k = 1 if cifg else 2  # gates before the output gate: [f] or [i, f]
        front = g[:, : k * n]
        if self.peephole:
            front[:, (k - 1) * n :] += c * self.w_cf
            if not cifg:
                front[:, :n] += c * self.w_ci
        if self.layer_norm:
            front = layer_norm(front.reshape(batch, k, n), self.ln_w[:k], self.ln_b[:k])
            front = front.reshape(batch, k * n)
        s = sigmoid(front)
        f = s[:, (k - 1) * n :]
        i = f32(1) - f if cifg else s[:, :n]
        gz = g[:, (k + 1) * n :]
        if self.layer_norm:
            gz = layer_norm(gz, self.ln_w[k + 1], self.ln_b[k + 1])
        c_new = f * c
        c_new += i * act(gz)
        if self.cell_clip > 0:
            np.clip(c_new, -self.cell_clip, self.cell_clip, out=c_new)
        go = g[:, k * n : (k + 1) * n]
        if self.peephole:
            go = go + c_new * self.w_co
        if self.layer_norm:
            go = layer_norm(go, self.ln_w[k], self.ln_b[k])
        o = sigmoid(go)
        act_c = act(c_new)
        hc = o * act_c
        return self._project(hc), c_new, (i, f, act_c, hc)

    # -- a sequence ------------------------------------------------------

    def single(self, x: np.ndarray, h: np.ndarray, c: np.ndarray):
        """One step from [batch, in]: one matmul of [x, h] with the stacked weights.

        Returns (out, c, parts) as ``run`` does for one step.
        """
        wxh = self._wxh
        if wxh is None:
            wxh = self._wxh = np.ascontiguousarray(np.concatenate([self.wx, self.wh]))
        g = np.concatenate((x, h), axis=1) @ wxh  # float16 operands promote to float32
        if self.bias is not None:
            g += self.bias
        return self.step(g, None, np.asarray(c, f32))

    def run(
        self,
        x: np.ndarray,
        h: np.ndarray,
        c: np.ndarray,
        *,
        time_major: bool | None,
        reverse: bool = False,
        aux: np.ndarray | None = None,
    ):
        """Run over ``x`` ([batch, in] for one step, else 3-D); returns (out, h, c, parts).

        ``out`` has ``x``'s layout with the last axis n_output; ``parts`` are
        the last step's (input gate, forget gate, act(c), o * act(c)).
        """
        n_in = x.shape[-1]
        gx = x.reshape(-1, n_in) @ self.wx  # matmul promotes float16 to float32
        if aux is not None and self.waux is not None:
            gx += aux.reshape(-1, aux.shape[-1]) @ self.waux
        if self.bias is not None:
            gx += self.bias
        gx = gx.reshape(*x.shape[:-1], gx.shape[-1])
        h = np.asarray(h, f32)
        c = np.asarray(c, f32)
        step = self.step
        if time_major is None:
            out, c, parts = step(gx, h, c)
            return out, out, c, parts
        out = np.empty((*x.shape[:-1], self.n_output), f32)
        steps = range(x.shape[0 if time_major else 1])
        parts = None
        if reverse:
            steps = reversed(steps)
        if self._sequence is not None and self.proj_w is None and x.shape[0 if time_major else 1]:
            if self.compiled and gx.dtype == f32:
                done = self._compiled_sequence(gx, h, c, out, time_major, reverse)
                if done is not None:
                    return out, *done, None
            h, c, parts = self._sequence(gx, h, c, out, steps, time_major)
            return out, h, c, parts
        if time_major:
            for t in steps:
                h, c, parts = step(gx[t], h, c)
                out[t] = h
        else:
            for t in steps:
                h, c, parts = step(gx[:, t], h, c)
                out[:, t] = h
        return out, h, c, parts


class CellBinder:
    """FloatCells for one layout of an operation: built once when every
    parameter is a constant or omitted, else checked and built on each call."""

    def __init__(
        self,
        ctx: OpContext,
        layout: CellLayout,
        activation: int,
        cell_clip: float,
        proj_clip: float,
        *,
        time_major: bool | None,
        input_index: int | None = None,
        aux_weights: tuple[int, int, int, int] | None = None,
    ) -> None:
        self.ctx, self.layout = ctx, layout
        self.args = (activation, cell_clip, proj_clip)
        self.time_major, self.input_index, self.aux_weights = time_major, input_index, aux_weights
        self.fail = lambda message: runtime_failure(ctx, message)
        params = [i for i in (*layout.weights, *(aux_weights or ())) if i < len(ctx.inputs)]
        self.cell: FloatCell | None = None
        self._accepted: tuple | None = None  # the array shapes the rules last accepted
        if all(ctx.is_omitted(i) or ctx.inputs[i].is_constant for i in params):
            values = [
                None if ctx.is_omitted(i) else info.value for i, info in enumerate(ctx.inputs)
            ]
            geo = compiled_cell(ctx, layout, input_index=input_index, time_major=time_major)
            self.cell = FloatCell(values, layout, geo, *self.args, aux_weights=aux_weights)
        inp = layout.input if input_index is None else input_index
        runtime = (inp, layout.h_in, layout.c_in)
        #: shapes only known at run time still need the cross checks
        self.check_always = not all(fully_declared(ctx.inputs[i]) for i in runtime)

    def _check(self, state, fail) -> Geometry:
        return check_cell(
            self.ctx,
            self.layout,
            state,
            fail,
            input_index=self.input_index,
            time_major=self.time_major,
        )

    def get(self, arrays: Sequence[np.ndarray | None]) -> FloatCell:
        """The cell for this call's arrays (indexed by operand position)."""
        if self.cell is not None:
            if self.check_always:
                # the rules read only presence and shapes: the shapes last accepted
                # pass again without re-running them (a decoder loop calls this each step)
                key = tuple(getattr(a, "shape", a) for a in arrays)
                if key != self._accepted:
                    self._check(runtime_state(arrays), self.fail)
                    self._accepted = key
            return self.cell
        geo = self._check(runtime_state(arrays), self.fail)
        return FloatCell(arrays, self.layout, geo, *self.args, aux_weights=self.aux_weights)


def operand_arrays(ctx: OpContext) -> Callable[[tuple], list]:
    """tensors (kernel arguments) -> list indexed by operand position."""
    positions = tensor_positions(ctx)
    index = [positions.get(i) for i in range(len(ctx.inputs))]

    def arrays(tensors: tuple) -> list:
        return [None if p is None else tensors[p] for p in index]

    return arrays


def clip_values(ctx: OpContext, cell: int, proj: int) -> tuple[float, float]:
    cell_clip = float(ctx.scalar(cell, 0.0))
    proj_clip = float(ctx.scalar(proj, 0.0))
    for index, value in ((cell, cell_clip), (proj, proj_clip)):
        if not value >= 0:
            raise ctx.fail(f"input {index} ({ctx.op.inputs[index].name}) is {value}; must be >= 0")
    return cell_clip, proj_clip


def bound_lstm_activation(ctx: OpContext, index: int) -> int:
    check_activation_value(ctx, index)
    return int(ctx.scalar(index, 0))


# ---------------------------------------------------------------------------
# The LSTM operation
# ---------------------------------------------------------------------------

LAYOUT = CellLayout(
    input=0,
    i2x=(1, 2, 3, 4),
    r2x=(5, 6, 7, 8),
    c2x=(9, 10, 11),
    bias=(12, 13, 14, 15),
    proj_w=16,
    proj_b=17,
    h_in=18,
    c_in=19,
    ln=(23, 24, 25, 26),
)


def _validate(ctx: OpContext) -> HalVersion | None:
    if len(ctx.inputs) not in (23, 27):
        raise ctx.fail(
            f"expected 23 inputs (HAL 1.0) or 27 (with layer normalization, HAL 1.2), "
            f"got {len(ctx.inputs)}"
        )
    check_activation_value(ctx, 20)
    check_nonnegative(ctx, 21, 22)
    return _V.V1_2 if len(ctx.inputs) == 27 else None


def _prepare(ctx: OpContext) -> list[Shape]:
    geo = compiled_cell(ctx, LAYOUT)
    gates = 0 if geo.cifg is None or not geo.n_cell else (3 if geo.cifg else 4) * geo.n_cell
    b = geo.n_batch
    return [(b, gates), (b, geo.n_output), (b, geo.n_cell), (b, geo.n_output)]


def scratch_buffer(cell: FloatCell, parts) -> np.ndarray:
    """The reference's scratch after a step: gate blocks [batch, n_cell] one after another."""
    i, f, act_c, hc = parts
    blocks = (act_c, i, hc) if cell.cifg else (i, act_c, f, hc)
    # blocks [batch, n_cell] stacked on axis 0 are already in the flat order
    return np.concatenate(blocks).reshape(hc.shape[0], len(blocks) * cell.n_cell)


def _execute(ctx: OpContext) -> Callable:
    activation = bound_lstm_activation(ctx, 20)
    cell_clip, proj_clip = clip_values(ctx, 21, 22)
    binder = CellBinder(ctx, LAYOUT, activation, cell_clip, proj_clip, time_major=None)
    arrays = operand_arrays(ctx)
    dtype = dtype_of(ctx.outputs[1].type)
    x_pos, h_pos, c_pos = (tensor_positions(ctx)[i] for i in (0, 18, 19))
    as_is = dtype == f32

    def lstm(*tensors: np.ndarray):
        cell = (
            binder.get(arrays(tensors))
            if binder.cell is None or binder.check_always
            else binder.cell
        )
        scratch, out, c = cell.single_outputs(tensors[x_pos], tensors[h_pos], tensors[c_pos], as_is)
        if as_is:  # fresh float32 results: only output needs its own copy of out
            return scratch, out, c, out.copy()
        return scratch.astype(dtype), out.astype(dtype), c.astype(dtype), out.astype(dtype)

    return lstm


LSTM_DEF = OperationDef(
    OperationType.LSTM,
    inputs=(
        Arg("input"),
        *cell_args(),
        Arg("output_state_in"),
        Arg("cell_state_in"),
        Arg("activation", INT32_SCALAR),
        Arg("cell_clip", clip_scalar_type),
        Arg("proj_clip", clip_scalar_type),
        *layer_norm_args(),
    ),
    outputs=(
        Arg("scratch_buffer"),
        Arg("output_state_out"),
        Arg("cell_state_out"),
        Arg("output"),
    ),
    types={_T.TENSOR_FLOAT32: _V.V1_0, _T.TENSOR_FLOAT16: _V.V1_2},
    execute=_execute,
    prepare=_prepare,
    validate=_validate,
)

register(LSTM_DEF)
