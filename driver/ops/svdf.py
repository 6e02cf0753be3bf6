"""SVDF: the rank-constrained "singular value decomposition filter" layer.

The state holds, per batch and per filter (``num_filters = num_units *
rank``), the last ``memory_size`` outputs of the feature filter, laid out as
``[batch, num_filters, memory_size]`` flattened to ``[batch, memory_size *
num_filters]`` (the reference's layout; the NNAPI text's ``(memory_size - 1)``
does not match it). One step, as the reference ``SVDF::EvalFloat32``:

1. ``memory = state_in`` with its newest slot (index ``memory_size - 1``)
   replaced by ``input @ weights_feature.T``;
2. ``scratch[b, f] = sum_m memory[b, f, m] * weights_time[f, m]``;
3. ``output[b, u] = activation(bias[u] + sum_r scratch[b, u * rank + r])``;
4. ``state_out`` is ``memory`` shifted one slot towards the oldest, the
   newest slot zeroed.

Float16 computes in float32 and rounds the results, as the reference does.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from nnhal.driver.ops._operand_rules import check_rank, dtype_of, runtime_failure
from nnhal.driver.ops._rnn_util import (
    SVDF_ACTIVATIONS,
    Dims,
    activation_inplace,
    bound_activation_code,
    check_activation_code,
    fully_known,
)
from nnhal.driver.ops.registry import Arg, OpContext, OperationDef, Shape, register

from nnhal.types import HalVersion, OperandType, OperationType

_T = OperandType
_V = HalVersion
f32 = np.float32


def _rank_value(ctx: OpContext) -> int:
    rank = int(ctx.scalar(5))
    if rank < 1:
        raise ctx.fail(f"input 5 (rank) has value {rank}; it must be at least 1")
    return rank


def _validate(ctx: OpContext) -> None:
    for index, rank in ((0, 2), (1, 2), (2, 2), (3, 1), (4, 2)):
        check_rank(ctx, index, exact=rank)
    check_activation_code(ctx, 6, SVDF_ACTIVATIONS)
    if ctx.constant(5) is not None:
        _rank_value(ctx)


def _prepare(ctx: OpContext) -> list[Shape]:
    rank = _rank_value(ctx)
    d = Dims(ctx)
    d.take("batch_size", 0, 0)
    d.take("batch_size", 4, 0)
    d.take("input_size", 0, 1)
    d.take("input_size", 1, 1)
    d.take("num_filters", 1, 0)
    d.take("num_filters", 2, 0)
    d.take("memory_size", 2, 1)
    filters = d["num_filters"]
    if filters and filters % rank:
        raise ctx.fail(
            f"input 1 (weights_feature) has {filters} filters (axis 0), not a multiple of "
            f"input 5 (rank) {rank}"
        )
    d.set("num_units", filters // rank, "num_filters / rank")
    d.take("num_units", 3, 0)
    units, memory = d["num_units"], d["memory_size"]
    state = memory * filters
    d.set("state_size", state, "memory_size * num_filters")
    d.take("state_size", 4, 1)
    batch = d["batch_size"]
    return [(batch, d["state_size"]), (batch, units)]


def _execute(ctx: OpContext) -> Callable[..., tuple]:
    rank = _rank_value(ctx)
    act = activation_inplace(bound_activation_code(ctx, 6, SVDF_ACTIVATIONS))
    dtype = dtype_of(ctx.outputs[0].type)
    const_wf, const_wt, const_b = ctx.constant(1), ctx.constant(2), ctx.constant(3)
    wf_t = None if const_wf is None else np.ascontiguousarray(const_wf.astype(f32).T)
    wt_c = None if const_wt is None else const_wt.astype(f32)
    bias_c = None if const_b is None else const_b.astype(f32)
    checked = fully_known(*(ctx.inputs[i].dimensions for i in (0, 1, 2, 4))) and (
        ctx.is_omitted(3) or fully_known(ctx.inputs[3].dimensions)
    )

    def check(x, wf, wt, b, s) -> None:
        filters, memory = wt.shape if wt.ndim == 2 else (0, 0)
        ok = (
            x.ndim == 2
            and wf.shape == (filters, x.shape[1])
            and filters % rank == 0
            and (b is None or b.shape == (filters // rank,))
            and s.shape == (x.shape[0], memory * filters)
        )
        if not ok:
            raise runtime_failure(
                ctx,
                f"shapes do not fit: input {x.shape}, weights_feature {wf.shape}, "
                f"weights_time {wt.shape}, bias {None if b is None else b.shape}, "
                f"state {s.shape}, rank {rank}",
            )

    def svdf(x, wf, wt, b, s):
        if not checked:
            check(x, wf, wt, b, s)
        time_w = wt_c if wt_c is not None else wt.astype(f32)
        filters, memory = time_w.shape
        batch = x.shape[0]
        mem = s.astype(f32).reshape(batch, filters, memory)
        mem[:, :, -1] = x @ (wf_t if wf_t is not None else wf.astype(f32).T)
        scratch = np.einsum("bfm,fm->bf", mem, time_w)
        out = scratch.reshape(batch, filters // rank, rank).sum(axis=2)
        bias = bias_c if bias_c is not None else b
        if bias is not None:
            out += bias
        if act is not None:
            act(out)
        state = np.empty((batch, filters, memory), dtype)
        state[:, :, :-1] = mem[:, :, 1:]
        state[:, :, -1] = 0
        return state.reshape(batch, filters * memory), out.astype(dtype, copy=False)

    return svdf


SVDF = register(
    OperationDef(
        OperationType.SVDF,
        inputs=(
            Arg("input"),
            Arg("weights_feature"),
            Arg("weights_time"),
            Arg("bias", optional=True),
            Arg("state_in"),
            Arg("rank", _T.INT32),
            Arg("activation", _T.INT32),
        ),
        outputs=(Arg("state_out"), Arg("output")),
        types={_T.TENSOR_FLOAT32: _V.V1_0, _T.TENSOR_FLOAT16: _V.V1_2},
        execute=_execute,
        prepare=_prepare,
        validate=_validate,
    )
)
