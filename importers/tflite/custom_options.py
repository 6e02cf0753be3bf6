"""A TFLite custom operator's options as the parameters of an op-package operation.

A custom operator carries its attributes as ``custom_options`` bytes, a
FlexBuffer map by TFLite convention (``custom_options_format`` FLEXBUFFERS,
the only format the schema has; ``flatbuffers.flexbuffers`` decodes it). An
op-package operation takes its parameters as operands after its inputs, in
definition order (docs/op-packages.md). ``param_operands`` matches the two by
name: each declared parameter takes the map's value of the same name (names
compared as written, then case-insensitively), typed as the definition says;
a missing optional parameter takes the definition's default when a later one
is given, trailing ones are left off; a missing mandatory one refuses the
node. Keys the definition does not declare are reported, not passed.

The definition's parameters come as :class:`CustomParam` records (the tools
layer makes them from a loaded op package; this layer never imports the driver).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from nnhal.importers.tflite.ops import Unsupported

from nnhal.types import OperandType as T

if TYPE_CHECKING:  # pragma: no cover
    from nnhal.importers.tflite.convert import OpContext
    from nnhal.importers.tflite.reader import TfOperator

__all__ = ["CustomParam", "decode_options", "param_operands"]


@dataclass(frozen=True)
class CustomParam:
    """One parameter of an op-package operation, in definition order."""

    name: str
    #: canonical op-package datatypes allowed (FLOAT_32, INT_32, BOOL_8, ...); empty = any
    datatypes: tuple[str, ...] = ()
    scalar: bool = True
    mandatory: bool = False
    default: Any = None


_SCALAR = {"FLOAT_32": T.FLOAT32, "FLOAT_16": T.FLOAT16, "INT_32": T.INT32, "BOOL_8": T.BOOL,
           "UINT_32": T.UINT32}  # fmt: skip
_TENSOR = {"FLOAT_32": (T.TENSOR_FLOAT32, np.float32), "FLOAT_16": (T.TENSOR_FLOAT16, np.float16),
           "INT_32": (T.TENSOR_INT32, np.int32), "BOOL_8": (T.TENSOR_BOOL8, np.bool_)}  # fmt: skip


def decode_options(op: TfOperator) -> dict[str, Any]:
    """The custom options as a dict ({} when there are none); Unsupported when the bytes
    are not a FlexBuffer map."""
    if not op.custom_options:
        return {}
    from flatbuffers import flexbuffers

    try:
        value = flexbuffers.Loads(op.custom_options)
    except (ValueError, IndexError, KeyError, TypeError, OverflowError, RecursionError) as e:
        raise Unsupported(
            f"custom options are not a FlexBuffer map ({type(e).__name__}: {e})"
        ) from None
    if not isinstance(value, dict):
        raise Unsupported(
            f"custom options are not a FlexBuffer map (they decode to {type(value).__name__})"
        )
    return value


def _datatype(param: CustomParam, value: Any) -> str:
    """The declared datatype the value is given as: the first one nnhal can make an operand
    of, or (any datatype allowed) the value's own kind."""
    table = _SCALAR if param.scalar else _TENSOR
    for d in param.datatypes:
        if d in table:
            return d
    if param.datatypes and param.datatypes != ("BACKEND_SPECIFIC",):
        raise Unsupported(
            f"parameter {param.name!r} is {'/'.join(param.datatypes)}, which custom options "
            "cannot give (FLOAT_32, FLOAT_16, INT_32, BOOL_8"
            + (", UINT_32)" if param.scalar else ")")
        )
    leaf = value
    while isinstance(leaf, (list, tuple)) and leaf:
        leaf = leaf[0]
    if isinstance(leaf, bool):
        return "BOOL_8"
    return "INT_32" if isinstance(leaf, int) else "FLOAT_32"


def _operand(ctx: OpContext, param: CustomParam, value: Any) -> Any:
    datatype = _datatype(param, value)
    if param.scalar:
        if isinstance(value, (list, tuple, dict, str, bytes)):
            raise Unsupported(f"parameter {param.name!r} is a scalar; the option is {value!r}")
        code = _SCALAR[datatype]
        value = (
            bool(value)
            if code == T.BOOL
            else int(value)
            if code in (T.INT32, T.UINT32)
            else float(value)
        )
        if code == T.UINT32 and value < 0:
            raise Unsupported(f"parameter {param.name!r} is UINT_32; the option is {value}")
        return ctx.scalars(code, value)[0]
    code, dtype = _TENSOR[datatype]
    try:
        arr = np.asarray(value, dtype=dtype)
    except (TypeError, ValueError) as e:
        raise Unsupported(
            f"parameter {param.name!r}: the option {value!r} is not a tensor ({e})"
        ) from None
    if arr.ndim == 0:
        arr = arr.reshape(1)
    return ctx.const_tensor(code, arr)


def _lookup(options: dict[str, Any], name: str) -> tuple[bool, Any]:
    if name in options:
        return True, options[name]
    for key, value in options.items():
        if isinstance(key, str) and key.lower() == name.lower():
            return True, value
    return False, None


def param_operands(
    ctx: OpContext, op: TfOperator, params: Sequence[CustomParam]
) -> tuple[list[Any], list[str]]:
    """The parameter operands for ``op`` and the option keys nobody declared."""
    options = decode_options(op)
    found = [_lookup(options, p.name) for p in params]
    last = max((k for k, (present, _) in enumerate(found) if present), default=-1)
    operands = []
    for k, (param, (present, value)) in enumerate(zip(params, found)):
        if not present:
            if param.mandatory:
                raise Unsupported(
                    f"the custom options give no {param.name!r}, which the definition requires"
                    + (f" (options: {sorted(map(str, options))})" if options else "")
                )
            if k > last:
                break  # trailing optional parameters are left off: the kernel's defaults
            if param.default is None:
                raise Unsupported(
                    f"the custom options skip {param.name!r}, which has no default, but give "
                    f"a later parameter {params[last].name!r}"
                )
            value = param.default
        operands.append(_operand(ctx, param, value))
    declared = {p.name.lower() for p in params}
    unknown = sorted(str(k) for k in options if str(k).lower() not in declared)
    return operands, unknown
