"""Op packages end to end through the command line: generate, install, serve, run, list."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from repo_paths import REPO_ROOT

ROOT = REPO_ROOT
EXAMPLES = ROOT / "examples"
sys.path.insert(0, str(EXAMPLES))
import while_models as wm

pytestmark = pytest.mark.slow  # `nnhal` subprocesses and pip installs

sys.path.remove(str(EXAMPLES))


def _nnhal(
    *args: str, env: dict | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "nnhal.tools.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )


class Server:
    """`nnhal serve` in a subprocess (stopped by its own pid)."""

    def __init__(self, *args: str, env: dict | None = None) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "nnhal.tools.cli", "serve", "--address", "127.0.0.1:0", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        line = self.proc.stdout.readline()
        assert "serving device" in line, self.stop()
        self.address = line.split()[-1]

    def stop(self) -> str:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            _, err = self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        return err


def _check_run(output: str, name: str) -> None:
    doc = json.loads(output)
    assert doc["status"] == "NONE", doc
    x, i = wm.expected(name)
    np.testing.assert_allclose(np.array(doc["outputs"][0], np.float32), x, rtol=1e-6)
    assert doc["outputs"][1] == i.tolist()


def test_serve_configs_and_run_while_models(tmp_path: Path) -> None:
    """Every example config served at once (plus a broken one, skipped); each WHILE model runs."""
    bad = ROOT / "tests" / "data" / "op_packages" / "invalid" / "no_output.ini"
    args = []
    for name, (config, _, _) in wm.EXAMPLES.items():
        args += ["--op-package", str(EXAMPLES / name / config)]
    server = Server(*args, "--op-package", str(bad))
    try:
        for name in wm.EXAMPLES:
            proc = _nnhal("run", str(EXAMPLES / name / "model.json"), "--target", server.address,
                          "--loop-timeout-ms", "15000")  # fmt: skip
            assert proc.returncode == 0, proc.stderr
            _check_run(proc.stdout, name)
    finally:
        err = server.stop()
    assert f"op package {bad} skipped: {bad}:1: " in err
    assert "op package com.example.soft_clip_package from" in err


def test_generate_install_serve_from_entry_point(tmp_path: Path) -> None:
    """generate -> fill in the kernel -> pip install -> the entry point is found by serve."""
    name = "snpe_json"
    out = tmp_path / "gen"
    proc = _nnhal("oppkg", "generate", str(EXAMPLES / name / "scale_shift.json"), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    kernel = out / "scale_shift_package" / "kernels" / "scale_shift.py"
    assert "NotImplementedError" in kernel.read_text()
    shutil.copy(EXAMPLES / name / "kernels" / "scale_shift.py", kernel)  # "the user fills it in"
    site = tmp_path / "site"
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-index", "--target", str(site), str(out)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    if pip.returncode != 0:
        pytest.skip(f"pip cannot build the generated package here: {pip.stderr.strip()[-300:]}")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    listed = _nnhal("oppkg", "list", env=env)
    assert listed.returncode == 0
    assert "udo.scale_shift_package" in listed.stdout
    assert "entry point udo.scale_shift_package = scale_shift_package:nnhal_op_package" in (
        listed.stdout
    )
    server = Server(env=env)
    try:
        proc = _nnhal("run", str(EXAMPLES / name / "model.json"), "--target", server.address,
                          "--loop-timeout-ms", "15000")  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        _check_run(proc.stdout, name)
    finally:
        server.stop()


def test_generated_directory_serves_with_edited_kernel(tmp_path: Path) -> None:
    """--op-package DIR of a generated package; regenerating keeps the filled-in kernel."""
    name = "ascend_ini"
    config = str(EXAMPLES / name / "square_add.ini")
    out = tmp_path / "gen"
    assert _nnhal("oppkg", "generate", config, "--out", str(out)).returncode == 0
    kernel = out / "square_add" / "kernels" / "square_add.py"
    shutil.copy(EXAMPLES / name / "kernels" / "square_add.py", kernel)
    again = _nnhal("oppkg", "generate", config, "--out", str(out))
    assert f"kept {kernel}" in again.stdout
    assert kernel.read_text() == (EXAMPLES / name / "kernels" / "square_add.py").read_text()
    listed = _nnhal("oppkg", "list", "--no-entry-points", "--op-package", str(out))
    assert f"ascend.square_add  (ini SquareAdd 1.0)  from {out / 'square_add'}" in listed.stdout
    server = Server("--op-package", str(out))
    try:
        proc = _nnhal("run", str(EXAMPLES / name / "model.json"), "--target", server.address,
                          "--loop-timeout-ms", "15000")  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        _check_run(proc.stdout, name)
    finally:
        server.stop()


def test_explain_cli() -> None:
    proc = _nnhal(
        "explain", str(EXAMPLES / "qnn_xml" / "model.json"),
        "--op-package", str(EXAMPLES / "qnn_xml" / "soft_clip.xml"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "rewrites at prepare:" in proc.stdout
    assert "operation 0 AddSoftClip (com.example.soft_clip_package): op-package" in proc.stdout


def test_package_backend_per_profile() -> None:
    from nnhal.tools.cli import build_parser
    from nnhal.tools.cli_oppkg import device_options, package_backend

    assert package_backend(None) is None
    assert package_backend(["HTP"], "any") == "HTP"
    values = ["CPU", "npu.toml=HTP"]
    assert package_backend(values, "npu.toml") == "HTP"
    assert package_backend(values, "default") == "CPU"
    args = build_parser().parse_args(
        ["serve", "--profile", "default", "--profile", "example-npu",
         "--package-backend", "example-npu=HTP",
         "--op-package", str(EXAMPLES / "qnn_xml" / "soft_clip.xml")]
    )  # fmt: skip
    from nnhal.driver.device import Device

    devices = {p: Device(**device_options(args, p)) for p in args.profile}
    assert {p: d.extensions.backend for p, d in devices.items()} == {
        "default": "CPU",
        "example-npu": "HTP",
    }
    model = wm.model("qnn_xml")
    assert devices["default"].getSupportedOperations_1_3(model) == [True]
    assert devices["example-npu"].getSupportedOperations_1_3(model) == [False]
