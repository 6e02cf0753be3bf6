"""UNIDIRECTIONAL_SEQUENCE_LSTM and BIDIRECTIONAL_SEQUENCE_LSTM: the LSTM
cell of ``lstm.py`` run over a whole sequence.

UNIDIRECTIONAL_SEQUENCE_LSTM (28 inputs): input ``[max_time, batch, in]``
(``time_major``) or ``[batch, max_time, in]``; outputs the sequence of
hidden states, plus (HAL 1.3) the final output and cell states.

BIDIRECTIONAL_SEQUENCE_LSTM (61 inputs): a forward cell over time and a
backward cell over reversed time, each with its own weights and states. The
auxiliary input (input 39) links stacked layers: with auxiliary weights
(inputs 40-47, "cross linking") it feeds both cells through those weights;
without them ("parallel linking") it is the backward cell's input. Outputs:
the forward and backward sequences, or one sequence with both concatenated
on the last axis when ``merge_outputs`` is set, optionally followed (HAL
1.3) by the four final states: 1, 2, 5 or 6 outputs.

Both leave trailing outputs off (``Arg(optional=True)``) and check the
allowed counts themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
from nnhal.driver.ops._lstm_util import (
    ABSENT,
    PRESENT,
    CellLayout,
    cell_args,
    check_activation_value,
    check_cell,
    check_nonnegative,
    clip_scalar_type,
    compile_state,
    compiled_cell,
    layer_norm_args,
    runtime_state,
    scalar_value,
    tensor_positions,
)
from nnhal.driver.ops._operand_rules import INT32_SCALAR, dtype_of, runtime_failure
from nnhal.driver.ops.lstm import LAYOUT as LSTM_LAYOUT
from nnhal.driver.ops.lstm import (
    CellBinder,
    FloatCell,
    bound_lstm_activation,
    clip_values,
    operand_arrays,
)
from nnhal.driver.ops.registry import Arg, OpContext, OperationDef, Shape, register

from nnhal.types import HalVersion, OperandType, OperationType

_T = OperandType
_V = HalVersion
f32 = np.float32
BOOL = frozenset({_T.BOOL})
TYPES = {_T.TENSOR_FLOAT32: _V.V1_2, _T.TENSOR_FLOAT16: _V.V1_2}


def _result(a: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """A fresh array of the output dtype (states may still be the inputs at max_time 0)."""
    return a.astype(dtype)


def _sequence_shape(in_dims, n_out: int) -> Shape:
    if in_dims is None or len(in_dims) != 3:
        return (0, 0, n_out)
    return (in_dims[0], in_dims[1], n_out)


def _time_major(ctx: OpContext, index: int) -> bool:
    return bool(ctx.scalar(index))


# ---------------------------------------------------------------------------
# UNIDIRECTIONAL_SEQUENCE_LSTM
# ---------------------------------------------------------------------------

# The sequence ops lay out the cell's inputs as LSTM does, with other
# positions for the states and the layer-norm weights.
UNI = replace(LSTM_LAYOUT, ln=(24, 25, 26, 27))


def _uni_validate(ctx: OpContext) -> HalVersion | None:
    if len(ctx.inputs) != 28:
        raise ctx.fail(f"expected 28 inputs, got {len(ctx.inputs)}")
    if len(ctx.outputs) not in (1, 3):
        raise ctx.fail(
            f"expected 1 output, or 3 with the output and cell states (HAL 1.3), "
            f"got {len(ctx.outputs)}"
        )
    check_activation_value(ctx, 20)
    check_nonnegative(ctx, 21, 22)
    return _V.V1_3 if len(ctx.outputs) == 3 else None


def _uni_prepare(ctx: OpContext) -> list[Shape]:
    time_major = _time_major(ctx, 23)
    geo = compiled_cell(ctx, UNI, time_major=time_major)
    shapes = [_sequence_shape(ctx.inputs[0].dimensions, geo.n_output)]
    if len(ctx.outputs) == 3:
        shapes += [(geo.n_batch, geo.n_output), (geo.n_batch, geo.n_cell)]
    return shapes


def _uni_execute(ctx: OpContext) -> Callable:
    activation = bound_lstm_activation(ctx, 20)
    cell_clip, proj_clip = clip_values(ctx, 21, 22)
    time_major = _time_major(ctx, 23)
    binder = CellBinder(ctx, UNI, activation, cell_clip, proj_clip, time_major=time_major)
    arrays = operand_arrays(ctx)
    dtype = dtype_of(ctx.outputs[0].type)
    positions = tensor_positions(ctx)
    x_pos, h_pos, c_pos = positions[0], positions[18], positions[19]
    with_states = len(ctx.outputs) == 3
    direct = binder.cell is not None and not binder.check_always

    def uni(*tensors: np.ndarray):
        cell = binder.cell if direct else binder.get(arrays(tensors))
        out, h, c, _ = cell.run(
            tensors[x_pos], tensors[h_pos], tensors[c_pos], time_major=time_major
        )
        out = out if out.dtype == dtype else out.astype(dtype)
        if with_states:
            return out, _result(h, dtype), _result(c, dtype)
        return out

    return uni


# ---------------------------------------------------------------------------
# BIDIRECTIONAL_SEQUENCE_LSTM
# ---------------------------------------------------------------------------

FW = replace(LSTM_LAYOUT, h_in=35, c_in=36, ln=(53, 54, 55, 56))
BW = CellLayout(
    input=0,
    i2x=(18, 19, 20, 21),
    r2x=(22, 23, 24, 25),
    c2x=(26, 27, 28),
    bias=(29, 30, 31, 32),
    proj_w=33,
    proj_b=34,
    h_in=37,
    c_in=38,
    ln=(57, 58, 59, 60),
)
AUX_INPUT = 39
FW_AUX = (40, 41, 42, 43)
BW_AUX = (44, 45, 46, 47)
NO_LINKING, PARALLEL, CROSS = "none", "parallel", "cross"


def _linking(ctx: OpContext, state, fail, fw_cifg, bw_cifg) -> str | None:
    """The reference's linking mode from which auxiliary tensors are given (None: unknown)."""

    def present(i):
        p = state(i)[0]
        return None if p not in (ABSENT, PRESENT) else p == PRESENT

    def name(i):
        return f"input {i} ({ctx.op.inputs[i].name})"

    for weights, cifg in ((FW_AUX, fw_cifg), (BW_AUX, bw_cifg)):
        if cifg and present(weights[0]):
            raise fail(f"{name(weights[0])} is given, but there is no input gate (CIFG)")
        needed = weights[1:] if cifg or cifg is None else weights
        known = [present(i) for i in needed]
        if True in known and False in known:
            raise fail(
                "the auxiliary weights "
                + ", ".join(name(i) for i in needed)
                + " must be given all or none"
            )
    fw_w, bw_w, aux = present(FW_AUX[1]), present(BW_AUX[1]), present(AUX_INPUT)
    if fw_w is not None and bw_w is not None and fw_w != bw_w:
        raise fail(
            f"forward and backward auxiliary weights must both be given or both omitted "
            f"({name(FW_AUX[1])} {'given' if fw_w else 'omitted'}, {name(BW_AUX[1])} "
            f"{'given' if bw_w else 'omitted'})"
        )
    if fw_w and aux is False:
        raise fail(f"auxiliary weights are given without {name(AUX_INPUT)}")
    if aux is None or fw_w is None:
        return None
    if not aux:
        return NO_LINKING
    return CROSS if fw_w else PARALLEL


