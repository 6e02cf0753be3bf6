"""RNN, UNIDIRECTIONAL_SEQUENCE_RNN, BIDIRECTIONAL_SEQUENCE_RNN: the basic recurrent cell.

One step of the cell (the reference ``RNN::RNNStep``)::

    h_t = activation(x_t @ W.T + aux_t @ W_aux.T + h_{t-1} @ R.T + bias)

RNN is one step (outputs: the new hidden state, then the output, equal).
The sequence operations run it over ``max_time`` steps of a
``[max_time, batch, input]`` (time-major) or ``[batch, max_time, input]``
input; the input projection of every step is one matmul ahead of the loop,
so the loop over time (sequential by nature) does one ``h @ R.T`` per step.
BIDIRECTIONAL_SEQUENCE_RNN runs a forward cell over t = 0..T-1 and a
backward cell over t = T-1..0, with the outputs separate or merged on the
last axis ``[fw | bw]``, and three ways to use the auxiliary input, decided
by which of inputs 9..11 have values (only known at run time when they are
model inputs): none (no linking), the aux input alone (parallel linking:
the backward cell reads it instead of the input), or all three (cross
linking: both cells add ``aux @ W_aux.T``).

Float16 computes in float32; the hidden state carried between steps is
rounded to float16 at every step, as the reference (which computes in
``_Float16``) stores it. Constant weights are converted and transposed once
when the kernel is bound.

The sequence operations have optional trailing state outputs (HAL 1.3):
they register with ``variadic_outputs`` (every output has the input's type)
and their validate checks the count (1 or 2; 1 to 4 by merge_outputs).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from nnhal.driver.ops import kernels
from nnhal.driver.ops._operand_rules import check_rank, dtype_of, runtime_failure
from nnhal.driver.ops._rnn_util import (
    RNN_ACTIVATIONS,
    Dims,
    activation_inplace,
    bound_activation_code,
    check_activation_code,
    fully_known,
    jit_cells,
    ran_cell,
)
from nnhal.driver.ops.registry import Arg, OpContext, OperationDef, Shape, register

from nnhal.types import HalVersion, OperandType, OperationType

_T = OperandType
_V = HalVersion
f32 = np.float32

_TYPES = {_T.TENSOR_FLOAT32: _V.V1_0, _T.TENSOR_FLOAT16: _V.V1_2}
_SEQ_TYPES = {_T.TENSOR_FLOAT32: _V.V1_2, _T.TENSOR_FLOAT16: _V.V1_2}
#: NONE, RELU, RELU1, RELU6, TANH: what ``_jit_rnn.rnn_step`` computes
_COMPILED_ACTIVATIONS = frozenset({0, 1, 2, 3, 4})


def _weights_t(ctx: OpContext, index: int) -> np.ndarray | None:
    """``W.T`` as contiguous float32 for a constant weight (None otherwise)."""
    value = ctx.constant(index)
    return None if value is None else np.ascontiguousarray(value.astype(f32).T)


def _bias(ctx: OpContext, index: int) -> np.ndarray | None:
    value = ctx.constant(index)
    return None if value is None else value.astype(f32)


def _check_cell(ctx: OpContext, what: str, w, r, b, h, size: int, batch: int) -> None:
    """Run-time shapes of one cell's weights and state (when not proven at compile time)."""
    if w.ndim != 2 or w.shape[1] != size:
        raise runtime_failure(ctx, f"{what} weights have shape {w.shape}; expected [units, {size}]")
    units = w.shape[0]
    if r.shape != (units, units) or b.shape != (units,) or h.shape != (batch, units):
        raise runtime_failure(
            ctx,
            f"{what} recurrent weights {r.shape}, bias {b.shape} and hidden state {h.shape} "
            f"do not fit {units} units and batch {batch}",
        )


# ---------------------------------------------------------------------------
# RNN (one step)
# ---------------------------------------------------------------------------


def _rnn_validate(ctx: OpContext) -> None:
    for index, rank in ((0, 2), (1, 2), (2, 2), (3, 1), (4, 2)):
        check_rank(ctx, index, exact=rank)
    check_activation_code(ctx, 5, RNN_ACTIVATIONS)


