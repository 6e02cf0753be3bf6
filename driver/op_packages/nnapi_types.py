"""Canonical op-package datatypes -> NNAPI operand types.

| datatype | tensor operand | scalar operand |
|---|---|---|
| FLOAT_32 | TENSOR_FLOAT32 | FLOAT32 |
| FLOAT_16 | TENSOR_FLOAT16 | FLOAT16 |
| INT_32 | TENSOR_INT32 | INT32 |
| UINT_32 | extension type 7 | UINT32 |
| BOOL_8 | TENSOR_BOOL8 | BOOL |
| UFIXED_POINT_8 (SNPE FIXED_8) | TENSOR_QUANT8_ASYMM | - |
| SFIXED_POINT_8 | TENSOR_QUANT8_ASYMM_SIGNED | - |
| UFIXED_POINT_16 (SNPE FIXED_16) | TENSOR_QUANT16_ASYMM | - |
| SFIXED_POINT_16 | TENSOR_QUANT16_SYMM | - |

Types with no NNAPI equivalent become **extension operand types** of the
package (``(prefix << 16) | code``, listed by getSupportedExtensions with
their byte size): INT_64 = 0, UINT_64 = 1, FLOAT_64 = 2, INT_8 = 3,
UINT_8 = 4, INT_16 = 5, UINT_16 = 6, UINT_32 = 7, SFIXED_POINT_32 = 8,
UFIXED_POINT_32 = 9, BFLOAT_16 = 10 (Ascend ``bfloat16``; its bit patterns
arrive as uint16 since numpy has no bfloat16) as tensors; the same codes + 16 as scalars.
Types that have neither an NNAPI type nor a fixed byte size are **refused**
with a message: the 4-bit fixed-point types (SFIXED_POINT_4, UFIXED_POINT_4,
SNPE FIXED_4: NNAPI has no sub-byte operands) and STRING.
"""

from __future__ import annotations

import numpy as np

from nnhal.types import OperandType as T

TENSOR = {
    "FLOAT_32": T.TENSOR_FLOAT32,
    "FLOAT_16": T.TENSOR_FLOAT16,
    "INT_32": T.TENSOR_INT32,
    "BOOL_8": T.TENSOR_BOOL8,
    "UFIXED_POINT_8": T.TENSOR_QUANT8_ASYMM,
    "SFIXED_POINT_8": T.TENSOR_QUANT8_ASYMM_SIGNED,
    "UFIXED_POINT_16": T.TENSOR_QUANT16_ASYMM,
    "SFIXED_POINT_16": T.TENSOR_QUANT16_SYMM,
}
SCALAR = {
    "FLOAT_32": T.FLOAT32,
    "FLOAT_16": T.FLOAT16,
    "INT_32": T.INT32,
    "UINT_32": T.UINT32,
    "BOOL_8": T.BOOL,
}
#: datatype -> (code within the extension, byte size, numpy dtype)
EXTENSION = {
    "INT_64": (0, 8, np.int64),
    "UINT_64": (1, 8, np.uint64),
    "FLOAT_64": (2, 8, np.float64),
    "INT_8": (3, 1, np.int8),
    "UINT_8": (4, 1, np.uint8),
    "INT_16": (5, 2, np.int16),
    "UINT_16": (6, 2, np.uint16),
    "UINT_32": (7, 4, np.uint32),
    "SFIXED_POINT_32": (8, 4, np.int32),
    "UFIXED_POINT_32": (9, 4, np.uint32),
    # bfloat16 has no numpy dtype: kernels see its bit patterns as uint16
    "BFLOAT_16": (10, 2, np.uint16),
}
SCALAR_EXTENSION_OFFSET = 16
REFUSED = {
    "SFIXED_POINT_4": "4-bit fixed point has no NNAPI operand type (NNAPI has no sub-byte "
    "operands)",
    "UFIXED_POINT_4": "4-bit fixed point has no NNAPI operand type (NNAPI has no sub-byte "
    "operands)",
    "STRING": "strings have no NNAPI operand type and no fixed byte size",
}


def refused(datatype: str) -> str | None:
    """Why a datatype cannot be used at all, or None."""
    return REFUSED.get(datatype)


def nnapi_types(datatype: str, scalar: bool, prefix: int) -> frozenset[int]:
    """The NNAPI operand type codes a datatype stands for (prefix for extension types)."""
    table = SCALAR if scalar else TENSOR
    if datatype in table:
        return frozenset({int(table[datatype])})
    if datatype in EXTENSION:
        code = EXTENSION[datatype][0] + (SCALAR_EXTENSION_OFFSET if scalar else 0)
        return frozenset({(prefix << 16) | code})
    return frozenset()


def extension_operand_types(datatypes: set[str]) -> list[tuple[int, bool, int]]:
    """(code, isTensor, byteSize) of the extension operand types a package uses."""
    out = []
    for dt in sorted(datatypes & EXTENSION.keys(), key=lambda d: EXTENSION[d][0]):
        code, size, _ = EXTENSION[dt]
        out.append((code, True, size))
        out.append((code + SCALAR_EXTENSION_OFFSET, False, size))
    return out


def extension_dtype(code_within: int) -> np.dtype | None:
    base = code_within % SCALAR_EXTENSION_OFFSET
    for c, _, dt in EXTENSION.values():
        if c == base:
            return np.dtype(dt)
    return None


def is_extension_datatype(datatype: str, scalar: bool) -> bool:
    """Whether a datatype becomes an extension operand type of its package."""
    return datatype in EXTENSION and datatype not in (SCALAR if scalar else TENSOR)
