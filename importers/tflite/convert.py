"""A checked TFLite model (``reader.TfModel``) -> NNAPI models, the delegate's way.

``convert(model)`` decides, node by node of the main subgraph, whether TFLite's
NNAPI delegate would take it (``ops.MAPPERS``; a node is tried on its own and a
rejection keeps the delegate's reason), then builds one NNAPI model per
partition: a maximal run of consecutive delegated nodes, in execution order,
as the delegate hands runs of supported nodes to NNAPI. Nodes it would not take
are listed in ``ImportResult.skipped`` with the reason; they are what the
runtime runs on the CPU.

Folding, as the delegate does it: a DEQUANTIZE of a constant float16 tensor is
not a node of its own; its consumers read the float32 value as a constant.
Read-only variable tensors (LSTM states nobody writes in the subgraph) are the
zeros TFLite allocates them with. WHILE and IF reference subgraphs become
NNAPI WHILE / IF operands (referenced subgraphs of the same NNAPI model); the
delegate itself stops at them, nnhal takes them because NN HAL 1.3 has both
(an explicit extension, reported as such).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from nnhal.importers.tflite import ops as ops_mod
from nnhal.importers.tflite.custom_options import param_operands
from nnhal.importers.tflite.ops import Unsupported
from nnhal.importers.tflite.reader import TfModel, TfOperator, TfSubgraph, TfTensor
from nnhal.importers.tflite.sparsity import densify

from nnhal.builder import ModelBuilder, OperandIndex, SubgraphBuilder
from nnhal.types import Model, OperandType, OperationType

__all__ = ["ImportResult", "Partition", "Skipped", "convert"]

T = OperandType
FLOAT32, FLOAT16, INT32, UINT8, INT64, BOOL, INT16, INT8 = 0, 1, 2, 3, 4, 6, 7, 9

#: how big a constant is before it goes into the model pool (CONSTANT_REFERENCE)
_REFERENCE_BYTES = 128


@dataclass
class Skipped:
    """A node the delegate would not take."""

    subgraph: int
    index: int
    op: str
    reason: str

    def line(self) -> str:
        return f"operator {self.index} {self.op} (subgraph {self.subgraph}): {self.reason}"


@dataclass
class Partition:
    """Consecutive delegated nodes of the main subgraph and the NNAPI model made of them."""

    nodes: list[int]
    model: Model
    #: TFLite tensor indexes of the model's inputs and outputs, in operand order
    inputs: list[int]
    outputs: list[int]
    #: NNAPI operations emitted (a TFLite node may become several, or none if folded)
    operations: int = 0
    #: per main-subgraph operand: the TFLite tensor name it stands for ("" for made ones)
    operand_names: list[str] = field(default_factory=list)
    #: per NNAPI main operation: the TFLite node it was made from
    operation_nodes: list[int] = field(default_factory=list)


@dataclass
class ImportResult:
    tflite: TfModel
    partitions: list[Partition]
    skipped: list[Skipped]
    #: main-subgraph nodes folded into their consumers (DEQUANTIZE of a float16 constant,
    #: DENSIFY of a sparse constant)
    folded: list[int] = field(default_factory=list)
    #: main-subgraph node count
    nodes: int = 0
    #: the values of the folded nodes' outputs (TFLite tensor -> array)
    constants: dict[int, np.ndarray] = field(default_factory=dict)
    #: remarks on delegated nodes (custom options not passed, ...)
    notes: list[str] = field(default_factory=list)

    def folded_counts(self) -> dict[str, int]:
        """Folded nodes per operator name."""
        ops = self.tflite.subgraphs[0].operators
        counts: dict[str, int] = {}
        for i in self.folded:
            counts[ops[i].name] = counts.get(ops[i].name, 0) + 1
        return counts

    @property
    def delegated(self) -> int:
        return sum(len(p.nodes) for p in self.partitions) + len(self.folded)

    @property
    def min_api(self) -> int:
        """The lowest Android API level whose delegate maps every delegated main-graph node."""
        sg = self.tflite.subgraphs[0]
        names = {sg.operators[i].name for p in self.partitions for i in p.nodes}
        api = max((ops_mod.MIN_API.get(n, 30) for n in names), default=27)
        # operand types of the NNAPI models built here (int8 stays signed: API 30)
        types = {
            o.type
            for p in self.partitions
            for sg_ in (p.model.main, *p.model.referenced)
            for o in sg_.operands
        }
        if T.TENSOR_QUANT8_ASYMM_SIGNED in types or p_has_extensions(self.partitions):
            api = max(api, 30)
        if types & {T.TENSOR_QUANT8_SYMM_PER_CHANNEL, T.TENSOR_FLOAT16, T.TENSOR_BOOL8}:
            api = max(api, 29)
        if "DENSIFY" in self.folded_counts():  # the delegate folds DENSIFY from NNAPI 1.3
            api = max(api, 30)
        return api

    @property
    def complete(self) -> bool:
        """Every node goes to NNAPI: the single partition is the whole model."""
        return not self.skipped and len(self.partitions) == 1


class _Plan:
    """Per TFLite subgraph: folded constants and which nodes disappear."""

    def __init__(self, sg: TfSubgraph) -> None:
        self.sg = sg
        self.values: dict[int, np.ndarray] = {}
        self.folded: set[int] = set()
        produced = {t for op in sg.operators for t in op.outputs}
        for t in sg.tensors:
            if t.is_variable and t.data is None and t.index not in produced:
                dtype = {FLOAT32: np.float32, INT8: np.int8, INT16: np.int16, UINT8: np.uint8}.get(
                    t.type, np.float32
                )
                self.values[t.index] = np.zeros(t.shape, dtype)
        #: DENSIFY nodes left in the graph -> why they were not folded
        self.densify_refused: dict[int, str] = {}
        for op in sg.operators:
            if op.name == "DENSIFY" and len(op.inputs) == 1 and len(op.outputs) == 1:
                why = _densify_refusal(op, sg.tensors[op.inputs[0]])
                if why:
                    self.densify_refused[op.index] = why
                    continue
                src = sg.tensors[op.inputs[0]]
                where = src.describe(sg.index)
                self.values[op.outputs[0]] = densify(src.data, src.shape, src.sparsity, where)
                self.folded.add(op.index)
            elif op.name == "DEQUANTIZE" and len(op.inputs) == 1:
                src = sg.tensors[op.inputs[0]]
                value = self.values.get(op.inputs[0])  # a densified constant
                if value is None and src.data is not None and not src.is_sparse:
                    value = src.data
                if src.type == FLOAT16 and value is not None:
                    self.values[op.outputs[0]] = value.astype(np.float32)
                    self.folded.add(op.index)

    def constant(self, t: int) -> np.ndarray | None:
        if t in self.values:
            return self.values[t]
        rec = self.sg.tensors[t]
        if rec.data is not None and not rec.is_sparse and rec.type not in (5, 13, 14):
            return rec.data
        return None


class OpContext:
    """What an operator mapper sees: tensors of one subgraph, operands of one builder."""

    def __init__(self, conv: _Converter, plan: _Plan, g: SubgraphBuilder) -> None:
        self.conv = conv
        self.plan = plan
        self.sg = plan.sg
        self.g = g
        self.operands: dict[int, OperandIndex] = {}
        self.emitted = 0
        #: operands some emitted operation writes
        self.written: set[int] = set()
        self.accelerator_specified = True

    # ---- tensors ----------------------------------------------------------

    def tensor(self, t: int) -> TfTensor:
        return self.sg.tensors[t]

    def is_constant(self, t: int) -> bool:
        return self.plan.constant(t) is not None

    def value(self, t: int) -> np.ndarray:
        v = self.plan.constant(t)
        assert v is not None
        return v

    def _spec(self, t: int, force_per_channel: bool = False) -> dict[str, Any]:
        rec = self.tensor(t)
        ty, scale, zp, cq = rec.type, rec.scale, rec.zero_point, None
        if t in self.plan.values and ty == FLOAT16 and self.plan.values[t].dtype == np.float32:
            ty = FLOAT32  # folded float16 constant
        if ty == FLOAT32:
            code, scale, zp = T.TENSOR_FLOAT32, 0.0, 0
        elif ty == FLOAT16:
            code, scale, zp = T.TENSOR_FLOAT16, 0.0, 0
        elif ty == INT32:
            code = T.TENSOR_INT32
            if rec.per_channel:
                scale, zp = 0.0, 0
        elif ty == UINT8:
            code = T.TENSOR_QUANT8_ASYMM
            scale = scale or 1.0
        elif ty == INT8:
            if rec.per_channel or (force_per_channel and rec.scales is not None):
                code = T.TENSOR_QUANT8_SYMM_PER_CHANNEL
                cq = ([float(s) for s in rec.scales], rec.quantized_dimension)
                scale, zp = 0.0, 0
            else:
                code = T.TENSOR_QUANT8_ASYMM_SIGNED
                scale = scale or 1.0
        elif ty == BOOL:
            code, scale, zp = T.TENSOR_BOOL8, 0.0, 0
        elif ty == INT16:
            code = T.TENSOR_QUANT16_SYMM
        else:
            raise Unsupported(f"tensor {rec.name!r} of type {rec.type_name} has no NNAPI type")
        dims = tuple(rec.shape) if rec.shape else (1,)  # scalars as [1], as the delegate does
        return {
            "type": code,
            "dims": dims,
            "scale": float(scale),
            "zero_point": int(zp),
            "channel_quant": cq,
        }

    def input(
        self, t: int, *, bias_of: tuple[int, int] | None = None, force_per_channel: bool = False
    ) -> OperandIndex:
        if t in self.operands:
            return self.operands[t]
        value = self.plan.constant(t)
        if value is None:
            raise Unsupported(f"input {self.tensor(t).name!r} is not available to the NNAPI model")
        spec = self._spec(t, force_per_channel)
        arr = np.asarray(value).reshape(spec["dims"])
        idx = self.g.constant(
            spec["type"],
            arr,
            spec["dims"],
            spec["scale"],
            spec["zero_point"],
            channel_quant=spec["channel_quant"],
            reference=arr.nbytes >= _REFERENCE_BYTES,
        )
        self.operands[t] = idx
        return idx

    def declare(self, t: int, kind: str) -> OperandIndex:
        """A subgraph input or output operand (created up front, in TFLite's order)."""
        spec = self._spec(t)
        make = self.g.input if kind == "input" else self.g.output
        idx = make(
            spec["type"],
            spec["dims"],
            spec["scale"],
            spec["zero_point"],
            channel_quant=spec["channel_quant"],
        )
        if kind == "input":
            self.operands[t] = idx
        return idx

    # ---- operands made for the mapping --------------------------------------

    def scalars(self, code: int, *values: Any) -> list[OperandIndex]:
        return [self.g.constant(code, v) for v in values]

    def const_vector(self, arr: np.ndarray) -> OperandIndex:
        arr = np.asarray(arr, np.int32).ravel()
        return self.g.constant(T.TENSOR_INT32, arr, (len(arr),))

    def const_tensor(
        self, code: int, arr: np.ndarray, scale: float = 0.0, zero_point: int = 0
    ) -> OperandIndex:
        return self.g.constant(code, arr, arr.shape, scale, zero_point)

    def omitted(self, code: int) -> OperandIndex:
        return self.g.no_value(code)

    def axis_vector(self, t: int) -> OperandIndex:
        v = self.plan.constant(t)
        if v is not None:
            return self.const_vector(np.asarray(v).ravel())
        return self.input(t)

    def zero_bias(self, input_t: int, weights_t: int, n: int) -> OperandIndex:
        x, w = self.tensor(input_t), self.tensor(weights_t)
        if x.type == FLOAT32:
            return self.g.constant(T.TENSOR_FLOAT32, np.zeros(n, np.float32), (n,))
        scale = 0.0 if w.per_channel else x.scale * w.scale
        return self.g.constant(T.TENSOR_INT32, np.zeros(n, np.int32), (n,), scale, 0)

    def temporary_like(self, t: int, dims: Sequence[int]) -> OperandIndex:
        spec = self._spec(t)
        return self.g.temporary(
            spec["type"],
            tuple(dims),
            spec["scale"],
            spec["zero_point"],
            channel_quant=spec["channel_quant"],
        )

    def dequantized(self, t: int) -> OperandIndex:
        spec = self._spec(t)
        out = self.g.temporary(T.TENSOR_FLOAT32, spec["dims"])
        self.g.operation(OperationType.DEQUANTIZE, [self.input(t)], [out])
        self.written.add(int(out))
        self.emitted += 1
        return out

    def subgraph_operand(self, index: int, role: str) -> OperandIndex:
        return self.g.subgraph_ref(self.conv.referenced(self.g.model, index, role))

    # ---- emission ------------------------------------------------------------

    def emit(
        self, nn: str | int, ins: Sequence[int], outs: Sequence[int], *, raw_outputs: bool = False
    ) -> None:
        """``nn``: an NNAPI operation name, or an operation code (extension operations)."""
        out_operands = list(outs) if raw_outputs else [self._output(t) for t in outs]
        code = OperationType[nn] if isinstance(nn, str) else nn
        self.g.operation(code, list(ins), out_operands)
        self.written.update(int(o) for o in out_operands)
        self.emitted += 1

    def extension_operation(self, extension: str, number: int) -> int:
        """The operation code of ``extension``'s operation ``number`` in this model."""
        prefixes = self.conv.prefixes.setdefault(id(self.g.model), {})
        if extension not in prefixes:
            prefixes[extension] = self.g.model.extension(extension, len(prefixes) + 1)
        return (prefixes[extension] << 16) | number

    def _output(self, t: int) -> OperandIndex:
        if t in self.operands:
            return self.operands[t]
        spec = self._spec(t)
        idx = self.g.temporary(
            spec["type"],
            spec["dims"],
            spec["scale"],
            spec["zero_point"],
            channel_quant=spec["channel_quant"],
        )
        self.operands[t] = idx
        return idx


class _Converter:
    def __init__(self, model: TfModel, custom_ops: dict[str, tuple[Any, ...]] | None) -> None:
        self.model = model
        self.custom_ops = dict(custom_ops or {})
        #: per ModelBuilder (by id): extension name -> prefix
        self.prefixes: dict[int, dict[str, int]] = {}
        self.plans = [_Plan(sg) for sg in model.subgraphs]
        #: (ModelBuilder id, TFLite subgraph index) -> its NNAPI subgraph
        self._refs: dict[tuple[int, int], SubgraphBuilder] = {}
        self._building: set[int] = set()
        #: (subgraph, node) -> a note about the conversion (custom options not passed)
        self.notes: dict[tuple[int, int], str] = {}
        #: main-graph nodes refused from outside (the target devices support them not)
        self.refuse: dict[int, str] = {}

    def mapper(self, op: TfOperator) -> Any:
        """The mapping function for ``op``, or None when nothing maps it."""
        if op.name == "CUSTOM":
            if op.custom_code not in self.custom_ops:
                return None
            extension, number, *rest = self.custom_ops[op.custom_code]
            params = rest[0] if rest else None

            def custom(ctx: OpContext, op: TfOperator) -> None:
                code = ctx.extension_operation(extension, number)
                ins = [ctx.input(t) for t in op.inputs if t != -1]
                if params is not None:  # the definition is known: options become parameters
                    operands, unknown = param_operands(ctx, op, params)
                    ins += operands
                    if unknown:
                        self.notes[(ctx.sg.index, op.index)] = (
                            f"{op.describe(ctx.sg.index)}: custom options {unknown} are not "
                            f"parameters of {extension}:{number}; not passed"
                        )
                elif op.custom_options:
                    self.notes[(ctx.sg.index, op.index)] = (
                        f"{op.describe(ctx.sg.index)}: {len(op.custom_options)} bytes of custom "
                        "options not passed (no operation definition given); the extension's "
                        "defaults apply"
                    )
                ctx.emit(code, ins, op.outputs)

            return custom
        return ops_mod.MAPPERS.get(op.name)

    # ---- referenced subgraphs (WHILE / IF) -----------------------------------

    def referenced(self, mb: ModelBuilder, index: int, role: str) -> SubgraphBuilder:
        key = (id(mb), index)
        if key in self._refs:
            return self._refs[key]
        if index in self._building:  # the reader rejects cycles; kept for safety
            raise Unsupported(f"{role} subgraph {index} calls itself")
        self._building.add(index)
        try:
            g = mb.subgraph()
            plan = self.plans[index]
            sg = plan.sg
            ctx = OpContext(self, plan, g)
            for t in sg.inputs:
                ctx.declare(t, "input")
            outs = [ctx.declare(t, "output") for t in sg.outputs]
            out_of = dict(zip(sg.outputs, outs))
            for op in sg.operators:
                if op.index in plan.folded:
                    continue
                fn = self.mapper(op)
                if fn is None:
                    raise Unsupported(
                        f"{role} subgraph {index}: {op.describe(index)}: {self.unmapped_reason(op)}"
                    )
                try:
                    for t in op.outputs:  # outputs of the subgraph are written in place
                        if t in out_of and t not in ctx.operands:
                            ctx.operands[t] = out_of[t]
                    fn(ctx, op)
                except Unsupported as e:
                    raise Unsupported(
                        f"{role} subgraph {index}: {op.describe(index)}: {e}"
                    ) from None
            _pass_through(ctx, sg.outputs, out_of)
        finally:
            self._building.discard(index)
        self._refs[key] = g
        return g

    # ---- the main subgraph ---------------------------------------------------

    def node_reason(self, op: TfOperator) -> str | None:
        """Why the delegate would not take this node on its own (None: it would)."""
        if self.mapper(op) is None:
            return self.unmapped_reason(op)
        try:
            self._build([op.index], trial=True)
        except Unsupported as e:
            return str(e)
        return None

    def unmapped_reason(self, op: TfOperator) -> str:
        if op.name == "CUSTOM":
            return (
                f"custom operator {op.custom_code!r}: the NNAPI delegate takes no custom "
                "operators (map it to an op-package extension operation with --custom-op)"
            )
        if op.name == "DENSIFY":
            why = self.plans[0].densify_refused.get(op.index, "not a foldable DENSIFY")
            return f"DENSIFY is only folded into constant weights: {why}"
        return "Unsupported operation type."

    def _build(self, nodes: list[int], trial: bool = False) -> Partition:
        plan = self.plans[0]
        sg = plan.sg
        node_set = set(nodes)
        produced_in = {t for i in nodes for t in sg.operators[i].outputs}
        consumed_elsewhere = {
            t for op in sg.operators if op.index not in node_set for t in op.inputs
        }
        if len(nodes) == len([o for o in sg.operators if o.index not in plan.folded]) and not trial:
            inputs = [t for t in sg.inputs if plan.constant(t) is None]
            outputs = list(sg.outputs)
        else:
            inputs = []
            for i in nodes:
                for t in sg.operators[i].inputs:
                    if (
                        t != -1
                        and t not in produced_in
                        and plan.constant(t) is None
                        and t not in inputs
                    ):
                        inputs.append(t)
            outputs = [t for t in sg.outputs if t in produced_in]
            outputs += [
                t
                for i in nodes
                for t in sg.operators[i].outputs
                if t in consumed_elsewhere and t not in outputs
            ]
        mb = ModelBuilder()
        ctx = OpContext(self, plan, mb.main)
        for t in inputs:
            ctx.declare(t, "input")
        outs = [ctx.declare(t, "output") for t in outputs]
        out_of = dict(zip(outputs, outs))
        op_nodes: list[int] = []
        for i in nodes:
            op = sg.operators[i]
            for t in op.outputs:
                if t in out_of and t not in ctx.operands:
                    ctx.operands[t] = out_of[t]
            before = ctx.emitted
            self.mapper(op)(ctx, op)
            op_nodes += [i] * (ctx.emitted - before)
        before = ctx.emitted
        _pass_through(ctx, outputs, out_of)
        op_nodes += [nodes[-1]] * (ctx.emitted - before)  # identities closing the partition
        model = mb.build()
        names = [""] * len(model.main.operands)
        for t, idx in [*ctx.operands.items(), *out_of.items()]:
            names[int(idx)] = sg.tensors[t].name
        return Partition(nodes, model, inputs, outputs, ctx.emitted, names, op_nodes)

    def run(self) -> ImportResult:
        sg = self.model.subgraphs[0]
        plan = self.plans[0]
        skipped, partitions, run = [], [], []
        for op in sg.operators:
            if op.index in plan.folded:
                continue
            reason = self.refuse.get(op.index) or self.node_reason(op)
            if reason is None:
                run.append(op.index)
                continue
            skipped.append(Skipped(0, op.index, _label(op), reason))
            if run:
                partitions.append(run)
            run = []
        if run:
            partitions.append(run)
        built = [self._build(nodes) for nodes in partitions]
        constants = {t: plan.values[t] for i in plan.folded for t in sg.operators[i].outputs}
        return ImportResult(
            self.model,
            built,
            skipped,
            sorted(plan.folded),
            len(sg.operators),
            constants,
            [self.notes[k] for k in sorted(self.notes)],
        )


def _densify_refusal(op: TfOperator, src: TfTensor) -> str:
    """Why the delegate would not fold this DENSIFY ("" when it folds it). Its Validate
    takes a DENSIFY whose input is a constant (from NNAPI 1.3), then densifies the sparse
    weights itself and hands NNAPI the dense constant; the operator version is not checked."""
    if src.data is None:
        return f"input {src.name!r} is not a constant tensor"
    if src.sparsity is None:
        return f"input {src.name!r} has no sparsity metadata"
    if src.type not in (FLOAT32, FLOAT16, INT8, UINT8):
        return f"input {src.name!r} is {src.type_name}; FLOAT32/FLOAT16/INT8/UINT8 are densified"
    return ""


def p_has_extensions(partitions: Sequence[Partition]) -> bool:
    return any(p.model.extensionNameToPrefix for p in partitions)


def _label(op: TfOperator) -> str:
    return f"CUSTOM {op.custom_code!r}" if op.name == "CUSTOM" else op.name


def _pass_through(ctx: OpContext, outputs: Sequence[int], out_of: dict[int, OperandIndex]) -> None:
    """Outputs no operation wrote (a subgraph input or a constant handed straight
    back, as WHILE bodies do with loop invariants) get an identity operation."""
    written = ctx.written
    for t in outputs:
        target = out_of[t]
        if int(target) in written:
            continue
        src = ctx.operands.get(t)
        if src is None or src == target:
            src = ctx.input(t)  # a constant handed straight back
        rec = ctx.tensor(t)
        if rec.type == BOOL:
            ctx.g.operation(OperationType.LOGICAL_AND, [src, src], [target])
        elif rec.type == INT32:  # RESHAPE takes no TENSOR_INT32; x + 0 does (NNAPI 1.3)
            zero = ctx.g.constant(T.TENSOR_INT32, np.zeros(1, np.int32), (1,))
            ctx.g.operation(OperationType.ADD, [src, zero, ctx.g.constant(T.INT32, 0)], [target])
        else:
            dims = rec.shape if rec.shape else (1,)
            shape = ctx.const_vector(np.array(dims, np.int32))
            ctx.g.operation(OperationType.RESHAPE, [src, shape], [target])
        written.add(int(target))
        ctx.emitted += 1


def convert(
    model: TfModel,
    custom_ops: dict[str, tuple[Any, ...]] | None = None,
    refuse: dict[int, str] | None = None,
) -> ImportResult:
    """Convert a checked TFLite model; see the module docstring.

    ``custom_ops``: TFLite custom code -> (extension name, operation number[, params]):
    that custom operator becomes the extension's operation, inputs and outputs in TFLite's
    order. With ``params`` (the definition's parameters, ``custom_options.CustomParam``)
    its FlexBuffer custom options become the parameter operands; without, they are not
    passed (a note says so) and the extension's defaults apply. An nnhal extension beyond
    the delegate, for vendor kernels served by an op package.

    ``refuse``: main-graph node -> reason: nodes left to the CPU whatever their mapping
    (the delegate's ``disallow_nnapi_cpu``: nodes the target devices do not support).
    """
    converter = _Converter(model, custom_ops)
    converter.refuse = dict(refuse or {})
    return converter.run()
