"""The spec DSL: test models written in Python, expanded into variations.

A spec is a function decorated with ``@spec``; it receives a ``SpecBuilder``
and declares the main subgraph (inputs, outputs, constants, scalar
parameters, operations), any referenced subgraphs (IF branches, WHILE
conditions and bodies), and one or more examples (input values and expected
output values)::

    @spec("add_broadcast", variations=FLOAT_AND_QUANT8, quant=(0.5, 0))
    def _(s):
        a = s.input("a", F32, [2, 2])
        b = s.input("b", F32, [1, 2])
        out = s.output("out", F32, [2, 2])
        s.op("ADD", [a, b, s.int32(0)], [out])
        s.example({a: [1, 2, 3, 4], b: [10, 20]}, {out: [11, 22, 13, 24]})

Specs are written in float32 (or in whatever types the operation needs);
``variations`` names the data-type variations that are valid for the
operation (``nnhal.cts.variations`` expands them: float16, relaxed, quant8_asymm,
quant8_signed), and the graph variations (all tensors as inputs, all
outputs as internal, dynamic output shapes) are added wherever they apply.
Quantized variations take each float tensor's ``quant=(scale, zeroPoint)``
(or ``(type, scale, zeroPoint)``, e.g. an int32 bias), else the spec's
default ``quant``.

The builder produces a ``ModelDesc``: plain dataclasses describing the
graph with values kept as numpy arrays in their storage type, so a
variation is a function from one ``ModelDesc`` to another. Nothing here
talks to a device.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from nnhal.suggest import did_you_mean
from nnhal.types import OPERAND_TYPE_INFO, OperandType, OperationType, type_name

__all__ = [
    "BOOL8",
    "DATA_TYPE_VARIATIONS",
    "F16",
    "F32",
    "FLOAT_AND_QUANT8",
    "FLOAT_VARIATIONS",
    "GRAPH_VARIATIONS",
    "I32",
    "Q8A",
    "Q8S",
    "ExampleDesc",
    "GraphBuilder",
    "GraphDesc",
    "ModelDesc",
    "OperandDesc",
    "OperationDesc",
    "Ref",
    "SpecBuilder",
    "SpecDef",
    "SpecError",
    "spec",
]

F32 = OperandType.TENSOR_FLOAT32
F16 = OperandType.TENSOR_FLOAT16
I32 = OperandType.TENSOR_INT32
BOOL8 = OperandType.TENSOR_BOOL8
Q8A = OperandType.TENSOR_QUANT8_ASYMM
Q8S = OperandType.TENSOR_QUANT8_ASYMM_SIGNED

#: data-type variations, in the order they are generated
DATA_TYPE_VARIATIONS = ("float16", "relaxed", "quant8_asymm", "quant8_signed")
#: graph variations, applied to the base model and to each data-type variation
GRAPH_VARIATIONS = ("all_tensors_as_inputs", "all_outputs_as_internal", "dynamic_output_shape")
FLOAT_VARIATIONS = ("float16", "relaxed")
FLOAT_AND_QUANT8 = DATA_TYPE_VARIATIONS

# Operand kinds of the description (lifetimes in HAL terms).
INPUT, OUTPUT, TEMP, CONST, REF_CONST, NO_VALUE, SUBGRAPH = (
    "input",
    "output",
    "temp",
    "const",
    "ref_const",
    "no_value",
    "subgraph",
)


class SpecError(ValueError):
    """A spec that cannot be built (a mistake in the spec file)."""


# ---------------------------------------------------------------------------
# The description (what variations transform)
# ---------------------------------------------------------------------------


@dataclass
class OperandDesc:
    name: str
    type: int
    dims: tuple[int, ...]
    kind: str
    scale: float = 0.0
    zero_point: int = 0
    #: constants: the value in the operand type's storage dtype
    value: np.ndarray | None = None
    #: for quantized variations: (scale, zeroPoint) or (type, scale, zeroPoint)
    quant: tuple | None = None
    #: SUBGRAPH operands: index into ModelDesc.referenced
    subgraph: int | None = None
    ignored: bool = False


@dataclass
class OperationDesc:
    type: int
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]


@dataclass
class GraphDesc:
    name: str
    operands: list[OperandDesc] = field(default_factory=list)
    operations: list[OperationDesc] = field(default_factory=list)
    inputs: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)


@dataclass
class ExampleDesc:
    """Values keyed by operand index in main (inputs: None = no value)."""

    name: str
    inputs: dict[int, np.ndarray | None]
    outputs: dict[int, np.ndarray]


@dataclass
class ModelDesc:
    main: GraphDesc
    referenced: list[GraphDesc]
    examples: list[ExampleDesc]
    relaxed: bool = False
    #: the spec's default quantization for float tensors
    quant: tuple | None = None

    def graphs(self) -> list[GraphDesc]:
        return [self.main, *self.referenced]

    def operation_types(self) -> set[int]:
        return {op.type for g in self.graphs() for op in g.operations}


# ---------------------------------------------------------------------------
# Builders (what a spec function sees)
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Ref:
    """An operand of a spec: which graph it belongs to and its index there."""

    graph: int  # 0 = main, k = referenced[k - 1]
    index: int
    name: str


def _type_code(t: Any) -> int:
    if isinstance(t, str):
        try:
            return int(OperandType[t])
        except KeyError:
            hint = did_you_mean(t, OperandType.__members__)
            raise SpecError(f"unknown operand type {t!r}{hint}") from None
    return int(t)


def _op_code(t: Any) -> int:
    if isinstance(t, str):
        try:
            return int(OperationType[t])
        except KeyError:
            hint = did_you_mean(t, OperationType.__members__)
            raise SpecError(f"unknown operation type {t!r}{hint}") from None
    return int(t)


def typed_value(type_code: int, values: Any, dims: Sequence[int] | None) -> np.ndarray:
    """``values`` as an array of the type's storage dtype, shaped by ``dims``."""
    info = OPERAND_TYPE_INFO.get(type_code)
    if info is None or info.dtype is None:
        raise SpecError(f"{type_name(type_code)} has no numeric values")
    arr = np.asarray(values)
    if info.dtype.kind in "iu" and arr.dtype.kind == "f" and (arr != np.round(arr)).any():
        raise SpecError(f"{type_name(type_code)} values must be integers: {values!r}")
    if info.dtype == np.bool_:
        arr = arr.astype(np.bool_)
    else:
        arr = arr.astype(info.dtype)
    if info.is_scalar:
        if arr.size != 1:
            raise SpecError(f"{type_name(type_code)} is a scalar type; got {arr.size} values")
        return arr.reshape(())
    shape = tuple(dims) if dims else (arr.shape if arr.ndim else (1,))
    if 0 in shape or int(np.prod(shape)) != arr.size:
        raise SpecError(
            f"{arr.size} values do not fit {type_name(type_code)} dimensions {list(shape)}"
        )
    return arr.reshape(shape)