def _cell_dims(d: Dims, w: int, r: int, b: int, h: int, units: str) -> None:
    """The unit sizes of one cell: weights[0], recurrent [units, units], bias, state[1]."""
    d.take(units, w, 0)
    d.take(units, r, 0)
    d.take(units, r, 1)
    d.take(units, b, 0)
    d.take(units, h, 1)


def _rnn_prepare(ctx: OpContext) -> list[Shape]:
    d = Dims(ctx)
    d.take("batch_size", 0, 0)
    d.take("batch_size", 4, 0)
    d.take("input_size", 0, 1)
    d.take("input_size", 1, 1)
    _cell_dims(d, 1, 2, 3, 4, "num_units")
    shape = (d["batch_size"], d["num_units"])
    return [shape, shape]


def _rnn_execute(ctx: OpContext) -> Callable[..., tuple]:
    code = bound_activation_code(ctx, 5, RNN_ACTIVATIONS)
    act = activation_inplace(code)
    dtype = dtype_of(ctx.outputs[0].type)
    w, r, bias = ctx.constant(1), ctx.constant(2), _bias(ctx, 3)
    checked = fully_known(*(ctx.inputs[i].dimensions for i in range(5)))
    compiled = (
        code in _COMPILED_ACTIVATIONS
        and dtype == f32
        and not any(a is None for a in (w, r, bias))
        and kernels.jit_wanted()
    )
    if compiled:
        # [W | R], the HAL's [units, size] layouts side by side: the compiled step's
        # one dot product per unit; numpy (should it run) multiplies by transposed
        # views of it, which BLAS takes as they are (no transposed copies to make)
        w_r = np.concatenate([w, r], axis=1, dtype=f32)
        size, units = w.shape[1], r.shape[0]
        w_t, r_t = w_r[:, :size].T, w_r[:, size:].T
    else:
        w_t, r_t = _weights_t(ctx, 1), _weights_t(ctx, 2)

    def rnn(x, w, r, b, h):
        if not checked:
            if x.ndim != 2 or h.ndim != 2:
                raise runtime_failure(ctx, "input 0 and input 4 must have rank 2")
            _check_cell(ctx, "input", w, r, b, h, x.shape[1], x.shape[0])
        # the compiled step trusts its shapes (no bounds checks): they are checked here
        if compiled and x.shape[1] == size and h.shape == (x.shape[0], units):
            cells = jit_cells()
            if cells is not None:
                out = np.empty((x.shape[0], units), f32)
                if ran_cell(cells.rnn_step, x, h, w_r, bias, code, out):
                    return out, out.copy()
        # np.dot reaches BLAS with less dispatch than matmul (same sums)
        out = np.dot(x, w_t if w_t is not None else w.astype(f32).T)
        out += np.dot(h, r_t if r_t is not None else r.astype(f32).T)
        out += bias if bias is not None else b
        if act is not None:
            act(out)
        if dtype != f32:
            out = out.astype(dtype)
        return out, out.copy()

    return rnn


RNN = register(
    OperationDef(
        OperationType.RNN,
        inputs=(
            Arg("input"),
            Arg("weights"),
            Arg("recurrent_weights"),
            Arg("bias"),
            Arg("hidden_state_in"),
            Arg("activation", _T.INT32),
        ),
        outputs=(Arg("hidden_state_out"), Arg("output")),
        types=_TYPES,
        execute=_rnn_execute,
        prepare=_rnn_prepare,
        validate=_rnn_validate,
    )
)


# ---------------------------------------------------------------------------
# The time loop shared by the sequence operations
# ---------------------------------------------------------------------------


def _recur(
    pre: np.ndarray,
    h: np.ndarray,
    r_t: np.ndarray,
    act,
    out: np.ndarray,
    steps,
    f16: bool,
) -> np.ndarray:
    """Run the cell over ``steps`` of the time-major input projection ``pre``.

    ``out`` is a time-major view ([T, B, units]) of the output; returns the
    last hidden state (float32, or the float16 row written to ``out``).
    """
    for t in steps:
        z = pre[t] + h @ r_t
        if act is not None:
            act(z)
        out[t] = z
        h = out[t] if f16 else z
    return h


