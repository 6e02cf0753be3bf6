"""Running a partitioned TFLite model: NNAPI partitions on a device, the rest on LiteRT.

What the delegate leaves to TFLite's CPU kernels runs here in LiteRT, one node
at a time, each as a single-operator model cut from the original file: the
same tensors, buffers, operator codes and referenced subgraphs (so a refused
WHILE runs with its own cond/body), with the main subgraph replaced by that one
node. The model is rewritten with LiteRT's own generated schema code (object
API), so this module needs the ``tflite`` extra (``ai-edge-litert``).

``TfliteRunner(result, prepare, model_bytes)`` takes an ``ImportResult`` and a
function that prepares a delegated ``Partition`` (``runtime_steps.RuntimePartition``
compiles it with the emulated NNAPI runtime; anything with ``execute(feeds)`` and
``release()`` will do) and runs the steps in execution order; ``plan()``
describes which step runs where.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from nnhal.importers.tflite.convert import ImportResult, Partition

__all__ = ["FallbackError", "Step", "TfliteRunner", "single_op_model"]


class FallbackError(ValueError):
    """A node left to the CPU that LiteRT cannot run; one line naming the node."""


def _schema() -> Any:
    try:
        from ai_edge_litert import schema_py_generated as schema
    except ImportError as e:
        raise ImportError(
            "running nodes the NNAPI delegate leaves to the CPU needs LiteRT: "
            f"pip install 'nnhal[tflite]' ({e})"
        ) from None
    return schema


def single_op_model(unpacked: Any, node: int) -> bytes:
    """The model with its main subgraph cut down to node ``node`` (``unpacked``: a ModelT)."""
    import flatbuffers

    schema = _schema()
    main = unpacked.subgraphs[0]
    op = main.operators[node]
    consts = {
        i
        for i, t in enumerate(main.tensors)
        if t.buffer
        and unpacked.buffers[t.buffer].data is not None
        and len(unpacked.buffers[t.buffer].data)
    }
    sub = schema.SubGraphT()
    sub.tensors = main.tensors
    sub.inputs = [
        int(i)
        for i in op.inputs
        if i >= 0 and int(i) not in consts and not main.tensors[int(i)].isVariable
    ]
    sub.outputs = [int(i) for i in op.outputs]
    sub.operators = [op]
    sub.name = f"node_{node}"
    saved, saved_sigs = unpacked.subgraphs[0], unpacked.signatureDefs
    unpacked.subgraphs[0], unpacked.signatureDefs = sub, None
    try:
        b = flatbuffers.Builder(1024)
        b.Finish(unpacked.Pack(b), file_identifier=b"TFL3")
        return bytes(b.Output())
    finally:
        unpacked.subgraphs[0], unpacked.signatureDefs = saved, saved_sigs


@dataclass
class Step:
    kind: str  # "nnapi" | "litert"
    nodes: list[int]
    inputs: list[int]  # TFLite tensors read
    outputs: list[int]  # TFLite tensors written
    runner: Any = None
    ms: float = 0.0  # time of the last run

    def describe(self, names: Callable[[int], str]) -> str:
        where = "NNAPI" if self.kind == "nnapi" else "LiteRT CPU"
        n = self.nodes
        span = f"node {n[0]}" if len(n) == 1 else f"{len(n)} nodes {n[0]}..{n[-1]}"
        return f"{where}: {span} ({names(n[0])}{', ...' if len(n) > 1 else ''})"


class TfliteRunner:
    """Steps in execution order over one tensor environment."""

    def __init__(
        self, result: ImportResult, prepare: Callable[[Any], Any], model_bytes: bytes
    ) -> None:
        self.result = result
        sg = result.tflite.subgraphs[0]
        self.sg = sg
        self.steps: list[Step] = []
        self._prepared: list[Any] = []
        try:
            self._build(result, prepare, model_bytes)
        except BaseException:
            self.release()  # partitions prepared before the failure
            raise

    def _build(
        self, result: ImportResult, prepare: Callable[[Any], Any], model_bytes: bytes
    ) -> None:
        sg = self.sg
        partitions: dict[int, Partition] = {p.nodes[0]: p for p in result.partitions}
        skipped = {s.index for s in result.skipped}
        unpacked = None
        for op in sg.operators:
            if op.index in partitions:
                p = partitions[op.index]
                prepared = prepare(p)
                self._prepared.append(prepared)
                self.steps.append(Step("nnapi", p.nodes, p.inputs, p.outputs, (prepared, p)))
            elif op.index in skipped:
                if unpacked is None:
                    schema = _schema()
                    unpacked = schema.ModelT.InitFromPackedBuf(model_bytes, 0)
                from ai_edge_litert.interpreter import Interpreter

                try:
                    interp = Interpreter(
                        model_content=single_op_model(unpacked, op.index), num_threads=1
                    )
                    interp.allocate_tensors()
                except (RuntimeError, ValueError) as e:  # no kernel (custom op), bad shapes
                    first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
                    raise FallbackError(f"{op.describe(0)} cannot run in LiteRT: {first}") from None
                ins = [
                    t
                    for t in op.inputs
                    if t >= 0 and sg.tensors[t].data is None and not sg.tensors[t].is_variable
                ]
                self.steps.append(Step("litert", [op.index], ins, list(op.outputs), interp))

    def plan(self) -> list[str]:
        def name(i: int) -> str:
            return self.sg.operators[i].name

        return [s.describe(name) for s in self.steps]

    def run(self, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        env: dict[int, np.ndarray] = dict(zip(self.sg.inputs, inputs))
        for t, v in self.result_constants().items():
            env.setdefault(t, v)
        for step in self.steps:
            t0 = time.perf_counter()
            if step.kind == "nnapi":
                prepared, part = step.runner
                feeds = [np.atleast_1d(env[t]) for t in part.inputs]
                shapes = [tuple(self.sg.tensors[t].shape) or (1,) for t in part.outputs]
                res = prepared.execute(feeds, output_shapes=shapes)
                for t, o in zip(part.outputs, res.outputs):
                    env[t] = np.asarray(o).reshape(self.sg.tensors[t].shape)
            else:
                interp = step.runner
                interp.reset_all_variables()
                for d, t in zip(interp.get_input_details(), step.inputs):
                    interp.set_tensor(d["index"], np.asarray(env[t]).reshape(d["shape"]))
                interp.invoke()
                for d, t in zip(interp.get_output_details(), step.outputs):
                    env[t] = interp.get_tensor(d["index"]).copy()
            step.ms = (time.perf_counter() - t0) * 1e3
        return [env[t] for t in self.sg.outputs]

    def result_constants(self) -> dict[int, np.ndarray]:
        """Outputs of folded DEQUANTIZE / DENSIFY nodes, for CPU nodes that read them."""
        return dict(self.result.constants)

    def release(self) -> None:
        for p in self._prepared:
            p.release()
        self._prepared = []
