"""The operation registry: one registration per OperationType.

As in the AOSP OperationResolver, each operation keeps three phases apart:

- **validate**: arity and the type table (generic, from the registration as
  data), plus an optional op-specific check of ranks and constant parameters.
  Sees operand descriptions and constant values, never runtime data. Gives the
  lowest HAL version the operation needs.
- **prepare**: output shapes from input shapes (and constant values). Unknown
  axes are 0, an unknown rank is ``None``.
- **execute**: binds the scalar parameters once (activation, axis...) and
  returns a *kernel*: ``kernel(*tensor_inputs) -> ndarray | tuple[ndarray]``.
  The kernel receives the tensor-typed inputs only, in operand order (an
  omitted optional tensor arrives as ``None``); scalar inputs are read from the
  context at bind time. Kernels return fresh arrays whose dtype is the output
  operand type's numpy dtype.

IF and WHILE are not registered here: the executor owns them, validation owns
their static rules.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from nnhal.errors import GeneralFailure, InvalidArgument
from nnhal.types import (
    OPERAND_TYPE_INFO,
    ExtraParams,
    HalVersion,
    OperandType,
    OperationType,
    type_name,
)

Shape = tuple[int, ...] | None  # None = unknown rank; 0 in an axis = unknown


@dataclass(frozen=True, init=False)
class OperandInfo:
    """What validate/prepare/execute may know about one operand."""

    type: int
    dimensions: Shape  # None when the rank is unknown
    scale: float = 0.0
    zeroPoint: int = 0
    extraParams: ExtraParams = None
    value: np.ndarray | None = None  # constant value (CONSTANT_COPY/REFERENCE)
    omitted: bool = False  # NO_VALUE, or an optional input left off the list

    def __init__(
        self,
        type: int,
        dimensions: Shape,
        scale: float = 0.0,
        zeroPoint: int = 0,
        extraParams: ExtraParams = None,
        value: np.ndarray | None = None,
        omitted: bool = False,
    ) -> None:
        # Frozen: written once, here, into the instance's dict (the generated __init__'s
        # object.__setattr__ per field was half the cost of describing an operand, and
        # preparation describes every operand of the model).
        fields = self.__dict__
        fields["type"] = type
        fields["dimensions"] = dimensions
        fields["scale"] = scale
        fields["zeroPoint"] = zeroPoint
        fields["extraParams"] = extraParams
        fields["value"] = value
        fields["omitted"] = omitted

    @property
    def is_constant(self) -> bool:
        return self.value is not None

    @property
    def rank(self) -> int | None:
        return None if self.dimensions is None else len(self.dimensions)


class ValueNotConstant(InvalidArgument):
    """A check or binding needs the value of a scalar input that is not a constant.

    The executor catches it to bind that step at run time, when the value is known.
    """


#: a type rule for one operand: the primary type "T", one concrete type, a set
#: of types, or a function of T giving the accepted set.
TypeRule = str | int | frozenset | Callable[[int], frozenset]
T = "T"


@dataclass(frozen=True)
class Arg:
    """One input or output position of an operation."""

    name: str
    type: TypeRule = T
    optional: bool = False  # may be NO_VALUE, or left off when trailing


@dataclass
class OpContext:
    """Operand descriptions handed to validate, prepare and execute."""

    op: OperationDef
    inputs: list[OperandInfo]
    outputs: list[OperandInfo]
    relaxed: bool = False  # Model.relaxComputationFloat32toFloat16
    where: str = ""  # "subgraph 0, operation 3" for messages
    #: ``remember``'s results; a context made by ``dataclasses.replace`` starts empty
    _remembered: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.op.type.name

    def remember(self, key: Any, make: Callable[[], Any]) -> Any:
        """``make()``, computed once per context and ``key`` (a failure is not kept).

        For what an operation reads from its descriptions in several phases: the
        device's checks, the shape proofs and the kernel binding of one preparation
        ask the same context for the same parameters. Only for pure functions of
        ``inputs`` and ``outputs``, which nobody changes in place (a different call
        is a new context: ``dataclasses.replace``, ``LateBinding``).
        """
        memo = self._remembered
        if key in memo:
            return memo[key]
        value = make()
        memo[key] = value
        return value

    @property
    def primary_type(self) -> int:
        return self.inputs[self.op.primary].type

    def fail(self, message: str) -> InvalidArgument:
        """An INVALID_ARGUMENT naming the operation (raise the result)."""
        prefix = f"{self.name} ({self.where})" if self.where else self.name
        return InvalidArgument(f"{prefix}: {message}")

    def is_omitted(self, index: int) -> bool:
        return index >= len(self.inputs) or self.inputs[index].omitted

    def scalar(self, index: int, default: Any = None) -> Any:
        """Python value of scalar input ``index`` (default when omitted)."""
        if self.is_omitted(index):
            return default
        value = self.inputs[index].value
        if value is None:
            message = self.fail(f"input {index} ({self._arg_name(index)}) must be a constant")
            raise ValueNotConstant(message.message)
        return value.item() if value.ndim == 0 or value.size == 1 else value

    def constant(self, index: int) -> np.ndarray | None:
        if self.is_omitted(index):
            return None
        return self.inputs[index].value

    def _arg_name(self, index: int) -> str:
        args = self.op.inputs
        if index < len(args):
            return args[index].name
        return args[-1].name if self.op.variadic else "?"


Kernel = Callable[..., Any]


@dataclass(frozen=True)
class OperationDef:
    type: OperationType
    inputs: tuple[Arg, ...]
    outputs: tuple[Arg, ...]
    #: primary type T -> lowest HAL version for that type
    types: Mapping[int, HalVersion]
    execute: Callable[[OpContext], Kernel]
    prepare: Callable[[OpContext], list[Shape]] | None = None
    #: extra static checks; may return a higher minimum HAL version
    validate: Callable[[OpContext], HalVersion | None] | None = None
    #: which input carries the primary type T
    primary: int = 0
    #: the first input (``inputs[0]``) repeats: CONCATENATION's n tensors
    variadic: bool = False
    #: the single output position repeats (at least once): SPLIT's num_splits outputs
    variadic_outputs: bool = False
    #: the outputs are a function of the inputs alone. False (RANDOM_MULTINOMIAL's
    #: draws): the executor never computes it once for several uses, e.g. never
    #: hoists it out of a WHILE body as loop-invariant
    pure: bool = True
    #: the reference accepts zero-sized input tensors (a 0 in a run-time shape).
    #: False: an execution handing one to any input fails with GENERAL_FAILURE,
    #: as AOSP's checkNoZeroSizedInput does for operations registered without
    #: allowZeroSizedInput. ``kernel`` enforces it; kernels never check.
    zero_sized_inputs: bool = True
    #: which input is this call's NCHW ``layout`` flag (a BOOL; true = NCHW, since HAL
    #: 1.2): an index, or a function of the call where the place depends on the
    #: signature (CONV_2D's implicit or explicit padding); None: the operation has no
    #: layout. Left off the input list it means NHWC; given as NO_VALUE it is refused by
    #: ``validate_operation``, once for every operation. ``layout.layout_is_nchw`` reads it.
    layout: int | Callable[[OpContext], int | None] | None = None

    def layout_index(self, ctx: OpContext) -> int | None:
        """The input index of ``ctx``'s layout flag, or None when the call has none."""
        index = self.layout(ctx) if callable(self.layout) else self.layout
        return index if index is not None and index < len(ctx.inputs) else None

    def kernel(self, ctx: OpContext) -> Kernel:
        """The kernel bound to ``ctx``, with the registration's rules applied.

        The executor, late binding and tests bind kernels here, never through
        ``execute`` directly, so the zero-sized rule holds everywhere.
        """
        kernel = self.execute(ctx)
        if self.zero_sized_inputs or not callable(kernel):
            return kernel
        return _refusing_zero_sized(ctx, kernel)

    @cached_property  # read for every operation checked (the dataclass is frozen, not slotted)
    def min_inputs(self) -> int:
        return _required(self.inputs)

    @cached_property
    def min_outputs(self) -> int:
        """Trailing optional outputs may be left off (the sequence ops' state outputs)."""
        return _required(self.outputs)


