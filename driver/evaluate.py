"""``evaluate``: run one operation from a REPL, through the same path as a model.

    >>> import numpy as np
    >>> from nnhal.driver.evaluate import evaluate
    >>> evaluate("ADD", [np.ones(3, np.float32), np.arange(3, dtype=np.float32)],
    ...          {"activation": 0})
    [array([1., 2., 3.], dtype=float32)]

The operation is built into a one-operation model with ``nnhal.builder`` and
compiled and run by the executor, so validation and kernels are exactly what a
prepared model gets (a bad argument raises InvalidArgument naming the operand
and rule).

- ``inputs``: the operation's inputs in order, as the registration lists them
  (``nnhal ops``): numpy arrays for tensors, Python ``int``/``float``/``bool``
  for scalars, ``None`` for an omitted optional input, or a ``Tensor`` for a
  quantized tensor (scale, zero point) or an explicit operand type.
- ``parameters``: inputs by their registered name (``{"activation": 0}``),
  after the positional ones; trailing optional inputs may be left out.
- ``outputs``: the output operand types when the registration does not fix
  them (a quantized output's scale and zero point, a type that is not the
  primary input's); by default each output takes the type its registration
  gives, else the primary input's type (and its scale and zero point).

A tensor input is a model input, unless given as ``Tensor(..., constant=True)``
(some operations need constant weights); scalars are constants.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from nnhal.driver.executor import compile_model
from nnhal.driver.ops import registry
from nnhal.driver.ops.registry import T

from nnhal.builder import ModelBuilder
from nnhal.errors import InvalidArgument
from nnhal.suggest import did_you_mean
from nnhal.types import OperandType, OperationType
from nnhal.validation import validate_model

_TENSOR_OF_DTYPE = {
    np.dtype(np.float32): OperandType.TENSOR_FLOAT32,
    np.dtype(np.float16): OperandType.TENSOR_FLOAT16,
    np.dtype(np.int32): OperandType.TENSOR_INT32,
    np.dtype(np.bool_): OperandType.TENSOR_BOOL8,
    np.dtype(np.uint8): OperandType.TENSOR_QUANT8_ASYMM,
    np.dtype(np.int8): OperandType.TENSOR_QUANT8_ASYMM_SIGNED,
    np.dtype(np.int16): OperandType.TENSOR_QUANT16_SYMM,
    np.dtype(np.uint16): OperandType.TENSOR_QUANT16_ASYMM,
}
_SCALARS = (OperandType.BOOL, OperandType.INT32, OperandType.FLOAT32, OperandType.FLOAT16,
            OperandType.UINT32)  # fmt: skip


@dataclass(frozen=True)
class Tensor:
    """A tensor input or output type with what a numpy array cannot say."""

    data: Any = None  # the values (inputs only)
    type: int | None = None  # OperandType; default from the data's dtype
    scale: float = 0.0
    zero_point: int = 0
    dimensions: Sequence[int] | None = None  # outputs: default unknown
    constant: bool = False

    def operand_type(self) -> int:
        if self.type is not None:
            return int(self.type)
        dtype = np.asarray(self.data).dtype
        if dtype not in _TENSOR_OF_DTYPE:
            raise InvalidArgument(f"no NNAPI tensor type for numpy dtype {dtype}; give type=")
        return _TENSOR_OF_DTYPE[dtype]


def _operation(operation: int | str) -> int:
    if isinstance(operation, str):
        try:
            return int(OperationType[operation.upper()])
        except KeyError:
            hint = did_you_mean(operation, OperationType.__members__)
            raise InvalidArgument(
                f"unknown operation {operation!r}{hint} (see `nnhal ops`)"
            ) from None
    return int(operation)


def _positions(definition: Any, names: Sequence[str]) -> dict[str, int]:
    """Input positions of ``names``. A registered name such as ``padding|padding_left``
    lists a position's meaning in each signature; the first signature in which every
    name has a position wins (CONV_2D's implicit or explicit padding)."""
    args = [a.name.split("|") for a in definition.inputs]
    for variant in range(max(len(a) for a in args) if args else 1):
        found: dict[str, int] = {}
        for name in names:
            for position, alternatives in enumerate(args):
                if alternatives[min(variant, len(alternatives) - 1)] == name:
                    found[name] = position
                    break
        if len(found) == len(names):
            return found
    known = sorted({n for a in args for n in a})
    missing = [n for n in names if n not in known]
    what = f"no input {missing[0]!r}" if missing else f"no signature with inputs {list(names)}"
    raise InvalidArgument(f"{definition.type.name} has {what} (its inputs: {', '.join(known)})")


def _arguments(definition: Any, inputs: Sequence[Any], parameters: Mapping[str, Any]) -> list:
    args = list(inputs)
    for name, position in _positions(definition, list(parameters)).items():
        if position < len(args) and args[position] is not None:
            raise InvalidArgument(f"{definition.type.name}: input {name!r} given twice")
        args.extend([None] * (position + 1 - len(args)))
        args[position] = parameters[name]
    while args and args[-1] is None and len(args) > definition.min_inputs:
        args.pop()
    return args


def _scalar_type(definition: Any, position: int, value: Any, primary: int) -> int:
    arg = definition.inputs[min(position, len(definition.inputs) - 1)]
    accepted = registry._accepted(arg.type, primary)
    wanted = (
        (OperandType.BOOL,) if isinstance(value, (bool, np.bool_))
        else (OperandType.INT32, OperandType.UINT32) if isinstance(value, (int, np.integer))
        else (OperandType.FLOAT32, OperandType.FLOAT16)
    )  # fmt: skip
    for code in wanted:
        if code in accepted:
            return int(code)
    raise InvalidArgument(
        f"{definition.type.name}: input {position} ({arg.name}) takes "
        f"{', '.join(OperandType(c).name for c in sorted(accepted) if c in _SCALARS) or 'a tensor'}"
        f"; got {type(value).__name__}"
    )


def evaluate(
    operation: int | str,
    inputs: Sequence[Any] = (),
    parameters: Mapping[str, Any] | None = None,
    *,
    outputs: Sequence[Tensor | int] | None = None,
) -> list[np.ndarray]:
    """Run one operation; one array per output (see the module docstring)."""
    code = _operation(operation)
    definition = registry.lookup(code)
    if definition is None:
        raise InvalidArgument(f"{OperationType(code).name} is not a single operation to evaluate")
    args = _arguments(definition, inputs, parameters or {})
    tensors = [a if isinstance(a, Tensor) else Tensor(a) if isinstance(a, np.ndarray) else None
               for a in args]  # fmt: skip
    if definition.primary >= len(args) or tensors[definition.primary] is None:
        raise InvalidArgument(
            f"{definition.type.name}: input {definition.primary} must be a tensor"
        )
    primary = tensors[definition.primary]
    primary_type = primary.operand_type()

    mb = ModelBuilder()
    g = mb.main
    indexes, feed = [], []
    for position, (value, tensor) in enumerate(zip(args, tensors)):
        if tensor is not None:
            data = np.asarray(tensor.data)
            type_ = tensor.operand_type()
            if tensor.constant:
                index = g.constant(type_, data, scale=tensor.scale, zero_point=tensor.zero_point)
            else:
                index = g.input(type_, data.shape, scale=tensor.scale, zero_point=tensor.zero_point)
                feed.append(data)
        elif value is None:
            arg = definition.inputs[min(position, len(definition.inputs) - 1)]
            index = g.no_value(next(iter(registry._accepted(arg.type, primary_type))))
        else:
            index = g.constant(_scalar_type(definition, position, value, primary_type), value)
        indexes.append(index)

    specs = list(outputs) if outputs is not None else [None] * definition.min_outputs
    out_indexes = []
    for k, spec in enumerate(specs):
        if isinstance(spec, int):
            spec = Tensor(type=spec)
        if spec is None or spec.type is None:
            rule = definition.outputs[min(k, len(definition.outputs) - 1)].type
            accepted = registry._accepted(rule, primary_type)
            type_ = primary_type if rule == T or len(accepted) != 1 else next(iter(accepted))
            same = type_ == primary_type
            spec = Tensor(
                type=type_,
                scale=primary.scale if same else 0.0,
                zero_point=primary.zero_point if same else 0,
                dimensions=None if spec is None else spec.dimensions,
            )
        dims = spec.dimensions if spec.dimensions is not None else None
        out_indexes.append(g.output(spec.type, dims, scale=spec.scale, zero_point=spec.zero_point))
    g.operation(code, indexes, out_indexes)
    model = mb.build()
    validate_model(model)
    return compile_model(model).run(feed)