def _bidi_check(ctx: OpContext, state, fail, time_major: bool):
    fw = check_cell(ctx, FW, state, fail, time_major=time_major)
    mode = _linking(ctx, state, fail, fw.cifg, None)
    _check_aux_input(ctx, state, fail, mode)
    bw_input = AUX_INPUT if mode in (PARALLEL, None) else 0
    bw = check_cell(ctx, BW, state, fail, input_index=bw_input, time_major=time_major)
    _linking(ctx, state, fail, fw.cifg, bw.cifg)
    if mode == CROSS:
        for weights, geo in ((FW_AUX, fw), (BW_AUX, bw)):
            for i in weights:
                dims = state(i)[1] if state(i)[0] == PRESENT else None
                if dims is not None and (
                    len(dims) != 2
                    or (dims[0] and geo.n_cell and dims[0] != geo.n_cell)
                    or (dims[1] and fw.n_input and dims[1] != fw.n_input)
                ):
                    raise fail(
                        f"input {i} ({ctx.op.inputs[i].name}) has dimensions {list(dims)}; "
                        f"it must be [n_cell, input_size] = [{geo.n_cell}, {fw.n_input}]"
                    )
    return fw, bw, mode


def _check_aux_input(ctx: OpContext, state, fail, mode) -> None:
    """The auxiliary input shares max_time and batch with the input (and, with
    auxiliary weights, its size: the reference multiplies it as input-sized)."""
    aux_state, aux_dims = state(AUX_INPUT)
    in_dims = state(0)[1]
    if aux_state != PRESENT or aux_dims is None or in_dims is None:
        return
    if len(aux_dims) != 3:
        raise fail(f"input {AUX_INPUT} (aux_input) has rank {len(aux_dims)}; it must be 3")
    for axis in (0, 1):
        if aux_dims[axis] and in_dims[axis] and aux_dims[axis] != in_dims[axis]:
            raise fail(
                f"input {AUX_INPUT} (aux_input) has dimension {aux_dims[axis]} on axis "
                f"{axis} but input 0 has {in_dims[axis]}; they must match"
            )
    if mode == CROSS and aux_dims[2] and in_dims[2] and aux_dims[2] != in_dims[2]:
        raise fail(
            f"input {AUX_INPUT} (aux_input) has size {aux_dims[2]} (axis 2); with "
            f"auxiliary weights it must equal the input size {in_dims[2]}"
        )


