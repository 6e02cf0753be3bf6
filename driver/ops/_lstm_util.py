"""Helpers shared by the LSTM family (lstm, sequence_lstm, quantized_lstm).

- ``CellLayout``: where one LSTM cell's tensors sit in an operation's input
  list, and ``check_cell``: the reference's shape and presence rules for
  them (``LSTMCell::CheckInputTensorDimensions`` and the sequence ops'
  ``prepare``), run at compile time on declared shapes and at run time on the
  arrays. Optional inputs that are model inputs may be omitted per execution
  (``hasNoValue``), so presence is only certain for NO_VALUE operands (absent)
  and constants (present); the kernels settle the rest at run time.
- float activations and layer normalization as the reference computes them.

The 16-bit fixed-point functions (gemmlowp) live in ``_lstm_fixedpoint``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from nnhal.driver.ops.registry import (
    Arg,
    OpContext,
    OperandInfo,
    Shape,
    scalar_input_indexes,
)

from nnhal.types import OperandType

f32 = np.float32

# ---------------------------------------------------------------------------
# Layouts
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CellLayout:
    """Input positions of one LSTM cell (gate order: input, forget, cell, output)."""

    input: int
    i2x: tuple[int, int, int, int]  # input-to-{input, forget, cell, output} weights
    r2x: tuple[int, int, int, int]  # recurrent-to-* weights
    c2x: tuple[int, int, int]  # peephole cell-to-{input, forget, output} weights
    bias: tuple[int, int, int, int]
    proj_w: int
    proj_b: int
    h_in: int
    c_in: int
    ln: tuple[int, int, int, int] | None  # layer norm weights (None: not in the list)

    @property
    def weights(self) -> tuple[int, ...]:
        """Every parameter tensor (not the input, not the states)."""
        ln = self.ln or ()
        return (*self.i2x, *self.r2x, *self.c2x, *self.bias, self.proj_w, self.proj_b, *ln)

    @property
    def optional(self) -> tuple[int, ...]:
        ln = self.ln or ()
        return (self.i2x[0], self.r2x[0], *self.c2x, self.bias[0], self.proj_w, self.proj_b, *ln)


def cell_args(prefix: str = "", bias_type=None, weight_type=None, **types) -> list[Arg]:
    """Args of the 18 per-cell tensors (weights ... projection bias), named as in the HAL."""
    wt = weight_type or "T"
    bt = bias_type or "T"
    pt = types.get("peephole", "T")
    p = prefix
    return [
        Arg(f"{p}input_to_input_weights", wt, optional=True),
        Arg(f"{p}input_to_forget_weights", wt),
        Arg(f"{p}input_to_cell_weights", wt),
        Arg(f"{p}input_to_output_weights", wt),
        Arg(f"{p}recurrent_to_input_weights", wt, optional=True),
        Arg(f"{p}recurrent_to_forget_weights", wt),
        Arg(f"{p}recurrent_to_cell_weights", wt),
        Arg(f"{p}recurrent_to_output_weights", wt),
        Arg(f"{p}cell_to_input_weights", pt, optional=True),
        Arg(f"{p}cell_to_forget_weights", pt, optional=True),
        Arg(f"{p}cell_to_output_weights", pt, optional=True),
        Arg(f"{p}input_gate_bias", bt, optional=True),
        Arg(f"{p}forget_gate_bias", bt),
        Arg(f"{p}cell_gate_bias", bt),
        Arg(f"{p}output_gate_bias", bt),
        Arg(f"{p}projection_weights", types.get("projection", wt), optional=True),
        Arg(f"{p}projection_bias", bt, optional=True),
    ]


def layer_norm_args(prefix: str = "", type_=None) -> list[Arg]:
    t = type_ or "T"
    return [
        Arg(f"{prefix}{g}_layer_norm_weights", t, optional=True)
        for g in ("input", "forget", "cell", "output")
    ]


def clip_scalar_type(primary: int) -> frozenset:
    """cell_clip/proj_clip are FLOAT32 with float32 tensors, FLOAT16 with float16."""
    if primary == OperandType.TENSOR_FLOAT32:
        return frozenset({OperandType.FLOAT32})
    return frozenset({OperandType.FLOAT16})


# ---------------------------------------------------------------------------
# Presence and shape rules
# ---------------------------------------------------------------------------

ABSENT, PRESENT, MAYBE = "absent", "present", "maybe"


def compile_state(ctx: OpContext, index: int | None) -> tuple[str, Shape]:
    """(presence, dims) of an input as far as compile time knows it."""
    if index is None or ctx.is_omitted(index):
        return ABSENT, None
    info = ctx.inputs[index]
    if info.is_constant or not ctx.op.inputs[index].optional:
        return PRESENT, info.dimensions
    return MAYBE, info.dimensions  # a model input may be left without a value


def compiled_cell(
    ctx: OpContext,
    layout: CellLayout,
    *,
    input_index: int | None = None,
    time_major: bool | None = None,
) -> Geometry:
    """``check_cell`` on what compile time knows (``compile_state``, failing with
    ``ctx.fail``), worked out once per context: the device's shape proofs (``prepare``)
    and the kernel binding of one preparation ask the same question of the same context.
    The result is shared: nobody changes a Geometry."""
    return ctx.remember(
        ("check_cell", layout, input_index, time_major),
        lambda: check_cell(
            ctx,
            layout,
            lambda i: compile_state(ctx, i),
            ctx.fail,
            input_index=input_index,
            time_major=time_major,
        ),
    )


def runtime_state(arrays: Sequence) -> Callable[[int | None], tuple[str, Shape]]:
    """dims_of for arrays indexed by operand position (None = omitted)."""

    def state(index: int | None) -> tuple[str, Shape]:
        if index is None or index >= len(arrays) or arrays[index] is None:
            return ABSENT, None
        return PRESENT, arrays[index].shape

    return state


@dataclass
class Geometry:
    """Sizes and configuration of one cell; 0 = unknown size, None = unknown flag."""

    n_batch: int
    n_input: int
    n_cell: int
    n_output: int
    max_time: int
    cifg: bool | None
    peephole: bool | None
    layer_norm: bool | None
    projection: bool | None


class _Rules:
    def __init__(self, ctx: OpContext, state, fail) -> None:
        self.ctx, self.state, self.fail = ctx, state, fail

    def name(self, index: int) -> str:
        return f"input {index} ({self.ctx.op.inputs[index].name})"

    def dims(self, index: int) -> Shape:
        """Declared or actual dims of a tensor that is there; None when not checkable."""
        presence, dims = self.state(index)
        return dims if presence == PRESENT else None

    def shape(self, index: int, want: Sequence[tuple[int, str]]) -> None:
        dims = self.dims(index)
        if dims is None:
            return
        labels = ", ".join(label for _, label in want)
        if len(dims) != len(want):
            raise self.fail(
                f"{self.name(index)} has rank {len(dims)}; it must have rank {len(want)} "
                f"([{labels}])"
            )
        for axis, (d, (value, label)) in enumerate(zip(dims, want)):
            if d and value and d != value:
                raise self.fail(
                    f"{self.name(index)} has dimension {d} on axis {axis}; it must be "
                    f"{label} = {value} (dimensions [{labels}])"
                )

    def present(self, index: int | None) -> bool | None:
        presence = self.state(index)[0]
        return None if presence == MAYBE else presence == PRESENT


def _all_or_none(rules: _Rules, indexes: Sequence[int], what: str) -> bool | None:
    """All of ``indexes`` given or none; None while any presence is unknown."""
    known = [(i, rules.present(i)) for i in indexes]
    given = [i for i, p in known if p]
    missing = [i for i, p in known if p is False]
    if given and missing:
        raise rules.fail(
            f"{what} must be given all or none: {', '.join(rules.name(i) for i in given)} "
            f"given but {', '.join(rules.name(i) for i in missing)} omitted"
        )
    if any(p is None for _, p in known):
        return None
    return bool(given)


def check_cell(
    ctx: OpContext,
    layout: CellLayout,
    state,
    fail,
    *,
    input_index: int | None = None,
    time_major: bool | None = None,
) -> Geometry:
    """The reference's rules for one cell; returns its sizes (0 where unknown).

    ``time_major`` None means a single step (input [batch, input_size]).
    ``input_index`` overrides the cell input (the backward cell of a
    BIDIRECTIONAL_SEQUENCE_LSTM with parallel linking reads the aux input).
    """
    r = _Rules(ctx, state, fail)
    inp = layout.input if input_index is None else input_index
    in_dims = r.dims(inp)
    n_batch = n_input = max_time = 0
    if in_dims is not None:
        rank = 2 if time_major is None else 3
        if len(in_dims) != rank:
            shape = "[batch, input_size]" if rank == 2 else "[max_time, batch, input_size]"
            if time_major is False:
                shape = "[batch, max_time, input_size]"
            raise fail(f"{r.name(inp)} has rank {len(in_dims)}; it must be {shape}")
        n_input = in_dims[-1]
        if rank == 2:
            n_batch = in_dims[0]
        elif time_major:
            max_time, n_batch = in_dims[0], in_dims[1]
        else:
            n_batch, max_time = in_dims[0], in_dims[1]
    i2o, r2o = r.dims(layout.i2x[3]), r.dims(layout.r2x[3])
    n_cell = i2o[0] if i2o is not None and len(i2o) == 2 else 0
    if not n_cell and r2o is not None and len(r2o) == 2:
        n_cell = r2o[0]
    n_output = r2o[1] if r2o is not None and len(r2o) == 2 else 0

    cell_in = [(n_cell, "n_cell"), (n_input, "input_size")]
    cell_out = [(n_cell, "n_cell"), (n_output, "output_size")]
    for index in layout.i2x:
        r.shape(index, cell_in)
    for index in layout.r2x:
        r.shape(index, cell_out)
    for index in (*layout.c2x, *layout.bias, *(layout.ln or ())):
        r.shape(index, [(n_cell, "n_cell")])
    r.shape(layout.proj_w, [(n_output, "output_size"), (n_cell, "n_cell")])
    r.shape(layout.proj_b, [(n_output, "output_size")])
    r.shape(layout.h_in, [(n_batch, "batch"), (n_output, "output_size")])
    r.shape(layout.c_in, [(n_batch, "batch"), (n_cell, "n_cell")])

    cifg_given = _all_or_none(r, (layout.i2x[0], layout.r2x[0]), "the input gate weights")
    cifg = None if cifg_given is None else not cifg_given
    peephole = _peephole(r, layout, cifg)
    bias_i = r.present(layout.bias[0])
    if cifg is True and bias_i:
        raise fail(f"{r.name(layout.bias[0])} is given, but there is no input gate (CIFG)")
    if cifg is False and bias_i is False:
        raise fail(f"{r.name(layout.bias[0])} is required when the input gate weights are given")
    layer_norm = _layer_norm(r, layout, cifg)
    projection = r.present(layout.proj_w)
    if projection is False and r.present(layout.proj_b):
        raise fail(f"{r.name(layout.proj_b)} is given without {r.name(layout.proj_w)}")
    if projection is False and n_cell and n_output and n_cell != n_output:
        raise fail(
            f"without projection weights the output size ({n_output}, axis 1 of "
            f"{r.name(layout.r2x[3])}) must equal n_cell ({n_cell})"
        )
    return Geometry(
        n_batch, n_input, n_cell, n_output, max_time, cifg, peephole, layer_norm, projection
    )


def _peephole(r: _Rules, layout: CellLayout, cifg: bool | None) -> bool | None:
    ci, cf, co = layout.c2x
    needed = (cf, co) if cifg else (ci, cf, co)
    if cifg is None:
        return _all_or_none(r, (cf, co), "the peephole weights")
    result = _all_or_none(r, needed, "the peephole weights")
    if cifg and result is False and r.present(ci):
        raise r.fail(f"{r.name(ci)} is given without the other peephole weights")
    return result


def _layer_norm(r: _Rules, layout: CellLayout, cifg: bool | None) -> bool | None:
    if layout.ln is None:
        return False
    li, lf, lc, lo = layout.ln
    if cifg and r.present(li):
        raise r.fail(f"{r.name(li)} is given, but there is no input gate (CIFG)")
    needed = (lf, lc, lo) if cifg or cifg is None else (li, lf, lc, lo)
    return _all_or_none(r, needed, "the layer normalization weights")


def scalar_value(ctx: OpContext, index: int, default=None):
    """A scalar input's constant value, None when it is not a constant."""
    if ctx.is_omitted(index):
        return default
    value = ctx.inputs[index].value
    return None if value is None else value.reshape(-1)[0].item()


