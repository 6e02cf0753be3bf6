"""The vector format (nnhal.vectors), the tolerance table (nnhal.tolerance), and
the CI run of the shared NNAPI vectors that use only this issue's operations.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from repo_paths import REPO_ROOT

from nnhal.builder import ModelBuilder
from nnhal.types import (
    InlineMemory,
    OperandLifeTime,
    OperandType,
    OperationType,
    SymmPerChannelQuantParams,
)
from nnhal.vectors import (
    VectorFormatError,
    check_multinomial,
    compare,
    dump_test_model,
    find_vector_files,
    load_vectors,
    model_to_json,
    operations_used,
    parse_test_model,
    save_vectors,
    tolerance,
)

REPO = REPO_ROOT
F32 = OperandType.TENSOR_FLOAT32
F16 = OperandType.TENSOR_FLOAT16


def _operand(type_, dims, lifetime, data=None, consumers=0, **kw):
    d = {
        "name": kw.pop("name", ""),
        "type": type_,
        "dimensions": dims,
        "scale": kw.pop("scale", 0.0),
        "zeroPoint": kw.pop("zeroPoint", 0),
        "lifetime": lifetime,
        "numberOfConsumers": consumers,
        "isIgnored": kw.pop("isIgnored", False),
        "channelQuant": kw.pop("channelQuant", None),
        "data": data,
    }
    assert not kw
    return d


def _add_vector(name="add/base", relaxed=False, expect_failure=False):
    return {
        "name": name,
        "testName": name.replace("/", "_"),
        "spec": name.split("/")[0],
        "specVersion": "V1_0",
        "expectFailure": expect_failure,
        "isRelaxed": relaxed,
        "expectedMultinomialDistributionTolerance": 0.0,
        "minSupportedVersion": "V1_0",
        "main": {
            "operands": [
                _operand(
                    "TENSOR_FLOAT32",
                    [1, 2],
                    "SUBGRAPH_INPUT",
                    {"dtype": "float32", "values": [1.0, 2.0]},
                    1,
                ),
                _operand(
                    "TENSOR_FLOAT32",
                    [1, 2],
                    "CONSTANT_COPY",
                    {"dtype": "float32", "values": [3.0, 4.0]},
                    1,
                ),
                _operand("INT32", [], "CONSTANT_COPY", {"dtype": "int32", "values": [0]}, 1),
                _operand(
                    "TENSOR_FLOAT32",
                    [1, 2],
                    "SUBGRAPH_OUTPUT",
                    {"dtype": "float32", "values": [4.0, 6.0]},
                ),
            ],
            "operations": [{"type": "ADD", "inputs": [0, 1, 2], "outputs": [3]}],
            "inputIndexes": [0],
            "outputIndexes": [3],
        },
        "referenced": [],
    }


# ---- loading ---------------------------------------------------------------


def test_parse_simple_model():
    t = parse_test_model(_add_vector())
    m = t.model
    assert t.name == "add/base" and not t.expectFailure
    assert m.main.inputIndexes == (0,) and m.main.outputIndexes == (3,)
    assert [o.lifetime for o in m.main.operands][1] == OperandLifeTime.CONSTANT_COPY
    loc = m.main.operands[1].location
    assert np.frombuffer(
        m.operandValues[loc.offset : loc.offset + loc.length], np.float32
    ).tolist() == [3.0, 4.0]
    assert t.inputs[0].shape == (1, 2) and t.inputs[0].dtype == np.float32
    assert t.expected[0].tolist() == [[4.0, 6.0]]
    assert t.expected_shapes == [(1, 2)] and t.output_types == [F32] and t.ignored == [False]
    assert m.main.operations[0].type == OperationType.ADD
    assert operations_used(m) == {"ADD"}


def test_parse_reference_subgraph_channelquant_and_no_value():
    d = _add_vector()
    ops = d["main"]["operands"]
    ops[1]["lifetime"] = "CONSTANT_REFERENCE"
    ops[0]["data"] = None  # an input without a value: hasNoValue
    ops.append(
        _operand(
            "TENSOR_QUANT8_SYMM_PER_CHANNEL",
            [2, 1],
            "CONSTANT_COPY",
            {"dtype": "int8", "values": [1, -1]},
            channelQuant={"scales": [0.5, 0.25], "channelDim": 0},
        )
    )
    ops.append(_operand("SUBGRAPH", [], "SUBGRAPH", {"dtype": "uint32", "values": [0]}))
    ops.append(_operand("TENSOR_BOOL8", [2], "CONSTANT_COPY", {"dtype": "bool", "values": [0, 1]}))
    d["referenced"] = [
        {
            "operands": [_operand("TENSOR_FLOAT16", [1], "SUBGRAPH_INPUT")],
            "operations": [],
            "inputIndexes": [0],
            "outputIndexes": [0],
        }
    ]
    t = parse_test_model(d)
    m = t.model
    assert t.inputs == [None]
    assert len(m.pools) == 1 and isinstance(m.pools[0], InlineMemory)
    assert m.main.operands[1].location.poolIndex == 0
    assert np.frombuffer(m.pools[0].data, np.float32).tolist() == [3.0, 4.0]
    assert m.main.operands[4].extraParams == SymmPerChannelQuantParams((0.5, 0.25), 0)
    assert m.main.operands[5].location.offset == 0
    assert m.main.operands[5].lifetime == OperandLifeTime.SUBGRAPH
    assert m.referenced[0].operands[0].type == F16
    # bools are packed as single bytes after the other constants
    boolop = m.main.operands[6]
    assert m.operandValues[boolop.location.offset : boolop.location.offset + 2] == b"\0\1"


def test_round_trip_builder_model(tmp_path):
    mb = ModelBuilder(relaxed=True)
    body = mb.subgraph()
    bi = body.input(F32, [2])
    bo = body.output(F32, [2])
    body.operation(OperationType.RESHAPE, [bi, body.constant(OperandType.TENSOR_INT32, [2])], [bo])
    g = mb.main
    x = g.input(F32, [2])
    w = g.constant(F32, [1.5, -2.0], reference=True)
    c = g.constant(OperandType.TENSOR_BOOL8, [True])
    s = g.subgraph_ref(body)
    y = g.output(F32, [2])
    g.operation(OperationType.IF, [c, s, s, x], [y])
    g.operation(
        OperationType.ADD, [x, w, g.constant(OperandType.INT32, 0)], [g.temporary(F32, [2])]
    )
    model = mb.build()
    doc = model_to_json(model, name="rt/base", inputs=[np.array([1, 2], np.float32)])
    back = parse_test_model(json.loads(json.dumps(doc)))
    assert back.model == model
    assert back.inputs[0].tolist() == [1.0, 2.0]
    assert back.expected == [None]
    # and through a file (gzip), as a list
    path = tmp_path / "m.json.gz"
    save_vectors(path, [back])
    again = load_vectors(path)
    assert len(again) == 1 and again[0].model == model
    assert dump_test_model(again[0])["main"] == doc["main"]


def test_single_object_file_and_folder_search(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.json").write_text(json.dumps(_add_vector("a/base")))
    with gzip.open(tmp_path / "b.json.gz", "wt") as f:
        json.dump([_add_vector("b/one"), _add_vector("b/two")], f)
    (tmp_path / "notes.txt").write_text("not a model")
    files = find_vector_files([tmp_path])
    assert [f.name for f in files] == ["b.json.gz", "a.json"]
    names = [t.name for f in files for t in load_vectors(f)]
    assert names == ["b/one", "b/two", "a/base"]


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda d: d.pop("main"), "missing key 'main'"),
        (lambda d: d["main"]["operands"][0].update(type="FLOAT64"), "unknown operand type"),
        (lambda d: d["main"]["operands"][0].update(lifetime="FOREVER"), "unknown lifetime"),
        (lambda d: d["main"]["operations"][0].update(type="FROB"), "unknown operation type"),
        (
            lambda d: d["main"]["operands"][1].update(data=None),
            "CONSTANT_COPY operand without data",
        ),
        (
            lambda d: d["main"]["operands"][0].update(data={"dtype": "int32", "values": [1, 2]}),
            "does not match operand type",
        ),
        (
            lambda d: d["main"]["operands"][0].update(data={"dtype": "complex", "values": []}),
            "dtype",
        ),
        (
            lambda d: d["main"]["operands"][0].update(data={"dtype": "float32", "values": ["x"]}),
            "bad data",
        ),
        (lambda d: d["main"].update(inputIndexes=[9]), "out of range"),
        (lambda d: d["main"].update(inputIndexes="0"), "list of integers"),
    ],
)
def test_malformed_models(mutate, match):
    d = _add_vector()
    mutate(d)
    with pytest.raises(VectorFormatError, match=match):
        parse_test_model(d, "x.json")


def test_bad_files(tmp_path):
    with pytest.raises(VectorFormatError, match="no such file"):
        load_vectors(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(VectorFormatError, match="not a valid JSON"):
        load_vectors(bad)
    notgz = tmp_path / "bad.json.gz"
    notgz.write_text("plain")
    with pytest.raises(VectorFormatError, match="not a valid JSON"):
        load_vectors(notgz)
    num = tmp_path / "num.json"
    num.write_text("[1, 2]")
    with pytest.raises(VectorFormatError, match="list of model objects"):
        load_vectors(num)
    with pytest.raises(VectorFormatError, match="no such file or folder"):
        find_vector_files([tmp_path / "nowhere"])


def test_model_to_json_rejects_shared_pools():
    from dataclasses import replace

    from nnhal.types import SharedMemory

    mb = ModelBuilder()
    mb.main.constant(F32, [1.0], reference=True)
    model = replace(mb.build(), pools=(SharedMemory("x", 4),))
    with pytest.raises(ValueError, match="only inline pools"):
        model_to_json(model)


# ---- tolerance table --------------------------------------------------------


def _model(relaxed=False, fp16_in_referenced=False):
    mb = ModelBuilder(relaxed=relaxed)
    mb.main.input(F32, [1])
    if fp16_in_referenced:
        mb.subgraph().input(F16, [1])
    return mb.build()


FP32_RTOL = 5 * 2.0**-23
FP16_TOL = 5 * 2.0**-10

# (type, model kwargs, name, expected, passing actual, failing actual)
TOLERANCE_ROWS = [
    (
        "TENSOR_FLOAT32",
        {},
        "",
        100.0,
        100.0 + 1e-5 + 99.9 * FP32_RTOL,
        100.0 + 2e-5 + 100 * FP32_RTOL,
    ),
    ("TENSOR_FLOAT32", {"relaxed": True}, "", 1.0, 1.0 + 1.9 * FP16_TOL, 1.0 + 2.1 * FP16_TOL),
    (
        "TENSOR_FLOAT32",
        {"fp16_in_referenced": True},
        "",
        -1.0,
        -1.0 - 1.9 * FP16_TOL,
        -1.0 - 2.1 * FP16_TOL,
    ),
    ("TENSOR_FLOAT16", {}, "", 2.0, 2.0 + 2.9 * FP16_TOL, 2.0 + 3.1 * FP16_TOL),
    ("TENSOR_INT32", {}, "", 10, 11, 12),
    ("INT32", {}, "", 10, 9, 8),
    ("TENSOR_QUANT16_ASYMM", {}, "", 100, 101, 102),
    ("TENSOR_QUANT16_SYMM", {}, "", -100, -101, -102),
    ("TENSOR_QUANT8_ASYMM", {}, "", 100, 101, 102),
    ("TENSOR_QUANT8_ASYMM_SIGNED", {}, "", -5, -4, -3),
    ("TENSOR_QUANT8_SYMM", {}, "", 5, 4, 3),
    ("TENSOR_QUANT8_ASYMM", {}, "mobilenet_quantized/base", 100, 103, 104),
    ("TENSOR_BOOL8", {}, "", True, True, False),
]


@pytest.mark.parametrize("type_name, model_kw, name, exp, good, bad", TOLERANCE_ROWS)
def test_tolerance_rows(type_name, model_kw, name, exp, good, bad):
    code = OperandType[type_name]
    from nnhal.types import OPERAND_TYPE_INFO

    dtype = OPERAND_TYPE_INFO[code].dtype
    model = _model(**model_kw)
    shape = () if OPERAND_TYPE_INFO[code].is_scalar else (1, 3)
    e = np.full(shape, exp).astype(dtype)
    ok, worst, msg = compare(e, np.full(shape, good).astype(dtype), code, model, name=name)
    assert ok, msg
    ok, worst, msg = compare(e, np.full(shape, bad).astype(dtype), code, model, name=name)
    assert not ok and worst > 0
    assert "outside" in msg and type_name in msg


def test_fp32_tolerance_is_computed_in_double():
    # float32(1e-5) is just below 1e-5 and float32(1.0001e-5) just above: only a
    # float64 difference tells them apart against atol 1e-5 at expected 0
    e = np.array([0.0], np.float32)
    assert compare(e, np.array([1e-5], np.float32), F32, _model())[0]
    assert not compare(e, np.array([1.0001e-5], np.float32), F32, _model())[0]
    assert tolerance(F32, _model()) == (1e-5, FP32_RTOL)
    assert tolerance(F32, _model(relaxed=True)) == (FP16_TOL, FP16_TOL)
    assert tolerance(OperandType.TENSOR_BOOL8, _model()) is None


@pytest.mark.parametrize(
    "exp, act",
    [
        (np.nan, np.nan),
        (np.inf, np.inf),
        (1.0, np.nan),
        (1.0, -np.inf),
        (np.nan, 1.0),
    ],
)
def test_nan_and_inf_never_pass(exp, act):
    for code, dtype in ((F32, np.float32), (F16, np.float16)):
        ok, worst, _ = compare(np.array([exp], dtype), np.array([act], dtype), code, _model())
        assert not ok and math.isinf(worst)


def test_shape_mismatch_fails_and_worst_element_is_reported():
    e = np.zeros((2, 2), np.float32)
    ok, worst, msg = compare(e, np.zeros((4,), np.float32), F32, _model())
    assert not ok and "shape" in msg
    a = e.copy()
    a[1, 0] = 0.5
    a[0, 1] = 0.25
    ok, worst, msg = compare(e, a, F32, _model(), output_index=2)
    assert not ok and worst == 0.5
    assert "output 2" in msg and "worst at [1, 0]" in msg and "2 of 4" in msg


def test_compare_takes_a_test_model_for_the_name():
    t = parse_test_model(_add_vector("mobilenet_v1/quant8"))
    e = np.array([10], np.uint8)
    assert compare(e, np.array([13], np.uint8), OperandType.TENSOR_QUANT8_ASYMM, t)[0]
    assert not compare(e, np.array([14], np.uint8), OperandType.TENSOR_QUANT8_ASYMM, t)[0]


def test_multinomial_check():
    logits = np.log(np.array([[0.25, 0.75]]))
    good = np.array([[0, 1, 1, 1] * 25])
    ok, worst, _ = check_multinomial(logits, good, 0.05)
    assert ok and worst < 1e-9
    bad = np.array([[0, 0, 1, 1] * 25])
    ok, worst, msg = check_multinomial(logits, bad, 0.05)
    assert not ok and worst == pytest.approx(0.25) and "outside" in msg
    assert not check_multinomial(logits, np.array([[5, 1]]), 0.05)[0]
    assert not check_multinomial(logits, np.array([1, 0]), 0.05)[0]


# ---- the CI run of the shared vectors ----------------------------------------

#: The foundation's operations: the 720 shared models using only these.
FOUNDATION_OPERATIONS = (
    "ADD,SUB,MUL,DIV,LESS,LESS_EQUAL,GREATER,GREATER_EQUAL,EQUAL,NOT_EQUAL,LOGICAL_AND,"
    "LOGICAL_OR,LOGICAL_NOT,SELECT,CAST,FULLY_CONNECTED,RESHAPE,CONCATENATION,SLICE,IF,WHILE"
)
FOUNDATION_COUNT = 720


def implemented_operations() -> str:
    """Every registered operation plus IF and WHILE: what CI requires to pass."""
    from nnhal.driver.ops.registry import registered

    names = {OperationType(op).name for op in registered()} | {"IF", "WHILE"}
    return ",".join(sorted(names))


def shared_vectors() -> Path:
    env = os.environ.get("NNHAL_VECTORS")
    return Path(env) if env else REPO.parent / "shared" / "nnapi-vectors"


@pytest.fixture(scope="module")
def vectors_dir() -> Path:
    path = shared_vectors()
    if not path.is_dir():
        pytest.skip(f"shared NNAPI vectors not found at {path} (set NNHAL_VECTORS)")
    return path


def _selected(vectors_dir: Path, operations: str) -> list:
    allowed = set(operations.split(","))
    return [
        t
        for f in find_vector_files([vectors_dir])
        for t in load_vectors(f)
        if operations_used(t.model) <= allowed
    ]


def test_foundation_selection_has_720_models(vectors_dir):
    assert len(_selected(vectors_dir, FOUNDATION_OPERATIONS)) == FOUNDATION_COUNT


@pytest.fixture(scope="module")
def ci_selection(vectors_dir) -> tuple[str, int]:
    """The operations CI runs (all implemented) and how many shared models use only those."""
    operations = implemented_operations()
    count = len(_selected(vectors_dir, operations))
    assert count >= FOUNDATION_COUNT
    return operations, count


def _run_vectors_command(
    capsys, vectors_dir: Path, tmp_path: Path, selection: tuple[str, int], *extra: str
) -> list[dict]:
    from nnhal.tools.cli import main

    report = tmp_path / "report.json"
    code = main(
        [
            "vectors",
            str(vectors_dir),
            "--operations",
            selection[0],
            "--json-report",
            str(report),
            "--no-progress",
            *extra,
        ]
    )
    out, err = capsys.readouterr()
    assert report.exists(), f"nnhal vectors exited {code} without a report: {err}"
    results = json.loads(report.read_text())["results"]
    failures = [
        f"{r['name']}: {r['result']}: {r['error']}" for r in results if r["result"] != "passed"
    ]
    assert not failures, "\n".join(failures[:20])
    assert out.strip().splitlines()[-1] == f"{selection[1]} passed, 0 failed, 0 skipped"
    assert code == 0, err
    return results


@pytest.mark.slow
def test_ci_vectors_in_process(vectors_dir, ci_selection, tmp_path, capsys, monkeypatch):
    """`nnhal vectors` with the in-process driver (still through gRPC): every shared
    model whose operations are all implemented must pass, none may be skipped.

    With the default executor, as users run it: each model's one execution is
    interpreted (``driver/executor/interpreter.py``)."""
    monkeypatch.setenv("NNHAL_EXECUTOR", "tiered")
    results = _run_vectors_command(capsys, vectors_dir, tmp_path, ci_selection)
    assert len(results) == ci_selection[1]


@pytest.mark.slow
def test_ci_vectors_against_nnhal_serve(vectors_dir, ci_selection, tmp_path, capsys):
    """The same selection again, against a separately started `nnhal serve` (--target),
    every model's code generated at preparation (the executor the other run leaves out)."""
    # The server's log goes to a file: a pipe nobody reads would fill up and
    # block the server's threads in the middle of the run.
    log_path = tmp_path / "serve.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            # -X faulthandler: a server that does not stop is aborted below, and
            # then prints where each of its threads waits into the log
            [
                *(sys.executable, "-X", "faulthandler", "-m", "nnhal.tools.cli", "serve"),
                *("--address", "127.0.0.1:0", "--log-level", "info"),
            ],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            env={**os.environ, "NNHAL_EXECUTOR": "generated"},
        )
    try:
        line = proc.stdout.readline().strip()
        assert line.startswith("nnhal: serving device"), line + log_path.read_text()
        address = line.rsplit(" on ", 1)[1]
        results = _run_vectors_command(
            capsys, vectors_dir, tmp_path, ci_selection, "--target", address
        )
        assert len(results) == ci_selection[1]
        assert proc.poll() is None, log_path.read_text()  # the server is still serving
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)
            try:
                proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 0, log_path.read_text()[-20000:]