def _refusing_zero_sized(ctx: OpContext, kernel: Kernel) -> Kernel:
    """``kernel`` checking its tensor arguments for zero sizes first.

    Only arguments whose shape is not known to be non-empty at bind time are
    checked (a fully specified shape has no 0: NNAPI's 0 means unknown), so a
    model of known shapes pays nothing.
    """
    tensors = [
        (index, info)
        for index, info in enumerate(ctx.inputs)
        if not (info.type in OPERAND_TYPE_INFO and OPERAND_TYPE_INFO[info.type].is_scalar)
    ]
    checked = tuple(
        (position, index, ctx._arg_name(index))
        for position, (index, info) in enumerate(tensors)
        if not info.omitted and (info.dimensions is None or 0 in info.dimensions)
    )
    if not checked:
        return kernel
    prefix = f"{ctx.name} ({ctx.where})" if ctx.where else ctx.name

    def refusing_zero_sized(*args: Any) -> Any:
        for position, index, name in checked:
            x = args[position]
            if x is not None and x.size == 0:
                raise GeneralFailure(
                    f"{prefix}: zero-sized input: input {index} ({name}) has shape "
                    f"{tuple(x.shape)}; this operation does not accept zero-sized inputs"
                )
        return kernel(*args)

    return refusing_zero_sized


