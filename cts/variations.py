"""Variation expansion: one spec (``nnhal.cts.dsl``) -> many test models.

Data-type variations (the ones a spec lists):

- ``float16``: every TENSOR_FLOAT32 operand becomes TENSOR_FLOAT16 (FLOAT32
  scalars become FLOAT16), values rounded to float16;
- ``relaxed``: ``relaxComputationFloat32toFloat16`` set (the tolerance table
  then allows float16 precision);
- ``quant8_asymm`` / ``quant8_signed``: every TENSOR_FLOAT32 operand becomes
  TENSOR_QUANT8_ASYMM (or _SIGNED, zero point - 128) with the operand's
  ``quant`` parameters (or the spec's default), values quantized; a ``quant``
  of ``(TENSOR_INT32, scale, 0)`` makes an int32 bias instead.

Graph variations (tried on the base model and on each data-type variation,
kept where they apply):

- ``all_tensors_as_inputs``: every tensor constant of main becomes a model
  input, its value given at execution;
- ``all_outputs_as_internal``: every main output becomes a temporary feeding
  an identity operation (ADD with zeros, or LOGICAL_OR with false) that
  writes the real output;
- ``dynamic_output_shape``: every main output's dimensions become unknown
  (0, same rank); the expected shapes stay the golden ones. Not applied to
  models with IF/WHILE (as VTS: drivers must know their operand sizes).

``expand(spec_def)`` gives ``GeneratedModel`` records holding an
``nnhal.vectors.TestModel`` (so they run with the same code as the vectors
and can be saved as model files).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
from nnhal.cts.dsl import (
    CONST,
    INPUT,
    OUTPUT,
    REF_CONST,
    SUBGRAPH,
    TEMP,
    ModelDesc,
    OperandDesc,
    OperationDesc,
    SpecDef,
    SpecError,
)

from nnhal.builder import ModelBuilder
from nnhal.types import OPERAND_TYPE_INFO, OperandLifeTime, OperandType, OperationType
from nnhal.vectors import TestModel

__all__ = ["GeneratedModel", "build_test_models", "expand", "quantize"]

_T = OperandType
_QUANT8 = {_T.TENSOR_QUANT8_ASYMM: (0, 255), _T.TENSOR_QUANT8_ASYMM_SIGNED: (-128, 127)}


@dataclass
class GeneratedModel:
    """One test model of the spec library."""

    spec: str
    variation: str  # "base", "float16", "float16_all_tensors_as_inputs", ...
    data_type: str  # "base" or a data-type variation
    graph: str  # "" or a graph variation
    test: TestModel
    #: "library" (the spec library) or "nnapi" (the shipped corpus)
    origin: str = "library"

    @property
    def name(self) -> str:
        return self.test.name

    @property
    def test_id(self) -> str:
        """The name in test ids: corpus models carry the prefix ``nnapi/``."""
        return self.name if self.origin == "library" else f"nnapi/{self.name}"


def quantize(values: np.ndarray, type_code: int, scale: float, zero_point: int) -> np.ndarray:
    """Real values -> quantized storage values (round half away from zero, clamped)."""
    x = np.asarray(values, dtype=np.float64) / scale
    q = np.sign(x) * np.floor(np.abs(x) + 0.5) + zero_point
    if type_code == _T.TENSOR_INT32:
        return q.astype(np.int32)
    lo, hi = _QUANT8[type_code]
    return np.clip(q, lo, hi).astype(OPERAND_TYPE_INFO[type_code].dtype)


# ---------------------------------------------------------------------------
# Data-type variations
# ---------------------------------------------------------------------------


def _has(desc: ModelDesc, *types: int) -> bool:
    return any(o.type in types for g in desc.graphs() for o in g.operands)


def _convert(desc: ModelDesc, change: Callable[[OperandDesc], Callable | None]) -> ModelDesc:
    """Apply ``change`` to every operand; it returns a value converter or None."""
    out = copy.deepcopy(desc)
    main_converters: dict[int, Callable] = {}
    for g_number, g in enumerate(out.graphs()):
        for i, o in enumerate(g.operands):
            convert = change(o)
            if convert is None:
                continue
            if o.value is not None:
                o.value = convert(o.value)
            if g_number == 0:
                main_converters[i] = convert
    for ex in out.examples:
        for values in (ex.inputs, ex.outputs):
            for i, v in values.items():
                if v is not None and i in main_converters:
                    values[i] = main_converters[i](v)
    return out


def to_float16(desc: ModelDesc) -> ModelDesc | None:
    if not _has(desc, _T.TENSOR_FLOAT32, _T.FLOAT32):
        return None

    def change(o: OperandDesc) -> Callable | None:
        if o.type == _T.TENSOR_FLOAT32:
            o.type = int(_T.TENSOR_FLOAT16)
        elif o.type == _T.FLOAT32:
            o.type = int(_T.FLOAT16)
        else:
            return None
        return lambda v: np.asarray(v).astype(np.float16)

    return _convert(desc, change)


def to_relaxed(desc: ModelDesc) -> ModelDesc | None:
    if not _has(desc, _T.TENSOR_FLOAT32, _T.FLOAT32):
        return None
    out = copy.deepcopy(desc)
    out.relaxed = True
    return out


def _quant_params(o: OperandDesc, default: tuple | None, signed: bool) -> tuple[int, float, int]:
    params = o.quant if o.quant is not None else default
    if params is None:
        raise SpecError(f"operand {o.name!r}: no quant parameters for a quantized variation")
    if len(params) == 3:
        t, scale, zp = params
        t = int(OperandType[t]) if isinstance(t, str) else int(t)
    else:
        (scale, zp), t = params, int(_T.TENSOR_QUANT8_ASYMM)
    if t == _T.TENSOR_QUANT8_ASYMM and signed:
        t, zp = int(_T.TENSOR_QUANT8_ASYMM_SIGNED), zp - 128
    elif t not in (_T.TENSOR_QUANT8_ASYMM, _T.TENSOR_QUANT8_ASYMM_SIGNED, _T.TENSOR_INT32):
        raise SpecError(f"operand {o.name!r}: quant type must be quant8 or TENSOR_INT32")
    return t, float(scale), int(zp)


def _to_quant8(desc: ModelDesc, signed: bool) -> ModelDesc | None:
    if not _has(desc, _T.TENSOR_FLOAT32):
        return None

    def change(o: OperandDesc) -> Callable | None:
        if o.type != _T.TENSOR_FLOAT32:
            return None
        t, scale, zp = _quant_params(o, desc.quant, signed)
        o.type, o.scale, o.zero_point = t, scale, zp
        return lambda v: quantize(v, t, scale, zp)

    return _convert(desc, change)


DATA_TYPE_FUNCTIONS: dict[str, Callable[[ModelDesc], ModelDesc | None]] = {
    "float16": to_float16,
    "relaxed": to_relaxed,
    "quant8_asymm": lambda d: _to_quant8(d, signed=False),
    "quant8_signed": lambda d: _to_quant8(d, signed=True),
}

# ---------------------------------------------------------------------------
# Graph variations
# ---------------------------------------------------------------------------


def _is_tensor(o: OperandDesc) -> bool:
    info = OPERAND_TYPE_INFO.get(o.type)
    return info is not None and not info.is_scalar


def all_tensors_as_inputs(desc: ModelDesc) -> ModelDesc | None:
    main = desc.main
    chosen = [
        i for i, o in enumerate(main.operands) if o.kind in (CONST, REF_CONST) and _is_tensor(o)
    ]
    if not chosen:
        return None
    out = copy.deepcopy(desc)
    for i in chosen:
        o = out.main.operands[i]
        value, o.value, o.kind = o.value, None, INPUT
        out.main.inputs.append(i)
        for ex in out.examples:
            ex.inputs[i] = value
    return out


_IDENTITY_ADD_TYPES = {
    _T.TENSOR_FLOAT32,
    _T.TENSOR_FLOAT16,
    _T.TENSOR_INT32,
    _T.TENSOR_QUANT8_ASYMM,
    _T.TENSOR_QUANT8_ASYMM_SIGNED,
}


def all_outputs_as_internal(desc: ModelDesc) -> ModelDesc | None:
    main = desc.main
    for i in main.outputs:
        o = main.operands[i]
        if o.type not in _IDENTITY_ADD_TYPES and o.type != _T.TENSOR_BOOL8:
            return None
        if not o.dims or 0 in o.dims:
            return None
    out = copy.deepcopy(desc)
    g = out.main
    for k, i in enumerate(list(g.outputs)):
        o = g.operands[i]
        final = copy.deepcopy(o)
        o.kind, o.ignored, o.name = TEMP, False, f"{o.name}_internal"
        dtype = OPERAND_TYPE_INFO[o.type].dtype
        g.operands.append(final)
        new = len(g.operands) - 1
        if o.type == _T.TENSOR_BOOL8:
            zero = OperandDesc("false", o.type, o.dims, CONST, value=np.zeros(o.dims, np.bool_))
            g.operands.append(zero)
            g.operations.append(OperationDesc(OperationType.LOGICAL_OR, (i, new + 1), (new,)))
        else:
            fill = o.zero_point if o.type in _QUANT8 else 0
            zero = OperandDesc(
                "zero",
                o.type,
                o.dims,
                CONST,
                o.scale,
                o.zero_point,
                value=np.full(o.dims, fill, dtype),
            )
            act = OperandDesc("act", int(_T.INT32), (), CONST, value=np.array(0, np.int32))
            g.operands.extend([zero, act])
            g.operations.append(OperationDesc(OperationType.ADD, (i, new + 1, new + 2), (new,)))
        g.outputs[k] = new
        for ex in out.examples:
            if i in ex.outputs:
                ex.outputs[new] = ex.outputs.pop(i)
    return out


def dynamic_output_shape(desc: ModelDesc) -> ModelDesc | None:
    if desc.operation_types() & {OperationType.IF, OperationType.WHILE}:
        return None
    main = desc.main
    if not any(_is_tensor(main.operands[i]) for i in main.outputs):
        return None
    out = copy.deepcopy(desc)
    for i in out.main.outputs:
        o = out.main.operands[i]
        if _is_tensor(o):
            o.dims = (0,) * len(o.dims)
    return out


GRAPH_FUNCTIONS: dict[str, Callable[[ModelDesc], ModelDesc | None]] = {
    "all_tensors_as_inputs": all_tensors_as_inputs,
    "all_outputs_as_internal": all_outputs_as_internal,
    "dynamic_output_shape": dynamic_output_shape,
}

# ---------------------------------------------------------------------------
# Building models
# ---------------------------------------------------------------------------


def build_test_models(desc: ModelDesc, name: str, expect_failure: bool = False) -> list[TestModel]:
    """One TestModel per example of ``desc`` (``name`` plus "/<example>" when several)."""
    mb = ModelBuilder(relaxed=desc.relaxed)
    builders = [mb.main] + [mb.subgraph() for _ in desc.referenced]
    for g, sb in zip(desc.graphs(), builders):
        for o in g.operands:
            q = {"scale": o.scale, "zero_point": o.zero_point}
            if o.kind == INPUT:
                sb.operand(o.type, o.dims, lifetime=OperandLifeTime.SUBGRAPH_INPUT, **q)
            elif o.kind == OUTPUT:
                sb.operand(o.type, o.dims, lifetime=OperandLifeTime.SUBGRAPH_OUTPUT, **q)
            elif o.kind == TEMP:
                sb.temporary(o.type, o.dims, **q)
            elif o.kind in (CONST, REF_CONST):
                sb.constant(
                    o.type,
                    o.value,
                    None if not _is_tensor(o) else o.dims,
                    reference=o.kind == REF_CONST,
                    **q,
                )
            elif o.kind == SUBGRAPH:
                assert o.subgraph is not None
                sb.subgraph_ref(builders[o.subgraph + 1])
            else:  # NO_VALUE
                sb.no_value(o.type, o.dims, **q)
        for op in g.operations:
            sb.operation(op.type, op.inputs, op.outputs)
    built = mb.build()
    # inputs and outputs in the order the description gives (added inputs come last)
    subgraphs = [
        replace(sg, inputIndexes=tuple(g.inputs), outputIndexes=tuple(g.outputs))
        for sg, g in zip((built.main, *built.referenced), desc.graphs())
    ]
    model = replace(built, main=subgraphs[0], referenced=tuple(subgraphs[1:]))
    main = desc.main
    names = [[o.name for o in g.operands] for g in desc.graphs()]
    tests = []
    for ex in desc.examples:
        expected = [ex.outputs.get(i) for i in main.outputs]
        shapes = [
            tuple(e.shape)
            if e is not None and _is_tensor(main.operands[i])
            else main.operands[i].dims
            for e, i in zip(expected, main.outputs)
        ]
        full = name if len(desc.examples) == 1 else f"{name}/{ex.name}"
        tests.append(
            TestModel(
                name=full,
                model=model,
                inputs=[ex.inputs.get(i) for i in main.inputs],
                expected=expected,
                expected_shapes=shapes,
                output_types=[main.operands[i].type for i in main.outputs],
                ignored=[main.operands[i].ignored for i in main.outputs],
                expectFailure=expect_failure,
                spec=name.split("/")[0],
                specVersion="V1_3",
                operand_names=names,
            )
        )
    return tests


def expand(spec_def: SpecDef) -> list[GeneratedModel]:
    """Every variation of a spec that applies; raises SpecError for a broken spec."""
    base = spec_def.build()
    out: list[GeneratedModel] = []
    data_types: list[tuple[str, ModelDesc]] = [("base", base)]
    for v in spec_def.variations:
        d = DATA_TYPE_FUNCTIONS[v](base)
        if d is not None:
            data_types.append((v, d))
    for dt, d in data_types:
        variants: list[tuple[str, ModelDesc]] = [("", d)]
        for gv in spec_def.graph_variations:
            if spec_def.expect_failure:
                break  # an expected failure stays what it is
            g = GRAPH_FUNCTIONS[gv](d)
            if g is not None:
                variants.append((gv, g))
        for gv, desc in variants:
            variation = "_".join(p for p in (dt if dt != "base" or not gv else "", gv) if p)
            for t in build_test_models(
                desc, f"{spec_def.name}/{variation}", spec_def.expect_failure
            ):
                out.append(GeneratedModel(spec_def.name, variation, dt, gv, t))
    return out
