"""LOGICAL_AND, LOGICAL_OR (broadcasting) and LOGICAL_NOT on TENSOR_BOOL8.

TENSOR_BOOL8 data is numpy bool, so the kernels are numpy's logical ufuncs.
"""

from __future__ import annotations

import numpy as np
from nnhal.driver.ops._operand_rules import broadcast_shape
from nnhal.driver.ops.registry import Arg, OpContext, OperationDef, Shape, register

from nnhal.types import HalVersion, OperandType, OperationType

TYPES = {OperandType.TENSOR_BOOL8: HalVersion.V1_2}


def logical(op_type: OperationType, ufunc: np.ufunc) -> OperationDef:
    """Register a broadcasting binary logical op implemented by ``ufunc``."""

    def prepare(ctx: OpContext) -> list[Shape]:
        return [broadcast_shape(ctx, ctx.inputs[0].dimensions, ctx.inputs[1].dimensions)]

    return register(
        OperationDef(
            op_type,
            inputs=(Arg("input0"), Arg("input1")),
            outputs=(Arg("output"),),
            types=TYPES,
            execute=lambda ctx: ufunc,
            prepare=prepare,
        )
    )


def _not_prepare(ctx: OpContext) -> list[Shape]:
    dims = ctx.inputs[0].dimensions
    return [None if dims is None else tuple(dims)]


LOGICAL_AND = logical(OperationType.LOGICAL_AND, np.logical_and)
LOGICAL_OR = logical(OperationType.LOGICAL_OR, np.logical_or)
LOGICAL_NOT = register(
    OperationDef(
        OperationType.LOGICAL_NOT,
        inputs=(Arg("input"),),
        outputs=(Arg("output"),),
        types=TYPES,
        execute=lambda ctx: np.logical_not,
        prepare=_not_prepare,
    )
)
