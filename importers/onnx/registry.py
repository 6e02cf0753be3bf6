"""The operator table: ONNX op_type -> the function that emits its NNAPI operations.

Mappings register themselves with ``@mapping("Add", "Sub", ...)``; the
modules holding them (``ops_elementwise``, ``ops_tensor``, ``ops_nn``,
``ops_quant``, ``ops_resize``, ``ops_control``) are imported by ``table()``.
"""

from __future__ import annotations

from collections.abc import Callable

OPS: dict[str, Callable] = {}


def mapping(*op_types: str) -> Callable[[Callable], Callable]:
    def register(fn: Callable) -> Callable:
        for op in op_types:
            OPS[op] = fn
        return fn

    return register


def table() -> dict[str, Callable]:
    from . import (  # noqa: F401
        ops_control,
        ops_elementwise,
        ops_nn,
        ops_quant,
        ops_resize,
        ops_tensor,
    )

    return OPS