def _compiled_recur(pre, h, r, code: int, out, reverse: bool) -> np.ndarray | None:
    """``_jit_rnn.rnn_sequence`` over the time-major float32 ``pre`` into the
    time-major ``out`` (r: the HAL's [units, units]); the last hidden state, or
    None when the compiled loop did not run (numpy's then)."""
    cells = jit_cells()
    steps, batch, units = pre.shape
    # the compiled loop trusts its shapes (no bounds checks): they are checked here
    if cells is None or not steps or h.shape != (batch, units) or r.shape != (units, units):
        return None
    target = out if out.flags.c_contiguous else np.empty(pre.shape, f32)
    if not ran_cell(cells.rnn_sequence, np.ascontiguousarray(pre), h, r, code, target, reverse):
        return None
    if target is not out:
        out[...] = target
    return out[0 if reverse else steps - 1]


def _recurrent_hal(ctx: OpContext, index: int, compiled: bool) -> np.ndarray | None:
    """A constant recurrent weight as the compiled loop reads it ([units, units], float32)."""
    value = ctx.constant(index) if compiled else None
    return None if value is None else np.ascontiguousarray(value, dtype=f32)


def _projection(x: np.ndarray, w_t: np.ndarray, bias: np.ndarray) -> np.ndarray:
    pre = x @ w_t
    pre += bias
    return pre


def _time_major(a: np.ndarray, time_major: bool) -> np.ndarray:
    return a if time_major else a.swapaxes(0, 1)


# ---------------------------------------------------------------------------
# UNIDIRECTIONAL_SEQUENCE_RNN
# ---------------------------------------------------------------------------


def _uni_validate(ctx: OpContext) -> HalVersion | None:
    if len(ctx.outputs) > 2:
        raise ctx.fail(
            f"expected 1 output, or 2 with the state output (HAL 1.3); got {len(ctx.outputs)}"
        )
    for index, rank in ((0, 3), (1, 2), (2, 2), (3, 1), (4, 2)):
        check_rank(ctx, index, exact=rank)
    check_activation_code(ctx, 5, RNN_ACTIVATIONS)
    time_major = ctx.constant(6)
    if time_major is not None and int(time_major.reshape(-1)[0]) not in (0, 1):
        raise ctx.fail(
            f"input 6 (time_major) has value {int(time_major.reshape(-1)[0])}; it must be "
            "0 (batch-major) or 1 (time-major)"
        )
    return _V.V1_3 if len(ctx.outputs) == 2 else None


def _seq_axes(time_major: bool) -> tuple[int, int]:
    """(time axis, batch axis) of a sequence tensor."""
    return (0, 1) if time_major else (1, 0)


def _uni_prepare(ctx: OpContext) -> list[Shape]:
    time_major = bool(ctx.scalar(6))
    t_ax, b_ax = _seq_axes(time_major)
    d = Dims(ctx)
    d.take("max_time", 0, t_ax)
    d.take("batch_size", 0, b_ax)
    d.take("batch_size", 4, 0)
    d.take("input_size", 0, 2)
    d.take("input_size", 1, 1)
    _cell_dims(d, 1, 2, 3, 4, "num_units")
    lead = (d["max_time"], d["batch_size"]) if time_major else (d["batch_size"], d["max_time"])
    shapes = [(*lead, d["num_units"])]
    if len(ctx.outputs) == 2:
        shapes.append((d["batch_size"], d["num_units"]))
    return shapes


