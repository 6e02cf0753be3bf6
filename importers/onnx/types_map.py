"""ONNX element types to NNAPI operand types, and values to what NNAPI holds.

NNAPI 1.3 has no 64-bit integers: INT64 tensors become TENSOR_INT32 (as
ONNX Runtime's NNAPI execution provider narrows int64 initializers); a
constant or an input value outside the int32 range is an error, never a
silent wrap. Rank-0 ONNX tensors become shape [1] (NNAPI tensors of rank 0
mean "unknown rank"). UINT8 / INT8 tensors are NNAPI quantized tensors and
need a scale and zero point (from the QuantizeLinear / DequantizeLinear /
QLinear* nodes around them).
"""

from __future__ import annotations

import numpy as np

from nnhal.types import OperandType

from .errors import Unsupported

T = OperandType

# onnx.TensorProto.DataType numbers (stable in the ONNX spec)
FLOAT, UINT8, INT8, UINT16, INT16, INT32, INT64, STRING, BOOL, FLOAT16, DOUBLE = (
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11,
)  # fmt: skip

_PLAIN = {
    FLOAT: T.TENSOR_FLOAT32,
    FLOAT16: T.TENSOR_FLOAT16,
    INT32: T.TENSOR_INT32,
    INT64: T.TENSOR_INT32,
    BOOL: T.TENSOR_BOOL8,
}
_QUANT = {UINT8: T.TENSOR_QUANT8_ASYMM, INT8: T.TENSOR_QUANT8_ASYMM_SIGNED}

#: NNAPI type -> numpy dtype of the values an NNAPI buffer holds
NP_DTYPE = {
    T.TENSOR_FLOAT32: np.float32,
    T.TENSOR_FLOAT16: np.float16,
    T.TENSOR_INT32: np.int32,
    T.TENSOR_BOOL8: np.bool_,
    T.TENSOR_QUANT8_ASYMM: np.uint8,
    T.TENSOR_QUANT8_ASYMM_SIGNED: np.int8,
}


def elem_name(elem: int) -> str:
    try:
        from onnx import TensorProto

        return TensorProto.DataType.Name(elem)
    except (ImportError, ValueError):
        return str(elem)


def nnapi_type(elem: int, quantized: bool = False) -> int:
    """The NNAPI tensor type for an ONNX element type (Unsupported if none)."""
    if elem in _PLAIN:
        return int(_PLAIN[elem])
    if elem in _QUANT:
        if not quantized:
            raise Unsupported(
                f"{elem_name(elem)} tensor without quantization parameters (NNAPI has"
                " only quantized 8-bit tensors)"
            )
        return int(_QUANT[elem])
    raise Unsupported(f"element type {elem_name(elem)} has no NNAPI tensor type")


def nnapi_dims(shape: tuple | None) -> tuple[int, ...]:
    """NNAPI dimensions: unknown axes 0, rank 0 as [1], unknown rank as ()."""
    if shape is None:
        return ()
    if len(shape) == 0:
        return (1,)
    return tuple(0 if d is None else int(d) for d in shape)


def to_nnapi_value(value: np.ndarray, type_code: int, what: str) -> np.ndarray:
    """An ONNX value as the NNAPI operand's numpy value (int64 narrowed, checked)."""
    arr = np.asarray(value)
    dtype = NP_DTYPE[type_code]
    if arr.dtype.kind in "iu" and np.dtype(dtype) == np.int32 and arr.size:
        lo, hi = arr.min(), arr.max()
        if lo < -(2**31) or hi > 2**31 - 1:
            raise Unsupported(f"{what}: int64 values {lo}..{hi} do not fit NNAPI's int32")
    out = arr.astype(dtype)
    return out.reshape(1) if out.ndim == 0 else out