def _merge(ctx: OpContext) -> bool | None:
    value = scalar_value(ctx, 51)
    return None if value is None else bool(value)


def _bidi_validate(ctx: OpContext) -> HalVersion | None:
    if len(ctx.inputs) != 61:
        raise ctx.fail(f"expected 61 inputs, got {len(ctx.inputs)}")
    n_out = len(ctx.outputs)
    if n_out not in (1, 2, 5, 6):
        raise ctx.fail(
            f"expected 1 or 2 outputs (merged or separate sequences), or 5 or 6 with the "
            f"final states (HAL 1.3), got {n_out}"
        )
    merge = _merge(ctx)
    if merge is not None and merge != (n_out in (1, 5)):
        raise ctx.fail(
            f"input 51 (merge_outputs) is {merge} but the operation has {n_out} outputs; "
            f"merged outputs take 1 (or 5 with states), separate ones 2 (or 6)"
        )
    check_activation_value(ctx, 48)
    check_nonnegative(ctx, 49, 50)
    return _V.V1_3 if n_out in (5, 6) else None


def _bidi_prepare(ctx: OpContext) -> list[Shape]:
    time_major = _time_major(ctx, 52)
    merge = bool(ctx.scalar(51))
    fw, bw, _ = _bidi_check(ctx, lambda i: compile_state(ctx, i), ctx.fail, time_major)
    in_dims = ctx.inputs[0].dimensions
    if merge:
        n = fw.n_output + bw.n_output if fw.n_output and bw.n_output else 0
        shapes = [_sequence_shape(in_dims, n)]
    else:
        shapes = [_sequence_shape(in_dims, fw.n_output), _sequence_shape(in_dims, bw.n_output)]
    if len(ctx.outputs) in (5, 6):
        batch = fw.n_batch
        shapes += [
            (batch, fw.n_output),
            (batch, fw.n_cell),
            (batch, bw.n_output),
            (batch, bw.n_cell),
        ]
    return shapes