def _uni_execute(ctx: OpContext) -> Callable[..., np.ndarray | tuple]:
    code = bound_activation_code(ctx, 5, RNN_ACTIVATIONS)
    act = activation_inplace(code)
    time_major = bool(ctx.scalar(6))
    dtype = dtype_of(ctx.outputs[0].type)
    f16 = dtype != f32
    compiled = not f16 and code in _COMPILED_ACTIVATIONS and kernels.jit_wanted()
    with_state = len(ctx.outputs) == 2
    w_t, r_t, bias = _weights_t(ctx, 1), _weights_t(ctx, 2), _bias(ctx, 3)
    r_hal = _recurrent_hal(ctx, 2, compiled)
    checked = fully_known(*(ctx.inputs[i].dimensions for i in range(5)))
    t_ax, b_ax = _seq_axes(time_major)

    def uni(x, w, r, b, h):
        if not checked:
            if x.ndim != 3 or h.ndim != 2:
                raise runtime_failure(ctx, "input 0 must have rank 3 and input 4 rank 2")
            _check_cell(ctx, "input", w, r, b, h, x.shape[2], x.shape[b_ax])
        wt = w_t if w_t is not None else w.astype(f32).T
        rt = r_t if r_t is not None else r.astype(f32).T
        pre = _projection(x, wt, bias if bias is not None else b)
        out = np.empty(pre.shape, dtype)
        pre_tm, out_tm = _time_major(pre, time_major), _time_major(out, time_major)
        last = None
        if compiled:
            r_c = r_hal if r_hal is not None else np.ascontiguousarray(r, dtype=f32)
            last = _compiled_recur(pre_tm, h, r_c, code, out_tm, False)
        if last is None:
            last = _recur(pre_tm, h, rt, act, out_tm, range(x.shape[t_ax]), f16)
        if not with_state:
            return out
        return out, np.array(last, dtype=dtype)

    return uni


# ---------------------------------------------------------------------------
# BIDIRECTIONAL_SEQUENCE_RNN
# ---------------------------------------------------------------------------

_AUX = (9, 10, 11)  # aux input, fw aux weights, bw aux weights
#: which of inputs 9..11 have values in the three linking modes
_LINKING = {
    (False, False, False): "no linking",
    (True, False, False): "parallel linking",
    (True, True, True): "cross linking",
}


def _static_presence(ctx: OpContext, index: int) -> bool | None:
    """True: certainly has a value (a constant); False: NO_VALUE; None: known at run time."""
    if ctx.is_omitted(index):
        return False
    return True if ctx.inputs[index].is_constant else None


def _possible_linkings(ctx: OpContext) -> list[str]:
    known = [_static_presence(ctx, i) for i in _AUX]
    modes = []
    for pattern, mode in _LINKING.items():
        if all(k is None or k == p for k, p in zip(known, pattern)):
            modes.append(mode)
    return modes


def _bidi_output_count(ctx: OpContext, merge: bool) -> bool:
    """Check the output count against merge_outputs; True when state outputs are there."""
    n = len(ctx.outputs)
    allowed = (1, 3) if merge else (2, 4)
    if n not in allowed:
        raise ctx.fail(
            f"with input 14 (merge_outputs) {str(merge).lower()} the operation has "
            f"{allowed[0]} outputs, or {allowed[1]} with the state outputs; got {n}"
        )
    return n == allowed[1]


def _bidi_validate(ctx: OpContext) -> HalVersion | None:
    check_rank(ctx, 0, exact=3)
    for base in (1, 5):  # weights, recurrent weights, bias, hidden state of each cell
        for offset, rank in enumerate((2, 2, 1, 2)):
            check_rank(ctx, base + offset, exact=rank)
    check_activation_code(ctx, 12, RNN_ACTIVATIONS)
    if not _possible_linkings(ctx):
        present = ", ".join(
            f"input {i} {'has a value' if _static_presence(ctx, i) else 'has no value'}"
            for i in _AUX
            if _static_presence(ctx, i) is not None
        )
        raise ctx.fail(
            f"{present}: the auxiliary inputs 9 (aux_input), 10 (fw_aux_weights) and "
            "11 (bw_aux_weights) must all have values, all have none, or only input 9 "
            "have one"
        )
    state = _bidi_output_count(ctx, bool(ctx.scalar(14)))
    return _V.V1_3 if state else None


def _aux_shape(ctx: OpContext, index: int, rank: int) -> Shape:
    """An auxiliary operand's shape when it can describe a value.

    A model input that is given no value at execution time is often declared
    with a placeholder shape such as ``[0]``; only a shape of the right rank
    tells anything about the value.
    """
    dims = ctx.inputs[index].dimensions
    return dims if dims is not None and len(dims) == rank else None