class GraphBuilder:
    """Operands and operations of one subgraph of a spec."""

    def __init__(self, number: int, name: str) -> None:
        self.number = number
        self.desc = GraphDesc(name)

    def _add(self, operand: OperandDesc) -> Ref:
        self.desc.operands.append(operand)
        return Ref(self.number, len(self.desc.operands) - 1, operand.name)

    def _dims(self, dims: Iterable[int] | None) -> tuple[int, ...]:
        return () if dims is None else tuple(int(d) for d in dims)

    def input(
        self,
        name: str,
        type: Any,
        dims: Iterable[int] | None = (),
        *,
        scale: float = 0.0,
        zero_point: int = 0,
        quant: tuple | None = None,
    ) -> Ref:
        """A SUBGRAPH_INPUT operand (appended to the subgraph's inputs)."""
        ref = self._add(
            OperandDesc(
                name,
                _type_code(type),
                self._dims(dims),
                INPUT,
                float(scale),
                int(zero_point),
                quant=quant,
            )
        )
        self.desc.inputs.append(ref.index)
        return ref

    def output(
        self,
        name: str,
        type: Any,
        dims: Iterable[int] | None = (),
        *,
        scale: float = 0.0,
        zero_point: int = 0,
        quant: tuple | None = None,
        ignored: bool = False,
    ) -> Ref:
        """A SUBGRAPH_OUTPUT operand; ``ignored`` outputs are not compared."""
        ref = self._add(
            OperandDesc(
                name,
                _type_code(type),
                self._dims(dims),
                OUTPUT,
                float(scale),
                int(zero_point),
                quant=quant,
                ignored=ignored,
            )
        )
        self.desc.outputs.append(ref.index)
        return ref

    def temp(
        self,
        name: str,
        type: Any,
        dims: Iterable[int] | None = (),
        *,
        scale: float = 0.0,
        zero_point: int = 0,
        quant: tuple | None = None,
    ) -> Ref:
        """A TEMPORARY_VARIABLE operand."""
        return self._add(
            OperandDesc(
                name,
                _type_code(type),
                self._dims(dims),
                TEMP,
                float(scale),
                int(zero_point),
                quant=quant,
            )
        )

    def const(
        self,
        name: str,
        type: Any,
        values: Any,
        dims: Iterable[int] | None = None,
        *,
        scale: float = 0.0,
        zero_point: int = 0,
        quant: tuple | None = None,
        reference: bool = False,
    ) -> Ref:
        """A tensor (or scalar) constant; ``reference`` puts it in the model's memory pool."""
        code = _type_code(type)
        value = typed_value(code, values, None if dims is None else list(dims))
        return self._add(
            OperandDesc(
                name,
                code,
                tuple(value.shape),
                REF_CONST if reference else CONST,
                float(scale),
                int(zero_point),
                value,
                quant=quant,
            )
        )

    def scalar(self, type: Any, value: Any, name: str = "") -> Ref:
        code = _type_code(type)
        return self._add(OperandDesc(name, code, (), CONST, value=typed_value(code, value, None)))

    def int32(self, value: int, name: str = "") -> Ref:
        return self.scalar(OperandType.INT32, value, name)

    def float32(self, value: float, name: str = "") -> Ref:
        return self.scalar(OperandType.FLOAT32, value, name)

    def bool_(self, value: bool, name: str = "") -> Ref:
        return self.scalar(OperandType.BOOL, value, name)

    def no_value(self, type: Any, dims: Iterable[int] | None = (), name: str = "") -> Ref:
        """A NO_VALUE operand (an omitted optional input)."""
        return self._add(OperandDesc(name, _type_code(type), self._dims(dims), NO_VALUE))

    def ref(self, graph: GraphBuilder) -> Ref:
        """A SUBGRAPH operand naming a referenced subgraph of this spec."""
        if not isinstance(graph, GraphBuilder) or graph.number == 0:
            raise SpecError("ref() needs a subgraph made by subgraph()")
        return self._add(
            OperandDesc(
                graph.desc.name, int(OperandType.SUBGRAPH), (), SUBGRAPH, subgraph=graph.number - 1
            )
        )

    def op(self, type: Any, inputs: Sequence[Ref], outputs: Sequence[Ref]) -> None:
        """An operation; every operand must belong to this subgraph."""
        code = _op_code(type)
        for r in (*inputs, *outputs):
            if not isinstance(r, Ref) or r.graph != self.number:
                raise SpecError(
                    f"{OperationType(code).name} in subgraph {self.desc.name!r}: operand {r!r} "
                    "belongs to another subgraph (or is not an operand)"
                )
        self.desc.operations.append(
            OperationDesc(code, tuple(r.index for r in inputs), tuple(r.index for r in outputs))
        )


