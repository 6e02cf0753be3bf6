"""``Node``: what an operator mapping sees of one ONNX node.

Attribute access with defaults, inputs as tensors / operands / constant
values, output definition (element type and shape from shape inference
unless the mapping says otherwise), and small emitters every mapping shares
(a RESHAPE to the inferred output shape, a copy, a scalar parameter).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from nnhal.types import OperandType, OperationType

from . import types_map as tm
from .converter import Scope, Tensor
from .errors import Unsupported

T = OperandType
O = OperationType


class Node:
    def __init__(self, scope: Scope, proto) -> None:
        self.scope, self.proto = scope, proto
        self.sb = scope.sb
        self.attrs = {a.name: a for a in proto.attribute}

    @property
    def op_type(self) -> str:
        return self.proto.op_type

    @property
    def opset(self) -> int:
        return self.scope.conv.opset

    # ---- attributes -----------------------------------------------------

    def attr(self, name: str, default: Any = None) -> Any:
        from onnx import helper

        a = self.attrs.get(name)
        if a is None:
            return default
        value = helper.get_attribute_value(a)
        if isinstance(value, bytes):
            return value.decode()
        return value

    def only_attrs(self, allowed: set[str]) -> None:
        extra = set(self.attrs) - allowed
        if extra:
            raise Unsupported(f"attribute(s) {sorted(extra)} not supported")

    # ---- inputs ---------------------------------------------------------

    def has(self, k: int) -> bool:
        return k < len(self.proto.input) and bool(self.proto.input[k])

    def name(self, k: int) -> str:
        return self.proto.input[k]

    def t(self, k: int) -> Tensor:
        return self.scope.get(self.proto.input[k])

    def i(self, k: int) -> int:
        """Operand index of input ``k`` (constants materialized)."""
        return self.scope.operand(self.proto.input[k])

    def const(self, k: int, what: str = "") -> np.ndarray:
        t = self.t(k)
        if t.const is None:
            raise Unsupported(
                f"input {k} ({what or 'value'} {self.proto.input[k]!r}) must be a constant"
            )
        return t.const

    def const_or(self, k: int, default: Any, what: str = "") -> Any:
        return self.const(k, what) if self.has(k) else default

    def shape(self, k: int) -> tuple:
        t = self.t(k)
        if not t.static:
            raise Unsupported(
                f"shape of input {self.proto.input[k]!r} is not known statically ({t.shape});"
                " give it with --onnx-shape"
            )
        return t.shape

    def rank(self, k: int) -> int:
        r = self.t(k).rank
        if r is None:
            raise Unsupported(f"rank of input {self.proto.input[k]!r} is unknown")
        return r

    # ---- outputs --------------------------------------------------------

    def out_info(self, k: int = 0) -> tuple[int, tuple | None]:
        name = self.proto.output[k]
        return self.scope.conv.info.get(name, (0, None))

    def out_shape(self, k: int = 0) -> tuple | None:
        return self.out_info(k)[1]

    def out_static(self, k: int = 0) -> tuple:
        shape = self.out_shape(k)
        if shape is None or any(d is None for d in shape):
            raise Unsupported(
                f"output {self.proto.output[k]!r} has a shape that cannot be resolved statically"
                f" ({shape}); give the graph inputs' shapes with --onnx-shape"
            )
        return shape

    def out(
        self,
        k: int = 0,
        *,
        elem: int | None = None,
        shape: Any = "infer",
        like: int | None = None,
        scale: float | None = None,
        zero_point: int | None = None,
    ) -> int:
        """Define output ``k``; type and shape from inference, or ``like`` input, or given."""
        info_elem, info_shape = self.out_info(k)
        src = self.t(like) if like is not None else None
        if elem is None:
            elem = info_elem or (src.elem if src is not None else 0)
        if shape == "infer":
            shape = info_shape if info_shape is not None else (src.shape if src else None)
        if scale is None and src is not None and src.quantized and elem == src.elem:
            scale, zero_point = src.scale, src.zero_point
        if not elem:
            raise Unsupported(f"element type of output {self.proto.output[k]!r} is unknown")
        return self.scope.define(
            self.proto.output[k], elem, shape, scale=scale, zero_point=zero_point
        )

    # ---- shared emitters ------------------------------------------------

    def scalar_i32(self, v: int) -> int:
        return self.scope.scalar(T.INT32, int(v))

    def scalar_f(self, v: float, like: Tensor | None = None) -> int:
        if like is not None and like.elem == tm.FLOAT16:
            return self.scope.scalar(T.FLOAT16, float(v))
        return self.scope.scalar(T.FLOAT32, float(v))

    def bool_scalar(self, v: bool) -> int:
        return self.scope.scalar(T.BOOL, bool(v))

    def op(self, op: OperationType, ins: list[int], outs: list[int]) -> None:
        self.scope.op(op, ins, outs)

    def reshape_to_output(self, src: int, k: int = 0, like: int | None = 0,
                          src_tensor: Tensor | None = None) -> None:  # fmt: skip
        """``src`` reshaped into output ``k`` (its statically inferred shape)."""
        from .converter import reshape_operand

        shape = self.out_static(k)
        out = self.out(k, like=like)
        t = self.scope.tensors[self.proto.output[k]]
        desc = src_tensor or Tensor(t.elem, None, None, None, t.scale, t.zero_point, t.quantized)
        reshape_operand(self.scope, desc, src, shape, out)
