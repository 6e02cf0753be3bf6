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


def test_plan_bad_target(model_file, capsys):
    assert main(["plan", model_file, "--target", "127.0.0.1:1", "--connect-timeout", "0.5"]) != 0
    assert "error" in capsys.readouterr().err


def test_device_option_names_the_targets_device(model_file, capsys):
    with served(profile("other"), profile("npu", exclude=["MUL"])) as (address, _):
        args = ["run", model_file, "--runtime", "--target", address, "--device", "npu"]
        assert main(args) == 0
        doc = json.loads(capsys.readouterr().out)
        assert [s["device"] for s in doc["report"]["steps"]] == ["npu", "nnapi-reference", "npu"]