class SpecBuilder(GraphBuilder):
    """The main subgraph of a spec, its referenced subgraphs and its examples."""

    def __init__(self, name: str, quant: tuple | None = None) -> None:
        super().__init__(0, "main")
        self.spec_name = name
        self.quant = quant
        self.relaxed = False
        self._subgraphs: list[GraphBuilder] = []
        self._examples: list[ExampleDesc] = []

    def subgraph(self, name: str) -> GraphBuilder:
        g = GraphBuilder(len(self._subgraphs) + 1, name)
        self._subgraphs.append(g)
        return g

    def _key(self, key: Ref | str, indexes: list[int], what: str) -> int:
        main = self.desc
        if isinstance(key, Ref):
            if key.graph != 0 or key.index not in indexes:
                raise SpecError(f"example: {key.name!r} is not a main {what}")
            return key.index
        found = [i for i in indexes if main.operands[i].name == key]
        if len(found) != 1:
            raise SpecError(f"example: no main {what} named {key!r}")
        return found[0]

    def example(
        self,
        inputs: Mapping[Ref | str, Any],
        outputs: Mapping[Ref | str, Any],
        name: str | None = None,
    ) -> None:
        """Input values (None = no value) and expected output values, by operand or name."""
        main = self.desc
        ins: dict[int, np.ndarray | None] = {}
        for key, values in inputs.items():
            i = self._key(key, main.inputs, "input")
            o = main.operands[i]
            ins[i] = None if values is None else typed_value(o.type, values, o.dims or None)
        outs: dict[int, np.ndarray] = {}
        for key, values in outputs.items():
            i = self._key(key, main.outputs, "output")
            o = main.operands[i]
            outs[i] = typed_value(o.type, values, o.dims or None)
        missing = [main.operands[i].name for i in main.inputs if i not in ins]
        missing += [
            main.operands[i].name
            for i in main.outputs
            if i not in outs and not main.operands[i].ignored
        ]
        if missing:
            raise SpecError(f"example {name or len(self._examples)}: no values for {missing}")
        self._examples.append(ExampleDesc(name or str(len(self._examples)), ins, outs))

    def finish(self) -> ModelDesc:
        if not self._examples:
            raise SpecError("a spec needs at least one example()")
        if not self.desc.operations:
            raise SpecError("the main subgraph has no operations")
        return ModelDesc(
            main=self.desc,
            referenced=[g.desc for g in self._subgraphs],
            examples=self._examples,
            relaxed=self.relaxed,
            quant=self.quant,
        )


