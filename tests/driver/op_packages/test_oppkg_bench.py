"""`nnhal bench` loads op packages (--op-package, installed ones) as `nnhal serve` does."""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path

import numpy as np
from nnhal.driver.op_packages import discovery
from nnhal.tools.cli import main
from repo_paths import REPO_ROOT
from test_oppkg_holes import WIDE_X, WIDE_Y, _widen_model, _two_op_package

EXAMPLES = REPO_ROOT / "examples"
QUICK = ["--rounds", "1", "--warmup", "0", "--no-peers", "--no-progress"]


def _bench(tmp_path: Path, *args: str) -> tuple[int, dict | None]:
    report = tmp_path / f"bench{len(list(tmp_path.glob('bench*.json')))}.json"
    assert not report.exists()
    code = main(["bench", *args, *QUICK, "--json", str(report)])
    return code, json.loads(report.read_text()) if report.exists() else None


def _agreed(doc: dict, modes: list[str]) -> None:
    (workload,) = doc["workloads"]
    assert workload["errors"] == [] and doc["ok"]
    assert sorted(c["way"] for c in workload["cases"]) == sorted(modes)
    assert all(c["agree"] and c["problem"] is None for c in workload["cases"])


def test_bench_takes_op_package(tmp_path: Path, capsys) -> None:
    model = str(EXAMPLES / "snpe_json" / "model.json")
    config = str(EXAMPLES / "snpe_json" / "scale_shift.json")
    modes = ["executor", "generic", "prepared", "grpc", "burst"]
    code, doc = _bench(tmp_path, "--model", model, "--op-package", config,
                       *[a for m in modes for a in ("--mode", m)])  # fmt: skip
    assert code == 0
    assert doc is not None
    _agreed(doc, modes)  # every mode ran the package's kernel and matched the stored outputs
    profiled = [o["operation"] for o in doc["workloads"][0]["profile"]["operations"]]
    assert "ScaleShiftPackage.ScaleShift (subgraph 2, operation 0)" in profiled
    assert "nnhal: op package udo.scale_shift_package from" in capsys.readouterr().err
    # without the package the device does not know the model's extension
    code, doc = _bench(tmp_path, "--model", model, "--mode", "executor")
    assert code == 1 and doc is None
    assert "this device supports no vendor extensions" in capsys.readouterr().err


def test_bench_loads_installed_packages(tmp_path: Path, monkeypatch, capsys) -> None:
    """An installed package (entry point) is loaded with no option, as by `nnhal serve`."""
    (tmp_path / "nnhal_bench_ep_pkg.py").write_text(
        "from nnhal.driver.op_packages.discovery import load_path\n\n\n"
        "def nnhal_op_package():\n"
        f"    return load_path({str(EXAMPLES / 'snpe_json' / 'scale_shift.json')!r})\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    entry = metadata.EntryPoint(
        "udo.scale_shift_package", "nnhal_bench_ep_pkg:nnhal_op_package", discovery.ENTRY_POINT_GROUP
    )
    real = discovery._entry_points
    monkeypatch.setattr(
        discovery,
        "_entry_points",
        lambda group: [entry] if group == discovery.ENTRY_POINT_GROUP else real(group),
    )
    model = str(EXAMPLES / "snpe_json" / "model.json")
    code, doc = _bench(tmp_path, "--model", model, "--mode", "executor", "--mode", "grpc")
    assert code == 0 and doc is not None
    _agreed(doc, ["executor", "grpc"])
    assert "from entry point udo.scale_shift_package" in capsys.readouterr().err


def test_bench_extension_typed_outputs_and_package_backend(tmp_path: Path) -> None:
    """A model with an INT_64 (extension operand type) output, every mode, on the package's
    HTP backend (--package-backend); on its CPU backend the HTP-only operation is missing."""
    from nnhal.vectors import TestModel, save_vectors

    _two_op_package(tmp_path)
    path = tmp_path / "wide.json"
    save_vectors(path, [TestModel(name="wide", model=_widen_model(), inputs=[WIDE_X],
                                  expected=[WIDE_Y], expected_shapes=[(3,)],
                                  output_types=[5 << 16], ignored=[False])])  # fmt: skip
    modes = ["executor", "generic", "prepared", "grpc", "grpc-shm", "burst"]
    code, doc = _bench(tmp_path, "--model", str(path), "--op-package", str(tmp_path / "i64.xml"),
                       "--package-backend", "HTP", "--no-profile",
                       *[a for m in modes for a in ("--mode", m)])  # fmt: skip
    assert code == 0 and doc is not None
    _agreed(doc, modes)
    assert np.iinfo(np.int32).max < int(WIDE_Y.max())  # the output needs its int64 dtype


def test_bench_bad_profile_is_reported_before_packages_load(tmp_path: Path, capsys) -> None:
    code = main(["bench", "--model", str(EXAMPLES / "snpe_json" / "model.json"),
                 "--profile", str(tmp_path / "missing.toml"), *QUICK])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert "missing.toml" in err and "nnhal: op package" not in err
