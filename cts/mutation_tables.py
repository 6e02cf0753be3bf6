"""Data tables of the VTS 1.3 ValidateModel mutations (hal13.md §5.4).

Which invalid values each mutation uses, and the skip rules: combinations
that are legitimately valid, so mutating them would not make a model
invalid. Used by ``nnhal.cts.mutations``; numbers in comments are the §5.4 items.
"""

from __future__ import annotations

from nnhal.types import OperandType, OperationType

_T = OperandType
_O = OperationType

# ---------------------------------------------------------------------------
# Tables (data)
# ---------------------------------------------------------------------------

#: 2. FUNDAMENTAL_MIN - 1 (as int32), FUNDAMENTAL_MAX + 1, OEM_MIN - 1, OEM_MAX + 1
INVALID_OPERAND_TYPES: tuple[int, ...] = (-1, 16, 9999, 10002)

#: 11. FUNDAMENTAL_MAX + 1, OEM_MIN - 1, OEM_MAX + 1
INVALID_OPERATION_TYPES: tuple[int, ...] = (102, 9999, 10001)

#: 3. scalar types that get dimensions [0] (rank 1); tensors are not mutated.
INVALID_RANK_TYPES: frozenset[int] = frozenset(
    {_T.FLOAT16, _T.FLOAT32, _T.INT32, _T.UINT32, _T.BOOL}
)

#: 4. the scale each fundamental type must not have.
INVALID_SCALES: dict[int, float] = {
    **dict.fromkeys(
        (_T.FLOAT16, _T.FLOAT32, _T.INT32, _T.UINT32, _T.BOOL, _T.TENSOR_BOOL8, _T.TENSOR_FLOAT16,
         _T.TENSOR_FLOAT32, _T.TENSOR_QUANT8_SYMM_PER_CHANNEL, _T.SUBGRAPH),
        1.0,
    ),
    _T.TENSOR_INT32: -1.0,
    **dict.fromkeys(
        (_T.TENSOR_QUANT8_SYMM, _T.TENSOR_QUANT8_ASYMM, _T.TENSOR_QUANT16_ASYMM,
         _T.TENSOR_QUANT16_SYMM, _T.TENSOR_QUANT8_ASYMM_SIGNED),
        0.0,
    ),
}  # fmt: skip

#: 5. zero points each type must not have (types not listed are not mutated).
INVALID_ZERO_POINTS: dict[int, tuple[int, ...]] = {
    **dict.fromkeys(
        (_T.FLOAT16, _T.FLOAT32, _T.INT32, _T.UINT32, _T.BOOL, _T.TENSOR_BOOL8, _T.TENSOR_FLOAT16,
         _T.TENSOR_FLOAT32, _T.TENSOR_INT32, _T.TENSOR_QUANT8_SYMM_PER_CHANNEL, _T.SUBGRAPH),
        (1,),
    ),
    _T.TENSOR_QUANT8_ASYMM: (-1, 256),
    _T.TENSOR_QUANT8_SYMM: (-129, -1, 1, 128),
    _T.TENSOR_QUANT16_ASYMM: (-1, 65536),
    _T.TENSOR_QUANT16_SYMM: (-32769, -1, 1, 32768),
}  # fmt: skip

_FLOATS = frozenset({_T.TENSOR_FLOAT16, _T.TENSOR_FLOAT32})
_Q8_ASYMM = frozenset({_T.TENSOR_QUANT8_ASYMM, _T.TENSOR_QUANT8_ASYMM_SIGNED})
_RANK_INPUTS = frozenset(
    {_T.TENSOR_FLOAT16, _T.TENSOR_FLOAT32, _T.TENSOR_INT32, _T.TENSOR_QUANT8_ASYMM,
     _T.TENSOR_QUANT16_SYMM, _T.TENSOR_BOOL8, _T.TENSOR_QUANT8_SYMM_PER_CHANNEL,
     _T.TENSOR_QUANT16_ASYMM, _T.TENSOR_QUANT8_SYMM, _T.TENSOR_QUANT8_ASYMM_SIGNED}
)  # fmt: skip
_ANY_TYPE = None
_ANY_OPERAND = None