def _bidi_prepare(ctx: OpContext) -> list[Shape]:
    time_major = bool(ctx.scalar(13))
    merge = bool(ctx.scalar(14))
    state = _bidi_output_count(ctx, merge)
    t_ax, b_ax = _seq_axes(time_major)
    d = Dims(ctx)
    d.take("max_time", 0, t_ax)
    d.take("batch_size", 0, b_ax)
    d.take("input_size", 0, 2)
    d.take("input_size", 1, 1)
    d.take("batch_size", 4, 0)
    d.take("batch_size", 8, 0)
    _cell_dims(d, 1, 2, 3, 4, "fw_num_units")
    _cell_dims(d, 5, 6, 7, 8, "bw_num_units")
    modes = _possible_linkings(ctx)
    aux = _aux_shape(ctx, 9, 3)
    if aux is not None and "no linking" not in modes:
        d.take("max_time", 9, t_ax, aux)
        d.take("batch_size", 9, b_ax, aux)
        d.take("aux_input_size", 9, 2, aux)
    if modes == ["cross linking"]:
        d.take("input_size", 5, 1)
        for index, units in ((10, "fw_num_units"), (11, "bw_num_units")):
            shape = _aux_shape(ctx, index, 2)
            d.take(units, index, 0, shape)
            d.take("aux_input_size", index, 1, shape)
    elif modes == ["parallel linking"]:
        d.take("aux_input_size", 5, 1)
    elif modes == ["no linking"]:
        d.take("input_size", 5, 1)
    fw, bw = d["fw_num_units"], d["bw_num_units"]
    lead = (d["max_time"], d["batch_size"]) if time_major else (d["batch_size"], d["max_time"])
    shapes: list[Shape] = [(*lead, (fw and bw and fw + bw) if merge else fw)]
    if not merge:
        shapes.append((*lead, bw))
    if state:
        shapes += [(d["batch_size"], fw), (d["batch_size"], bw)]
    return shapes


