"""`nnhal plan`, `nnhal run --runtime`, `nnhal vectors --runtime` (in process, main())."""

from __future__ import annotations

import json

import pytest
from nnhal.tools.cli import main
from runtime_helpers import served
from test_runtime_partition import chain_model, profile

from nnhal.vectors import model_to_json, save_vectors


@pytest.fixture()
def model_file(tmp_path):
    import numpy as np

    doc = model_to_json(
        chain_model(),
        name="chain/base",
        inputs=[np.array([1, 2, 3], np.float32), np.array([4, 5, 6], np.float32)],
        expected=[np.array([16, 30, 48], np.float32)],
    )
    path = tmp_path / "chain.json"
    save_vectors(path, [doc])
    return str(path)


def test_plan_run_and_vectors(model_file, capsys):
    with served(profile("npu", exclude=["MUL"])) as (address, _):
        target = f"{address}/npu"
        assert main(["plan", model_file, "--target", target, "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["devices"] == ["npu", "nnapi-reference"]
        assert [o["device"] for o in doc["operations"]] == ["npu", "nnapi-reference", "npu"]
        assert "excluded" in doc["operations"][1]["unsupported"]["npu"]
        assert main(["plan", model_file, "--target", target]) == 0
        assert "MUL" in capsys.readouterr().out

        assert main(["run", model_file, "--runtime", "--target", target]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["outputs"] == [[16.0, 30.0, 48.0]]
        assert [s["device"] for s in doc["report"]["steps"]] == ["npu", "nnapi-reference", "npu"]

        assert main(["vectors", model_file, "--runtime", "--target", target, "--no-progress"]) == 0
        out = capsys.readouterr().out
        assert "1 passed, 0 failed" in out and "1 spanning several devices" in out


def test_preference_option_chooses_the_figure_compared(model_file, capsys):
    # the npu is faster than the CPU (0.5 vs 1.0) but hungrier (2.0 vs 1.0)
    with served(profile("npu", exec_time=0.5, power=2.0)) as (address, _):
        target = f"{address}/npu"
        devices = {}
        for preference in ("FAST_SINGLE_ANSWER", "LOW_POWER"):
            args = ["plan", model_file, "--target", target, "--preference", preference, "--json"]
            assert main(args) == 0
            doc = json.loads(capsys.readouterr().out)
            devices[preference] = [o["device"] for o in doc["operations"]]
        args = ["run", model_file, "--runtime", "--target", target, "--preference", "LOW_POWER"]
        assert main(args) == 0
        doc = json.loads(capsys.readouterr().out)
    assert devices == {"FAST_SINGLE_ANSWER": ["npu"] * 3, "LOW_POWER": ["nnapi-reference"] * 3}
    assert doc["outputs"] == [[16.0, 30.0, 48.0]]
    assert [s["device"] for s in doc["report"]["steps"]] == ["nnapi-reference"]


def test_plan_bad_target(model_file, capsys):
    assert main(["plan", model_file, "--target", "127.0.0.1:1", "--connect-timeout", "0.5"]) != 0
    assert "error" in capsys.readouterr().err


def test_device_option_names_the_targets_device(model_file, capsys):
    with served(profile("other"), profile("npu", exclude=["MUL"])) as (address, _):
        args = ["run", model_file, "--runtime", "--target", address, "--device", "npu"]
        assert main(args) == 0
        doc = json.loads(capsys.readouterr().out)
        assert [s["device"] for s in doc["report"]["steps"]] == ["npu", "nnapi-reference", "npu"]


def test_bench_runtime_with_targets_and_a_model_file(model_file, tmp_path, capsys):
    report = tmp_path / "bench.json"
    with served(profile("npu"), profile("half", exclude=["MUL"])) as (address, _):
        args = ["bench", "--runtime", "--rounds", "1", "--model", model_file, "--json", str(report)]
        # the whole model on npu: a simple plan, compared with npu executed directly
        assert main([*args, "--target", f"{address}/npu"]) == 0
        out = capsys.readouterr().out
        assert "chain/base" in out and "simple plan on npu" in out and "over gRPC, npu" in out
        rows = json.loads(report.read_text())["runtime"]
        assert rows[0]["devices"] == ["npu", "nnapi-reference"] and rows[0]["ratio"] > 0
        # spanning half and the CPU: compared with the whole model on nnapi-reference
        assert main([*args, "--target", f"{address}/half"]) == 0
        out = capsys.readouterr().out
        assert "3 steps on half, nnapi-reference" in out and "in-process, nnapi-reference" in out
        assert "direct reusing its request layout" in out


def test_bench_runtime_usage_errors(model_file, capsys):
    # usage errors found after parsing: exit 2, one line (docs/commands.md, exit status)
    assert main(["bench", "--target", "127.0.0.1:1"]) == 2
    assert "--target goes with --runtime" in capsys.readouterr().err
    assert main(["bench", "--runtime", "--rounds", "0"]) == 2
    capsys.readouterr()
    assert main(["bench", "--runtime", "--profile", "example-npu"]) == 2
    assert "give served devices with --target" in capsys.readouterr().err
    # a model the file does not hold: a data error, as `nnhal run --name` says it
    assert main(["bench", "--runtime", "--model", model_file, "--name", "nope"]) == 1
    assert "no test model named nope" in capsys.readouterr().err
    args = ["bench", "--runtime", "--target", "127.0.0.1:1", "--rounds", "1", "--model", model_file]
    assert main(args) == 1
    assert "DEVICE_UNAVAILABLE" in capsys.readouterr().err


def test_bench_runtime_without_targets_measures_in_process_and_over_grpc(capsys):
    from nnhal.tools.bench_runtime import main as bench_main

    assert bench_main(["--rounds", "1", "--iters", "2", "--size", "4"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("threads: 1 (")  # the default setting, stated with the figures
    assert "2 calls of each" in lines[1]
    assert "simple plan on nnapi-reference" in lines[2] and "in-process" in lines[2]
    assert "direct reusing its request layout" in lines[3]
    assert "simple plan on bench-npu" in lines[4] and "over gRPC, bench-npu" in lines[4]


def test_run_and_vectors_report_a_compilation_fallback(model_file, capsys):
    from nnhal.control import Control

    with served(profile("npu")) as (address, _), Control(address) as control:
        control.set_faults(
            [{"method": "prepareModel_1_3", "status": "GENERAL_FAILURE", "when": "always"}],
            device="npu",
        )
        target = f"{address}/npu"
        assert main(["run", model_file, "--runtime", "--target", target]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["outputs"] == [[16.0, 30.0, 48.0]]
        assert doc["report"]["compilation_fallback"]["status"] == "GENERAL_FAILURE"
        assert [s["device"] for s in doc["report"]["steps"]] == ["nnapi-reference"]
        assert main(["vectors", model_file, "--runtime", "--target", target, "--no-progress"]) == 0
        out = capsys.readouterr().out
        assert "1 passed, 0 failed" in out and "1 with a CPU fallback" in out