# ---------------------------------------------------------------------------
# Registration
# ---------------------------------------------------------------------------


@dataclass(eq=False)
class SpecDef:
    """A spec as declared by ``@spec``; ``build()`` runs the spec function."""

    name: str
    function: Callable[[SpecBuilder], None]
    variations: tuple[str, ...] = ()
    graph_variations: tuple[str, ...] = GRAPH_VARIATIONS
    quant: tuple | None = None
    expect_failure: bool = False
    description: str = ""
    source: str = ""

    def build(self) -> ModelDesc:
        builder = SpecBuilder(self.name, self.quant)
        self.function(builder)
        return builder.finish()


def spec(
    name: str,
    *,
    variations: Sequence[str] = (),
    graph_variations: Sequence[str] = GRAPH_VARIATIONS,
    quant: tuple | None = None,
    expect_failure: bool = False,
) -> Callable[[Callable[[SpecBuilder], None]], SpecDef]:
    """Declare a spec: the decorated function fills a ``SpecBuilder``.

    ``variations``: data-type variations valid for this spec (see
    ``DATA_TYPE_VARIATIONS``); ``graph_variations``: which graph variations to
    try (each is applied only where it makes sense); ``quant``: default
    ``(scale, zeroPoint)`` of float tensors in the quantized variations;
    ``expect_failure``: preparing or executing must fail (as the vectors'
    ``expectFailure``).
    """
    unknown = [v for v in variations if v not in DATA_TYPE_VARIATIONS]
    unknown += [v for v in graph_variations if v not in GRAPH_VARIATIONS]
    if unknown:
        raise SpecError(f"spec {name!r}: unknown variations {unknown}")

    def decorate(function: Callable[[SpecBuilder], None]) -> SpecDef:
        return SpecDef(
            name=name,
            function=function,
            variations=tuple(variations),
            graph_variations=tuple(graph_variations),
            quant=quant,
            expect_failure=expect_failure,
            description=(function.__doc__ or "").strip().split("\n")[0],
            source=getattr(function, "__module__", ""),
        )

    return decorate
