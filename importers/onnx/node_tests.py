"""ONNX's backend node tests (``onnx/backend/test/data/node``) through the importer.

Each test directory holds ``model.onnx`` and ``test_data_set_*`` with
``input_*.pb`` / ``output_*.pb``. ``cases()`` lists the tests that exercise
the control-flow operators (test_loop*, test_if*, test_scan*,
test_range_*_expanded) and every operator this importer maps;
``run_case(case, execute)`` imports the model, runs every data set through
``execute(model, inputs) -> outputs`` (an NNAPI executor, injected so this
module needs no driver) and compares with the stored outputs: floats with
rtol 1e-3 / atol 1e-4 (NNAPI kernels may reassociate), quantized values
within 1, everything else exactly. The outcome is ``passed``,
``unsupported`` (with the importer's reasons) or ``failed`` (with why).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

CONTROL = ("test_loop", "test_if", "test_scan", "test_range_")


def data_root() -> Path | None:
    import onnx

    root = Path(onnx.__file__).parent / "backend" / "test" / "data" / "node"
    return root if root.is_dir() else None


def _snake(op: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", op).lower()


def operator_of(name: str, ops: list[str]) -> str | None:
    """The mapped operator a test directory name is about (longest prefix), or None."""
    if name.startswith(("test_loop", "test_if", "test_scan")):
        return {"test_l": "Loop", "test_i": "If", "test_s": "Scan"}[name[:6]]
    if name.startswith("test_range_") and name.endswith("_expanded"):
        return "Range"
    if name.startswith(_OTHER_OPERATORS):
        return None
    best, best_len = None, 0
    for op in ops:
        for stem in {"test_" + _snake(op), "test_" + op.lower(), *_ALIASES.get(op, ())}:
            matches = name == stem or (name.startswith(stem) and name[len(stem)] in "_0123456789")
            if matches and len(stem) > best_len:
                best, best_len = op, len(stem)
    return best


#: test directory stems that do not follow the operator's name (Pad's tests are named by
#: mode; GreaterOrEqual's as greater_equal, which the Greater prefix would otherwise take)
_ALIASES = {
    "BatchNormalization": ("test_batchnorm",),
    "Conv": ("test_basic_conv",),
    "GreaterOrEqual": ("test_greater_equal",),
    "LessOrEqual": ("test_less_equal",),
    "Pad": ("test_constant_pad", "test_edge_pad", "test_reflect_pad", "test_wrap_pad"),
}

#: tests of unmapped operators whose names start with a mapped operator's stem
_OTHER_OPERATORS = ("test_gather_elements",)


def cases() -> list[tuple[str, str, Path]]:
    """(test name, operator, directory) of every relevant node test shipped with onnx."""
    from .registry import table

    root = data_root()
    if root is None:
        return []
    ops = sorted(table())
    out = []
    for d in sorted(root.iterdir()):
        op = operator_of(d.name, ops)
        if op is not None and (d / "model.onnx").is_file():
            out.append((d.name, op, d))
    return out


@dataclass
class Outcome:
    name: str
    op: str
    status: str  # passed | unsupported | failed
    detail: str = ""
    reasons: list[str] = field(default_factory=list)


def load_data_set(d: Path) -> tuple[list[np.ndarray], list[np.ndarray]]:
    import onnx
    from onnx import numpy_helper

    def read(p: Path):
        t = onnx.TensorProto()
        t.ParseFromString(p.read_bytes())
        return numpy_helper.to_array(t)

    def idx(p: Path) -> int:
        return int(p.stem.split("_")[1])

    ins = [read(p) for p in sorted(d.glob("input_*.pb"), key=idx)]
    outs = [read(p) for p in sorted(d.glob("output_*.pb"), key=idx)]
    return ins, outs


def compare(name: str, got: np.ndarray, want: np.ndarray, quantized: bool) -> str | None:
    got = np.asarray(got)
    if got.shape != want.shape:
        return f"{name}: shape {list(got.shape)}, expected {list(want.shape)}"
    if want.dtype.kind == "f":
        ok = np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=1e-3, atol=1e-4,
                         equal_nan=True)  # fmt: skip
    elif quantized:
        ok = bool(np.all(np.abs(got.astype(np.int64) - want.astype(np.int64)) <= 1))
    else:
        ok = bool(np.array_equal(got, want))
    if ok:
        return None
    return f"{name}: values differ (got {got.reshape(-1)[:6]}, expected {want.reshape(-1)[:6]})"


_CONST = re.compile(r"'([^']+)'\) must be a constant")


def _input_names(d: Path) -> list[str]:
    import onnx

    m = onnx.load(str(d / "model.onnx"), load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    return [vi.name for vi in m.graph.input if vi.name not in inits]


#: input positions a quantized export stores as initializers: scales, zero points, weights
_QPARAMS = {"QuantizeLinear": (1, 2), "DequantizeLinear": (1, 2),
            "QLinearConv": (1, 2, 3, 4, 5, 6, 7, 8),
            "QLinearMatMul": (1, 2, 3, 4, 5, 6, 7)}  # fmt: skip


def _quant_param_inputs(d: Path) -> list[str]:
    import onnx

    m = onnx.load(str(d / "model.onnx"), load_external_data=False)
    out = []
    for node in m.graph.node:
        for k in _QPARAMS.get(node.op_type, ()):
            if k < len(node.input) and node.input[k]:
                out.append(node.input[k])
    return out


def run_case(name: str, op: str, d: Path, execute: Callable) -> Outcome:
    from .api import import_onnx
    from .errors import OnnxImportError

    sets = sorted(d.glob("test_data_set_*"))
    first: list | None = None
    frozen: dict[str, np.ndarray] = {}
    params = _quant_param_inputs(d)
    if params:  # quantization parameters fed as inputs: fixed, as in a quantized export
        first, _ = load_data_set(sets[0])
        by_name = dict(zip(_input_names(d), first))
        frozen = {k: by_name[k] for k in params if k in by_name}
    while True:
        try:
            result = import_onnx(d / "model.onnx", constants=frozen)
        except OnnxImportError as exc:
            return Outcome(name, op, "unsupported", str(exc), [str(exc)])
        # parameters NNAPI needs as constants but the test feeds as inputs: fixed to
        # the stored value (as an exporter would have written them), then retried
        wanted = {m for u in result.unsupported for m in _CONST.findall(u.reason)}
        if result.ok or not wanted:
            break
        if first is None:
            first, _ = load_data_set(sets[0])
        by_name = dict(zip(_input_names(d), first))
        wanted = {m for u in result.unsupported for m in _CONST.findall(u.reason)}
        wanted = {m for m in wanted if m in by_name and m not in frozen}
        if result.ok or not wanted:
            break
        frozen.update({m: by_name[m] for m in wanted})
    if not result.ok:
        reasons = [f"{u.op_type}: {u.reason}" for u in result.unsupported]
        return Outcome(name, op, "unsupported", "; ".join(reasons), reasons)
    for ds in sets:
        ins, want = load_data_set(ds)
        all_feeds = dict(zip(_input_names(d), ins))
        if any(not np.array_equal(all_feeds[k], v) for k, v in frozen.items()):
            continue  # a data set with other parameter values: not this fixed model
        feeds = {p.name: all_feeds[p.name] for p in result.inputs}
        try:
            arrays = execute(result.model, result.nnapi_inputs(feeds))
        except Exception as exc:  # noqa: BLE001  (reported as the failure)
            return Outcome(name, op, "failed", f"{ds.name}: {type(exc).__name__}: {exc}"[:300])
        got = result.onnx_outputs(arrays)
        for port, w in zip(result.outputs, want):
            problem = compare(port.name, got[port.name], w, port.name in result.quant)
            if problem:
                return Outcome(name, op, "failed", f"{ds.name}: {problem}"[:300])
    detail = f"inputs fixed to their stored values: {sorted(frozen)}" if frozen else ""
    return Outcome(name, op, "passed", detail)