def _bidi_execute(ctx: OpContext) -> Callable:
    activation = bound_lstm_activation(ctx, 48)
    cell_clip, proj_clip = clip_values(ctx, 49, 50)
    merge = bool(ctx.scalar(51))
    time_major = _time_major(ctx, 52)
    args = (activation, cell_clip, proj_clip)
    params = (*FW.weights, *BW.weights, *FW_AUX, *BW_AUX)
    cells = None
    if all(ctx.is_omitted(i) or ctx.inputs[i].is_constant for i in params):
        values = [None if ctx.is_omitted(i) else info.value for i, info in enumerate(ctx.inputs)]
        fw, bw, _ = _bidi_check(ctx, lambda i: compile_state(ctx, i), ctx.fail, time_major)
        cells = (
            FloatCell(values, FW, fw, *args, aux_weights=FW_AUX),
            FloatCell(values, BW, bw, *args, aux_weights=BW_AUX),
        )
    arrays = operand_arrays(ctx)
    dtype = dtype_of(ctx.outputs[0].type)
    fail = lambda message: runtime_failure(ctx, message)
    with_states = len(ctx.outputs) in (5, 6)

    def bidi(*tensors: np.ndarray):
        by_position = arrays(tensors)
        fw, bw, mode = _bidi_check(ctx, runtime_state(by_position), fail, time_major)
        if cells is not None:
            fw_cell, bw_cell = cells
        else:
            fw_cell = FloatCell(by_position, FW, fw, *args, aux_weights=FW_AUX)
            bw_cell = FloatCell(by_position, BW, bw, *args, aux_weights=BW_AUX)
        x, aux = by_position[0], by_position[AUX_INPUT]
        cross = aux if mode == CROSS else None
        fw_out, fw_h, fw_c, _ = fw_cell.run(
            x, by_position[35], by_position[36], time_major=time_major, aux=cross
        )
        bw_out, bw_h, bw_c, _ = bw_cell.run(
            aux if mode == PARALLEL else x,
            by_position[37],
            by_position[38],
            time_major=time_major,
            reverse=True,
            aux=cross,
        )
        if merge:
            outs = [np.concatenate([fw_out, bw_out], axis=2).astype(dtype, copy=False)]
        else:
            outs = [fw_out.astype(dtype, copy=False), bw_out.astype(dtype, copy=False)]
        if with_states:
            outs += [_result(a, dtype) for a in (fw_h, fw_c, bw_h, bw_c)]
        return tuple(outs) if len(outs) > 1 else outs[0]

    return bidi


UNIDIRECTIONAL_DEF = OperationDef(
    OperationType.UNIDIRECTIONAL_SEQUENCE_LSTM,
    inputs=(
        Arg("input"),
        *cell_args(),
        Arg("output_state_in"),
        Arg("cell_state_in"),
        Arg("activation", INT32_SCALAR),
        Arg("cell_clip", clip_scalar_type),
        Arg("proj_clip", clip_scalar_type),
        Arg("time_major", BOOL),
        *layer_norm_args(),
    ),
    outputs=(
        Arg("output"),
        Arg("output_state_out", optional=True),  # HAL 1.3
        Arg("cell_state_out", optional=True),
    ),
    types=TYPES,
    execute=_uni_execute,
    prepare=_uni_prepare,
    validate=_uni_validate,
)
BIDIRECTIONAL_DEF = OperationDef(
    OperationType.BIDIRECTIONAL_SEQUENCE_LSTM,
    inputs=(
        Arg("input"),
        *cell_args("fw_"),
        *cell_args("bw_"),
        Arg("fw_input_activation_state"),
        Arg("fw_input_cell_state"),
        Arg("bw_input_activation_state"),
        Arg("bw_input_cell_state"),
        Arg("aux_input", optional=True),
        *(
            Arg(f"{d}_aux_input_to_{g}_weights", optional=True)
            for d in ("fw", "bw")
            for g in ("input", "forget", "cell", "output")
        ),
        Arg("activation", INT32_SCALAR),
        Arg("cell_clip", clip_scalar_type),
        Arg("proj_clip", clip_scalar_type),
        Arg("merge_outputs", BOOL),
        Arg("time_major", BOOL),
        *layer_norm_args("fw_"),
        *layer_norm_args("bw_"),
    ),
    # With merge_outputs there is no bw_output and the states move up by one.
    outputs=(
        Arg("fw_output"),
        Arg("bw_output", optional=True),
        Arg("fw_output_activation_state", optional=True),  # HAL 1.3
        Arg("fw_output_cell_state", optional=True),
        Arg("bw_output_activation_state", optional=True),
        Arg("bw_output_cell_state", optional=True),
    ),
    types=TYPES,
    execute=_bidi_execute,
    prepare=_bidi_prepare,
    validate=_bidi_validate,
)

register(UNIDIRECTIONAL_DEF)
register(BIDIRECTIONAL_DEF)