def _required(args: tuple[Arg, ...]) -> int:
    n = len(args)
    while n and args[n - 1].optional:
        n -= 1
    return n


_REGISTRY: dict[int, OperationDef] = {}


def register(definition: OperationDef) -> OperationDef:
    if definition.type in _REGISTRY:
        raise ValueError(f"{definition.type.name} registered twice")
    _REGISTRY[definition.type] = definition
    return definition


def lookup(op_type: int) -> OperationDef | None:
    if not _loaded:  # (tested here: every check of every operation looks its definition up)
        _load_all()
    return _REGISTRY.get(op_type)


def registered() -> dict[int, OperationDef]:
    _load_all()
    return dict(_REGISTRY)


_loaded = False
_loading = False
_load_lock = threading.RLock()


def _load_all() -> None:
    """Import every operation module once (they register on import).

    Thread-safe: concurrent first calls on a fresh server wait for the whole
    registry instead of seeing a half-loaded one. Re-entrant, because the
    operation modules call ``register`` (and may call ``lookup``) while loading.
    """
    global _loaded, _loading
    if _loaded:
        return
    with _load_lock:
        if _loaded or _loading:  # _loading: a nested call from a module being loaded
            return
        _loading = True
        try:
            from nnhal.driver.ops import _all  # noqa: F401  (side effect: registrations)
        finally:
            _loading = False
        _loaded = True


# ---------------------------------------------------------------------------
# Generic validation from the registration data
# ---------------------------------------------------------------------------


def _accepted(rule: TypeRule, primary: int) -> frozenset:
    if rule == T:
        return frozenset({primary})
    if isinstance(rule, int):
        return frozenset({rule})
    if isinstance(rule, frozenset):
        return rule
    return frozenset(rule(primary))


def _accepts(rule: TypeRule, primary: int, code: int) -> bool:
    """``code in _accepted(rule, primary)`` without building the set: every operand of
    every operation is checked here, and the set is only needed for the message."""
    if rule == T:
        return code == primary
    if isinstance(rule, int):
        return code == rule
    if isinstance(rule, frozenset):
        return code in rule
    return code in frozenset(rule(primary))