def check_nonnegative(ctx: OpContext, *indexes: int) -> None:
    for index in indexes:
        value = scalar_value(ctx, index)
        if value is not None and not value >= 0:
            raise ctx.fail(
                f"input {index} ({ctx.op.inputs[index].name}) is {value}; it must be >= 0 "
                "(0 disables clipping)"
            )


def tensor_positions(ctx: OpContext) -> dict[int, int]:
    """Operand position -> position among the kernel's (tensor) arguments."""
    scalars = set(scalar_input_indexes(ctx))
    positions, k = {}, 0
    for i in range(len(ctx.inputs)):
        if i not in scalars:
            positions[i] = k
            k += 1
    return positions


def fully_declared(info: OperandInfo) -> bool:
    return info.dimensions is not None and all(info.dimensions)


# ---------------------------------------------------------------------------
# Float math
# ---------------------------------------------------------------------------

#: LSTM's activation input: TfLiteFusedActivation values the reference's
#: ActivationFunctor accepts (NONE, RELU, RELU6, TANH, SIGMOID).
ACTIVATION_NAMES = {0: "NONE", 1: "RELU", 3: "RELU6", 4: "TANH", 6: "SIGMOID"}


def sigmoid(x: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-x)) without overflow (tanh form; within 1e-7 of the float32 reference)."""
    y = np.tanh(x * f32(0.5))
    y *= f32(0.5)
    y += f32(0.5)
    return y


def activation_fn(code: int) -> Callable[[np.ndarray], np.ndarray]:
    if code == 0:
        return lambda x: x
    if code == 1:
        return lambda x: np.maximum(x, f32(0))
    if code == 3:
        return lambda x: np.clip(x, f32(0), f32(6))
    if code == 4:
        return np.tanh
    if code == 6:
        return sigmoid
    raise ValueError(code)


def check_activation_value(ctx: OpContext, index: int) -> None:
    value = scalar_value(ctx, index)
    if value is not None and value not in ACTIVATION_NAMES:
        allowed = ", ".join(f"{name} ({v})" for v, name in ACTIVATION_NAMES.items())
        raise ctx.fail(f"input {index} (activation) has value {value}; supported: {allowed}")


def layer_norm(x: np.ndarray, weights: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """MeanStddevNormalization (epsilon 1e-8) over the last axis, then * weights + bias."""
    d = x - x.mean(axis=-1, keepdims=True)
    var = np.mean(d * d, axis=-1, keepdims=True)
    d /= np.sqrt(var + f32(1e-8))
    d *= weights
    d += bias
    return d