def _bidi_execute(ctx: OpContext) -> Callable[..., np.ndarray | tuple]:
    code = bound_activation_code(ctx, 12, RNN_ACTIVATIONS)
    act = activation_inplace(code)
    time_major = bool(ctx.scalar(13))
    merge = bool(ctx.scalar(14))
    state = _bidi_output_count(ctx, merge)
    dtype = dtype_of(ctx.outputs[0].type)
    f16 = dtype != f32
    compiled = not f16 and code in _COMPILED_ACTIVATIONS and kernels.jit_wanted()
    b_ax = _seq_axes(time_major)[1]
    const_t = {i: _weights_t(ctx, i) for i in (1, 2, 5, 6, 10, 11)}
    const_b = {i: _bias(ctx, i) for i in (3, 7)}
    const_r = {i: _recurrent_hal(ctx, i, compiled) for i in (2, 6)}
    checked = fully_known(*(ctx.inputs[i].dimensions for i in range(9)))

    def t_of(index: int, w: np.ndarray) -> np.ndarray:
        wt = const_t[index]
        return wt if wt is not None else w.astype(f32).T

    def recur(index: int, pre, h, r, out, reverse: bool) -> np.ndarray:
        """One direction's time loop (index: its recurrent weights' input)."""
        if compiled:
            r_c = const_r[index]
            r_c = r_c if r_c is not None else np.ascontiguousarray(r, dtype=f32)
            last = _compiled_recur(pre, h, r_c, code, out, reverse)
            if last is not None:
                return last
        steps = range(pre.shape[0] - 1, -1, -1) if reverse else range(pre.shape[0])
        return _recur(pre, h, t_of(index, r), act, out, steps, f16)

    def bidi(x, fw_w, fw_r, fw_b, fw_h, bw_w, bw_r, bw_b, bw_h, aux, fw_aw, bw_aw):
        mode = _LINKING.get((aux is not None, fw_aw is not None, bw_aw is not None))
        if mode is None:
            raise runtime_failure(
                ctx,
                "the auxiliary inputs 9, 10 and 11 must all have values, all have none, "
                "or only input 9 have one",
            )
        if aux is not None and (aux.ndim != 3 or aux.shape[:2] != x.shape[:2]):
            raise runtime_failure(
                ctx, f"input 9 (aux_input) has shape {aux.shape}; input 0 has {x.shape}"
            )
        bw_x = aux if mode == "parallel linking" else x
        if not checked or aux is not None:
            if x.ndim != 3:
                raise runtime_failure(ctx, f"input 0 has shape {x.shape}; it must have rank 3")
            batch = x.shape[b_ax]
            _check_cell(ctx, "forward", fw_w, fw_r, fw_b, fw_h, x.shape[2], batch)
            _check_cell(ctx, "backward", bw_w, bw_r, bw_b, bw_h, bw_x.shape[2], batch)
        fw_pre = _projection(x, t_of(1, fw_w), const_b[3] if const_b[3] is not None else fw_b)
        bw_pre = _projection(bw_x, t_of(5, bw_w), const_b[7] if const_b[7] is not None else bw_b)
        if mode == "cross linking":
            for index, aw, w in ((10, fw_aw, fw_w), (11, bw_aw, bw_w)):
                want = (np.shape(w)[0], aux.shape[2])  # (units, aux_input_size)
                if tuple(np.shape(aw)) != want:
                    raise runtime_failure(
                        ctx,
                        f"input {index} ({'fw' if index == 10 else 'bw'}_aux_weights) has shape"
                        f" {list(np.shape(aw))}; with input 9 of shape {list(aux.shape)} it must"
                        f" be {list(want)}",
                    )
            fw_pre += aux @ t_of(10, fw_aw)
            bw_pre += aux @ t_of(11, bw_aw)
        fw_units, bw_units = fw_pre.shape[2], bw_pre.shape[2]
        if merge:
            merged = np.empty((*fw_pre.shape[:2], fw_units + bw_units), dtype)
            view = _time_major(merged, time_major)
            fw_view, bw_view = view[..., :fw_units], view[..., fw_units:]
        else:
            fw_out = np.empty(fw_pre.shape, dtype)
            bw_out = np.empty(bw_pre.shape, dtype)
            fw_view, bw_view = _time_major(fw_out, time_major), _time_major(bw_out, time_major)
        fw_last = recur(2, _time_major(fw_pre, time_major), fw_h, fw_r, fw_view, False)
        bw_last = recur(6, _time_major(bw_pre, time_major), bw_h, bw_r, bw_view, True)
        outputs = [merged] if merge else [fw_out, bw_out]
        if state:
            outputs += [np.array(fw_last, dtype=dtype), np.array(bw_last, dtype=dtype)]
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    return bidi


UNIDIRECTIONAL_SEQUENCE_RNN = register(
    OperationDef(
        OperationType.UNIDIRECTIONAL_SEQUENCE_RNN,
        inputs=(
            Arg("input"),
            Arg("weights"),
            Arg("recurrent_weights"),
            Arg("bias"),
            Arg("hidden_state"),
            Arg("activation", _T.INT32),
            Arg("time_major", _T.INT32),
        ),
        # output, then the optional state output (checked by _uni_validate)
        outputs=(Arg("output"),),
        variadic_outputs=True,
        types=_SEQ_TYPES,
        execute=_uni_execute,
        prepare=_uni_prepare,
        validate=_uni_validate,
    )
)

_CELL = ("weights", "recurrent_weights", "bias", "hidden_state")
BIDIRECTIONAL_SEQUENCE_RNN = register(
    OperationDef(
        OperationType.BIDIRECTIONAL_SEQUENCE_RNN,
        inputs=(
            Arg("input"),
            *(Arg(f"fw_{name}") for name in _CELL),
            *(Arg(f"bw_{name}") for name in _CELL),
            Arg("aux_input", optional=True),
            Arg("fw_aux_weights", optional=True),
            Arg("bw_aux_weights", optional=True),
            Arg("activation", _T.INT32),
            Arg("time_major", _T.BOOL),
            Arg("merge_outputs", _T.BOOL),
        ),
        # fw output, bw output (unless merged), then optionally the fw and bw
        # state outputs (checked by _bidi_output_count)
        outputs=(Arg("output"),),
        variadic_outputs=True,
        types=_SEQ_TYPES,
        execute=_bidi_execute,
        prepare=_bidi_prepare,
        validate=_bidi_validate,
    )
)