def _names(types) -> str:
    return ", ".join(sorted(type_name(t) for t in types))


def validate_operation(ctx: OpContext) -> HalVersion:
    """Check arity and types, then the op's own rules; return the HAL version needed.

    Raises InvalidArgument naming the operation, the operand and the rule.
    """
    op = ctx.op
    n_in, n_out = len(ctx.inputs), len(ctx.outputs)
    if op.variadic:
        fixed = len(op.inputs) - 1
        if n_in < fixed + 1:
            raise ctx.fail(f"expected at least {fixed + 1} inputs, got {n_in}")
    elif not op.min_inputs <= n_in <= len(op.inputs):
        want = (
            str(len(op.inputs))
            if op.min_inputs == len(op.inputs)
            else f"{op.min_inputs} to {len(op.inputs)}"
        )
        raise ctx.fail(f"expected {want} inputs, got {n_in}")
    if op.variadic_outputs:
        if n_out < 1:
            raise ctx.fail(f"expected at least 1 output, got {n_out}")
    elif not op.min_outputs <= n_out <= len(op.outputs):
        want = (
            str(len(op.outputs))
            if op.min_outputs == len(op.outputs)
            else f"{op.min_outputs} to {len(op.outputs)}"
        )
        raise ctx.fail(f"expected {want} outputs, got {n_out}")

    primary = ctx.inputs[op.primary].type
    if primary not in op.types:
        raise ctx.fail(
            f"input {op.primary} ({op.inputs[op.primary].name}) has type {type_name(primary)};"
            f" supported: "
            + ", ".join(f"{OperandType(t).name} ({v})" for t, v in sorted(op.types.items()))
        )
    version = op.types[primary]

    args = op.inputs
    if op.variadic:  # the first argument repeats: one per input beyond the fixed ones
        args = (args[0],) * (n_in - len(args) + 1) + args[1:]
    for i, (info, arg) in enumerate(zip(ctx.inputs, args)):
        if info.omitted and not arg.optional:
            raise ctx.fail(f"input {i} ({arg.name}) is required but has no value")
        # A NO_VALUE operand still declares a type, and the reference checks it.
        rule = arg.type
        if rule == T and info.type == primary:
            continue  # the common case, without a call
        if not _accepts(rule, primary, info.type):
            accepted = _accepted(arg.type, primary)
            raise ctx.fail(
                f"input {i} ({arg.name}) has type {type_name(info.type)}; "
                f"with {type_name(primary)} supported: {_names(accepted)}"
            )
    for i, info in enumerate(ctx.outputs):
        arg = op.outputs[0] if op.variadic_outputs else op.outputs[i]
        if not _accepts(arg.type, primary, info.type):
            accepted = _accepted(arg.type, primary)
            raise ctx.fail(
                f"output {i} ({arg.name}) has type {type_name(info.type)}; "
                f"with {type_name(primary)} supported: {_names(accepted)}"
            )
    if op.layout is not None:
        layout = op.layout_index(ctx)
        if layout is not None and ctx.inputs[layout].omitted:
            raise ctx.fail(
                f"input {layout} (layout) has no value; leave it off the input list for NHWC "
                "or give a BOOL"
            )
    if op.validate is not None:
        try:
            extra = op.validate(ctx)
        except ValueNotConstant:
            # The op's own checks need a scalar known only at execution (a model
            # input): the executor binds that step late and runs them then.
            extra = None
        if extra is not None and extra > version:
            version = extra
    return version


def scalar_input_indexes(ctx: OpContext) -> list[int]:
    """Inputs the kernel does not receive (scalars, bound at execute time)."""
    return [
        i
        for i, info in enumerate(ctx.inputs)
        if info.type in OPERAND_TYPE_INFO and OPERAND_TYPE_INFO[info.type].is_scalar
    ]