#: 10. (operation, operand position, new types) combinations that are legal, so
#: switching an operand to such a type is not a mutation. Position is
#: ("input", i), ("output", i), or None = any operand of the model (VTS checks
#: CAST/ARGMAX/ARGMIN by type only). A rule applies as soon as *any*
#: operation of the model has that type. New types None = any type.
OPERATION_OPERAND_TYPE_SKIPS: tuple[tuple[int, tuple[str, int] | None, frozenset | None], ...] = (
    (_O.LSH_PROJECTION, ("input", 1), _ANY_TYPE),
    (_O.CAST, _ANY_OPERAND, _FLOATS | _Q8_ASYMM | {_T.TENSOR_INT32}),
    (_O.ARGMAX, _ANY_OPERAND, _FLOATS | _Q8_ASYMM | {_T.TENSOR_INT32}),
    (_O.ARGMIN, _ANY_OPERAND, _FLOATS | _Q8_ASYMM | {_T.TENSOR_INT32}),
    (_O.QUANTIZE, ("input", 0), _FLOATS),
    (_O.QUANTIZE, ("output", 0), _Q8_ASYMM),
    (_O.RANDOM_MULTINOMIAL, ("input", 0), _FLOATS),
    (_O.DEQUANTIZE, ("input", 0),
     _Q8_ASYMM | {_T.TENSOR_QUANT8_SYMM, _T.TENSOR_QUANT8_SYMM_PER_CHANNEL}),
    (_O.DEQUANTIZE, ("output", 0), _FLOATS),
    *((op, ("input", 1), frozenset({_T.TENSOR_QUANT8_ASYMM, _T.TENSOR_QUANT8_SYMM_PER_CHANNEL}))
      for op in (_O.CONV_2D, _O.DEPTHWISE_CONV_2D, _O.GROUPED_CONV_2D, _O.TRANSPOSE_CONV_2D)),
    (_O.AXIS_ALIGNED_BBOX_TRANSFORM, ("input", 1), _Q8_ASYMM),
    (_O.RANK, ("input", 0), _RANK_INPUTS),
)  # fmt: skip

#: 14. operations whose outputs are not removed (their output count is flexible).
REMOVE_OPERAND_SKIP_OPERATIONS: frozenset[int] = frozenset(
    {_O.SPLIT, _O.UNIDIRECTIONAL_SEQUENCE_LSTM, _O.UNIDIRECTIONAL_SEQUENCE_RNN,
     _O.BIDIRECTIONAL_SEQUENCE_LSTM, _O.BIDIRECTIONAL_SEQUENCE_RNN}
)  # fmt: skip

_MANY = 1 << 30
#: 16. operation -> ((input count lo, hi), (removed input lo, hi)) pairs where the
#: shorter form is legal (optional trailing parameters, CONCATENATION's n
#: tensors). A negative bound counts from the end: -1 = last input.
REMOVE_OPERATION_INPUT_SKIPS: dict[int, tuple[tuple[tuple[int, int], tuple[int, int]], ...]] = {
    _O.CONCATENATION: (((3, _MANY), (0, -2)),),
    _O.DEPTHWISE_CONV_2D: (((12, 12), (11, 11)), ((9, 9), (8, 8))),
    **dict.fromkeys(
        (_O.CONV_2D, _O.AVERAGE_POOL_2D, _O.MAX_POOL_2D, _O.L2_POOL_2D),
        (((11, 11), (10, 10)), ((8, 8), (7, 7))),
    ),
    _O.RESIZE_BILINEAR: (((4, _MANY), (3, -1)),),
    _O.RESIZE_NEAREST_NEIGHBOR: (((5, _MANY), (3, -1)),),
    **dict.fromkeys((_O.SPACE_TO_DEPTH, _O.DEPTH_TO_SPACE, _O.BATCH_TO_SPACE_ND),
                    (((3, 3), (2, 2)),)),
    _O.SPACE_TO_BATCH_ND: (((4, 4), (3, 3)),),
    _O.L2_NORMALIZATION: (((2, 2), (1, 1)),),
    _O.LOCAL_RESPONSE_NORMALIZATION: (((6, 6), (5, 5)),),
    _O.SOFTMAX: (((3, 3), (2, 2)),),
}  # fmt: skip

#: 18. operation -> (input count lo, hi) for which one more INT32 input is legal.
ADD_OPERATION_INPUT_SKIPS: dict[int, tuple[int, int]] = {
    _O.L2_NORMALIZATION: (1, 1),
    _O.LOCAL_RESPONSE_NORMALIZATION: (5, 5),
    _O.SOFTMAX: (2, 2),
    _O.RESIZE_BILINEAR: (0, 5),
    _O.RESIZE_NEAREST_NEIGHBOR: (0, 5),
}

#: 6/7. VTS skips turning an operand into CONSTANT_COPY when the model would get
#: larger than half the recommended binder transaction size.
MAX_MODEL_BYTES = 64 * 1024 // 2

#: 20/21. (description, value) for invalid prepareModel_1_3 arguments.
preference_mutations: tuple[tuple[str, int], ...] = tuple(
    (f"mutateExecutionPreferenceTest: preference {v}", v) for v in (-1, 3)
)
priority_mutations: tuple[tuple[str, int], ...] = tuple(
    (f"mutatePriorityTest: priority {v}", v) for v in (-1, 3)
)
