"""``nnhal import MODEL.tflite`` and ``nnhal tflite MODEL.tflite`` end to end (in-process device)."""

from __future__ import annotations

import json

import numpy as np
from nnhal.tools.cli import main
from tflite_cases import DATA, assert_matches, model_path, reference

from nnhal.vectors import load_vectors


def test_import_writes_a_model_file_that_runs(tmp_path, capsys):
    out = tmp_path / "cnn_int8.json"
    rc = main(
        [
            "import",
            str(model_path("cnn_int8")),
            "-o",
            str(out),
            "--tflite-reference",
            str(DATA / "cnn_int8.npz"),
        ]
    )
    assert rc == 0, capsys.readouterr().err
    (test,) = load_vectors(out)
    from nnhal.driver.executor import compile_model

    got = compile_model(test.model).run(test.inputs)
    _, want = reference("cnn_int8")
    assert_matches(got[0], want[0], "cnn_int8 from the written file")
    assert np.array_equal(test.expected[0].reshape(want[0].shape), want[0])


def test_import_json_report_lists_partitions_and_reasons(capsys):
    assert main(["import", str(model_path("lstm_while")), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["operators"] == 4 and doc["delegated"] == 3
    assert [p["nodes"] for p in doc["partitions"]] == [[0], [2, 3]]
    assert doc["not_delegated"][0]["op"] == "WHILE"


def test_tflite_command_runs_on_the_device(capsys):
    rc = main(
        [
            "tflite",
            str(model_path("cnn_uint8")),
            "--inputs",
            str(DATA / "cnn_uint8.npz"),
            "--repeat",
            "1",
            "--json",
        ]
    )
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    doc = json.loads(captured.out)
    assert doc["delegated"] == doc["operators"] == 7
    if "outputs" in doc:  # LiteRT installed
        assert doc["outputs"][0]["max_steps"] <= 1


def test_tflite_command_partial_delegation_runs_cpu_nodes_in_litert(capsys):
    rc = main(
        [
            "tflite",
            str(model_path("lstm_while")),
            "--inputs",
            str(DATA / "lstm_while.npz"),
            "--repeat",
            "1",
            "--json",
        ]
    )
    captured = capsys.readouterr()
    try:
        import ai_edge_litert.interpreter  # noqa: F401
    except ImportError:  # without LiteRT the CPU node cannot run: one line, exit 1
        assert rc == 1 and "GATHER" in captured.err and "nnhal[tflite]" in captured.err
        assert len(captured.err.strip().splitlines()) == 1
        return
    assert rc == 0, captured.err
    doc = json.loads(captured.out)
    assert [e["kind"] for e in doc["plan"]] == ["nnapi", "litert", "nnapi"]
    assert doc["operators_per_device"] == {"nnapi-reference": 3, "LiteRT CPU": 1}
    assert doc["outputs"][0]["max_rel"] <= 1e-4


def test_tflite_command_unrunnable_cpu_node_is_one_line(capsys):
    rc = main(["tflite", str(model_path("custom_op")), "--repeat", "1"])
    err = capsys.readouterr().err
    assert rc == 1 and len(err.strip().splitlines()) == 1 and "SoftClip" in err
    assert "Traceback" not in err


def test_tflite_command_with_custom_op_and_op_package(capsys):
    from repo_paths import REPO_ROOT

    rc = main(
        [
            "tflite",
            str(model_path("custom_op")),
            "--inputs",
            str(DATA / "custom_op.npz"),
            "--custom-op",
            "SoftClip=com.example.soft_clip_package:0",
            "--op-package",
            str(REPO_ROOT / "examples" / "qnn_xml" / "soft_clip.xml"),
            "--repeat",
            "1",
            "--json",
        ]
    )
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    doc = json.loads(captured.out)
    assert doc["delegated"] == 2
    # LiteRT has no SoftClip kernel: reported, not compared
    assert "outputs" not in doc


def test_tflite_command_bad_custom_op_is_usage_error(capsys):
    rc = main(["tflite", str(model_path("custom_op")), "--custom-op", "SoftClip"])
    assert rc == 2 and "NAME=EXTENSION:OPERATION" in capsys.readouterr().err


def test_bench_model_tflite(tmp_path, capsys):
    out = tmp_path / "bench.json"
    rc = main(
        [
            "bench",
            "--model",
            str(model_path("while_loop")),
            "--rounds",
            "1",
            "--warmup",
            "0",
            "--json",
            str(out),
        ]
    )
    assert rc == 0, capsys.readouterr().err
    doc = json.loads(out.read_text())
    assert {"in-process", "grpc"} <= set(doc["ms"])
    assert all(v > 0 for v in doc["ms"].values())
