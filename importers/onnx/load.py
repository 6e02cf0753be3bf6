"""Reading, checking and shape-inferring an ONNX file.

``load(source, shapes)`` returns a checked, shape-inferred ``ModelProto``:

1. parse (a path, bytes or a ModelProto); not ONNX -> one-line error;
2. the default-domain opset must be one this importer knows
   (``MAX_OPSET``; newer -> error naming the opset), other domains are
   rejected by the nodes that use them;
3. ``onnx.checker.check_model(full_check=False)``: the first checker
   message, naming the node;
4. graph input dimensions the user fixes (``shapes``: name -> dims) replace
   symbolic ones, inputs given a value (``constants``) become initializers,
   then ``onnx.shape_inference`` (strict, with data
   propagation so Shape arithmetic gets values) fills ``value_info``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .errors import OnnxImportError

#: the newest default-domain opset whose operators this importer was written against
MAX_OPSET = 25


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    # the checker's first line is a header; the useful part names the node
    joined = " ".join(lines)
    return joined[:400]


def load(
    source: Any,
    shapes: dict[str, list[int]] | None = None,
    constants: dict[str, Any] | None = None,
):
    import onnx
    from google.protobuf.message import DecodeError

    where = str(source) if isinstance(source, (str, Path)) else "model"
    if isinstance(source, onnx.ModelProto):
        model = onnx.ModelProto()
        model.CopyFrom(source)
    else:
        try:
            data = source if isinstance(source, (bytes, bytearray)) else Path(source).read_bytes()
        except OSError as exc:
            raise OnnxImportError(f"{where}: cannot read: {exc.strerror or exc}") from None
        model = onnx.ModelProto()
        try:
            model.ParseFromString(bytes(data))
        except (DecodeError, RuntimeError, ValueError) as exc:
            raise OnnxImportError(f"{where}: not an ONNX model ({exc})") from None
        if not model.HasField("graph") or not model.graph.node:
            raise OnnxImportError(f"{where}: not an ONNX model (no graph with nodes)")
    opset = default_opset(model)
    if opset is None:
        raise OnnxImportError(f"{where}: no default-domain opset import")
    if opset > MAX_OPSET:
        raise OnnxImportError(
            f"{where}: opset {opset} is newer than the newest supported ({MAX_OPSET})"
        )
    try:
        onnx.checker.check_model(model)
    except onnx.checker.ValidationError as exc:
        raise OnnxImportError(f"{where}: fails the ONNX checker: {_first_line(exc)}") from None
    if shapes:
        _fix_input_shapes(model, shapes, where)
    if constants:
        _freeze_inputs(model, constants, where)
    try:
        model = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    except Exception as exc:  # noqa: BLE001  (onnx raises InferenceError and RuntimeError)
        raise OnnxImportError(f"{where}: shape inference failed: {_first_line(exc)}") from None
    return model


def default_opset(model) -> int | None:
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return int(imp.version)
    return None


def _freeze_inputs(model, constants: dict[str, Any], where: str) -> None:
    """Graph inputs given a value become initializers (constants for folding and mapping)."""
    import numpy as np
    from onnx import helper, numpy_helper

    by_name = {vi.name: vi for vi in model.graph.input}
    for name, value in constants.items():
        vi = by_name.get(name)
        if vi is None:
            raise OnnxImportError(f"{where}: no graph input {name!r} to fix to a value")
        dtype = helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
        model.graph.initializer.append(numpy_helper.from_array(np.asarray(value, dtype), name))
        model.graph.input.remove(vi)


def _fix_input_shapes(model, shapes: dict[str, list[int]], where: str) -> None:
    by_name = {vi.name: vi for vi in model.graph.input}
    for name, dims in shapes.items():
        vi = by_name.get(name)
        if vi is None:
            known = ", ".join(by_name)
            raise OnnxImportError(f"{where}: no graph input {name!r} (inputs: {known})")
        shape = vi.type.tensor_type.shape
        if shape.dim and len(shape.dim) != len(dims):
            raise OnnxImportError(
                f"{where}: input {name!r} has rank {len(shape.dim)}, the given shape {dims}"
                f" has rank {len(dims)}"
            )
        del shape.dim[:]
        for d in dims:
            shape.dim.add().dim_value = int(d)
