"""The ``nnhal`` command: serve (as a subprocess), supported, run, vectors, bench,
and bad inputs (a clear one-line message, a non-zero exit, never a traceback).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import numpy as np
import pytest
from nnhal.tools.cli import main
from repo_paths import REPO_ROOT

from nnhal.builder import ModelBuilder
from nnhal.types import OperandType, OperationType
from nnhal.vectors import model_to_json, save_vectors

F32 = OperandType.TENSOR_FLOAT32
I32 = OperandType.TENSOR_INT32
BOOL8 = OperandType.TENSOR_BOOL8
REPO = REPO_ROOT


# ---- helpers -----------------------------------------------------------------


def start_serve(*extra: str) -> tuple[subprocess.Popen, str]:
    """``nnhal serve --address 127.0.0.1:0`` in a subprocess; returns it and its address."""
    # stderr goes to an unnamed temporary file: a pipe read only at the end could
    # fill up and block the server while a test is still talking to it.
    log = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115  (lives as long as the server)
    proc = subprocess.Popen(
        [sys.executable, "-m", "nnhal.tools.cli", "serve", "--address", "127.0.0.1:0", *extra],
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    proc.log = log  # type: ignore[attr-defined]
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(60)
    if not line or not line[0]:
        proc.kill()
        proc.communicate(timeout=10)
        err = _stderr(proc)
        proc.log.close()
        raise AssertionError(f"nnhal serve printed no address; stderr:\n{err}")
    text = line[0].strip()
    assert text.startswith("nnhal: serving device "), text
    return proc, text.rsplit(" on ", 1)[1]


def _stderr(proc: subprocess.Popen) -> str:
    """What the server wrote to its stderr file so far."""
    proc.log.seek(0)
    return proc.log.read()


def stop_serve(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> tuple[int, str]:
    proc.send_signal(sig)
    try:
        proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise AssertionError("nnhal serve did not stop on the signal") from None
    err = _stderr(proc)
    proc.log.close()
    return proc.returncode, err


def add_model():
    """y = a + b for [2] float32 tensors; inputs stored in the file."""
    mb = ModelBuilder()
    g = mb.main
    a, b = g.input(F32, [2]), g.input(F32, [2])
    y = g.output(F32, [2])
    g.operation(OperationType.ADD, [a, b, g.constant(OperandType.INT32, 0)], [y])
    return mb.build()


def counter_loop_model():
    """WHILE i < n: i = i + 1 -- with n an input (huge n never ends in practice)."""
    mb = ModelBuilder()
    cond, body = mb.subgraph(), mb.subgraph()
    ci, cn = cond.input(I32, [1]), cond.input(I32, [1])
    co = cond.output(BOOL8, [1])
    cond.operation(OperationType.LESS, [ci, cn], [co])
    bi, _bn = body.input(I32, [1]), body.input(I32, [1])
    bo = body.output(I32, [1])
    body.operation(
        OperationType.ADD, [bi, body.constant(I32, [1]), body.constant(OperandType.INT32, 0)], [bo]
    )
    g = mb.main
    n = g.input(I32, [1])
    out = g.output(I32, [1])
    g.operation(
        OperationType.WHILE,
        [g.subgraph_ref(cond), g.subgraph_ref(body), g.constant(I32, [0]), n],
        [out],
    )
    return mb.build()


def write_model(path: Path, model, **kw) -> Path:
    path.write_text(json.dumps(model_to_json(model, **kw)))
    return path


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


@pytest.fixture
def add_file(tmp_path):
    a = np.array([1.5, -2.0], np.float32)
    b = np.array([0.25, 4.0], np.float32)
    return write_model(tmp_path / "add.json", add_model(), name="add/mine", inputs=[a, b]), a, b


@pytest.fixture
def no_add_profile(tmp_path):
    p = tmp_path / "noadd.toml"
    p.write_text('name = "noadd"\nexclude_operations = ["ADD"]\n')
    return p


# ---- serve ---------------------------------------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serve_prints_address_serves_and_stops_on_signal(sig, add_file, capsys):
    proc, address = start_serve()
    try:
        host, port = address.rsplit(":", 1)
        assert host == "127.0.0.1" and int(port) > 0
        path, a, b = add_file
        code, out, _ = run_cli(capsys, "run", str(path), "--target", address)
        assert code == 0
        assert json.loads(out)["outputs"] == [(a + b).tolist()]
    finally:
        rc, err = stop_serve(proc, sig)
    assert rc == 0, err
    assert "Traceback" not in err


def test_serve_with_profile_names_the_device(no_add_profile):
    proc, _ = start_serve("--profile", str(no_add_profile))
    rc, err = stop_serve(proc)
    assert rc == 0, err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "args, message",
    [
        (["--profile", "no-such-profile"], "no-such-profile"),
        (["--address", "localhost"], "bad address"),
        (["--address", "127.0.0.1:99999"], "bad address"),
    ],
)
def test_serve_bad_arguments(args, message):
    proc = subprocess.run(
        [sys.executable, "-m", "nnhal.tools.cli", "serve", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""


# ---- supported -----------------------------------------------------------------


def test_supported_all(add_file, capsys):
    code, out, _ = run_cli(capsys, "supported", str(add_file[0]))
    assert code == 0
    assert json.loads(out) == {"supported": [True], "reasons": {}}


def test_supported_with_excluding_profile_gives_reasons(tmp_path, no_add_profile, capsys):
    path = write_model(tmp_path / "loop.json", counter_loop_model())
    code, out, _ = run_cli(capsys, "supported", str(path), "--profile", str(no_add_profile))
    assert code == 0
    doc = json.loads(out)
    assert doc["supported"] == [False]
    assert "ADD" in doc["reasons"]["0"]


# ---- run -----------------------------------------------------------------------


def test_run_uses_stored_inputs(add_file, capsys):
    path, a, b = add_file
    code, out, _ = run_cli(capsys, "run", str(path))
    assert code == 0
    doc = json.loads(out)
    assert doc["status"] == "NONE"
    assert doc["outputs"] == [(a + b).tolist()]
    assert doc["outputShapes"] == [{"dimensions": [2], "isSufficient": True}]
    timing = doc["timing"]
    assert timing["timeOnDevice"] <= timing["timeInDriver"]


def test_run_with_npz_inputs(add_file, tmp_path, capsys):
    path = add_file[0]
    a = np.array([10, 20], np.float32)
    b = np.array([1, 2], np.float32)
    npz = tmp_path / "in.npz"
    np.savez(npz, in0=a, in1=b)
    code, out, _ = run_cli(capsys, "run", str(path), "--inputs", str(npz))
    assert code == 0
    assert json.loads(out)["outputs"] == [(a + b).tolist()]


def test_run_sizes_outputs_of_unknown_shape(tmp_path, capsys):
    mb = ModelBuilder()
    g = mb.main
    a, b = g.input(F32, [3]), g.input(F32, [3])
    y = g.output(F32, [0])  # shape left to the driver
    g.operation(OperationType.SUB, [a, b, g.constant(OperandType.INT32, 0)], [y])
    x1, x2 = np.array([1, 2, 3], np.float32), np.array([0.5, 0.5, 4], np.float32)
    path = write_model(tmp_path / "dyn.json", mb.build(), inputs=[x1, x2])
    code, out, _ = run_cli(capsys, "run", str(path))
    assert code == 0
    doc = json.loads(out)
    assert doc["outputShapes"] == [{"dimensions": [3], "isSufficient": True}]
    assert doc["outputs"] == [(x1 - x2).tolist()]


def test_run_while_loop(tmp_path, capsys):
    path = write_model(
        tmp_path / "loop.json", counter_loop_model(), inputs=[np.array([7], np.int32)]
    )
    code, out, _ = run_cli(capsys, "run", str(path))
    assert code == 0
    assert json.loads(out)["outputs"] == [[7]]


def test_run_loop_timeout_reports_status(tmp_path, capsys):
    big = np.array([2**31 - 1], np.int32)
    path = write_model(tmp_path / "loop.json", counter_loop_model(), inputs=[big])
    code, out, _ = run_cli(capsys, "run", str(path), "--loop-timeout-ms", "1")
    assert code == 1
    doc = json.loads(out)
    assert doc["status"] == "MISSED_DEADLINE_TRANSIENT" and doc["stage"] == "execute"
    assert doc["message"]


def test_run_invalid_model_reports_status(tmp_path, capsys):
    mb = ModelBuilder()
    g = mb.main
    a = g.input(F32, [2])
    b = g.input(OperandType.TENSOR_INT32, [2])  # ADD operands of different types
    y = g.output(F32, [2])
    g.operation(OperationType.ADD, [a, b, g.constant(OperandType.INT32, 0)], [y])
    path = write_model(
        tmp_path / "bad.json", mb.build(), inputs=[np.zeros(2, np.float32), np.zeros(2, np.int32)]
    )
    code, out, _ = run_cli(capsys, "run", str(path))
    assert code == 1
    doc = json.loads(out)
    assert doc["status"] == "INVALID_ARGUMENT" and doc["stage"] == "prepare"
    assert "ADD" in doc["message"]


# ---- vectors -------------------------------------------------------------------


def _vector_set(tmp_path: Path) -> Path:
    """One model that passes, one that fails, one expectFailure, one loop."""
    a = np.array([1.0, 2.0], np.float32)
    b = np.array([3.0, -4.0], np.float32)
    good = model_to_json(add_model(), name="mine/good", inputs=[a, b], expected=[a + b])
    wrong = model_to_json(add_model(), name="mine/wrong", inputs=[a, b], expected=[a - b])
    fail = model_to_json(
        add_model(), name="mine/expect_failure", inputs=[a, b], expected=[a + b], expectFailure=True
    )
    loop = model_to_json(
        counter_loop_model(),
        name="loop/base",
        inputs=[np.array([3], np.int32)],
        expected=[np.array([3], np.int32)],
    )
    path = tmp_path / "set.json.gz"
    save_vectors(path, [good, wrong, fail, loop])
    return path


def test_vectors_summary_report_and_dump(tmp_path, capsys):
    path = _vector_set(tmp_path)
    report = tmp_path / "report.json"
    dump = tmp_path / "dump"
    code, out, _ = run_cli(
        capsys, "vectors", str(path), "--json-report", str(report), "--dump-outputs", str(dump)
    )
    assert code == 1  # one model failed
    lines = out.strip().splitlines()
    assert lines[-1] == "2 passed, 2 failed, 0 skipped"
    assert any(line.startswith("FAILED mine/wrong: ") for line in lines)
    assert any(line.startswith("FAILED mine/expect_failure: ") for line in lines)
    entries = {e["name"]: e for e in json.loads(report.read_text())["results"]}
    assert entries["mine/good"]["result"] == "passed"
    assert entries["mine/good"]["worstError"] == 0.0
    assert entries["mine/wrong"]["result"] == "failed"
    assert entries["mine/wrong"]["worstError"] == 8.0  # a + b = [4, -2] vs a - b = [-2, 6]
    assert "outside" in entries["mine/wrong"]["error"]
    with np.load(dump / "mine__good.npz") as z:
        assert z["out0"].tolist() == [4.0, -2.0]
    with np.load(dump / "loop__base.npz") as z:
        assert z["out0"].tolist() == [3]


def test_vectors_filter_and_skip(tmp_path, no_add_profile, capsys):
    (tmp_path / "v").mkdir()
    _vector_set(tmp_path / "v")
    report = tmp_path / "r.json"
    code, out, _ = run_cli(
        capsys,
        "vectors",
        str(tmp_path / "v"),
        "--filter",
        "mine/good",
        "--filter",
        "loop/*",
        "--profile",
        str(no_add_profile),
        "--json-report",
        str(report),
        "--no-progress",
        "-v",
    )
    assert code == 0
    assert out.strip().splitlines()[-1] == "0 passed, 0 failed, 2 skipped"
    # an expectFailure model the device cannot run is skipped, not passed
    code, out, _ = run_cli(
        capsys,
        "vectors",
        str(tmp_path / "v"),
        "--filter",
        "*/expect_failure",
        "--profile",
        str(no_add_profile),
    )
    assert code == 0
    assert out.strip().splitlines()[-1] == "0 passed, 0 failed, 1 skipped"
    results = json.loads(report.read_text())["results"]
    assert {r["result"] for r in results} == {"skipped"}
    assert all("ADD" in r["error"] for r in results)


def test_vectors_operations_filter(tmp_path, capsys):
    path = _vector_set(tmp_path)
    code, out, _ = run_cli(capsys, "vectors", str(path), "--operations", "WHILE,LESS,ADD")
    assert out.strip().splitlines()[-1] == "2 passed, 2 failed, 0 skipped"
    code, out, _ = run_cli(capsys, "vectors", str(path), "--operations", "WHILE,LESS")
    assert code == 1  # nothing left to run
    code, out, err = run_cli(capsys, "vectors", str(path), "--operations", "NOPE")
    assert code == 2 and "NOPE" in err


def test_vectors_command_as_a_subprocess(tmp_path):
    path = _vector_set(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "nnhal.tools.cli", "vectors", str(path), "--filter", "mine/good"],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "1 passed, 0 failed, 0 skipped"
    assert "Traceback" not in proc.stderr


# ---- bench ---------------------------------------------------------------------


def test_bench_control_flow_small(tmp_path, capsys):
    out_json = tmp_path / "bench.json"
    code, out, _ = run_cli(
        capsys, "bench", "control-flow", "--n", "10", "--repeat", "1", "--json", str(out_json)
    )
    assert code == 0
    assert "agree" in out and "DISAGREE" not in out
    doc = json.loads(out_json.read_text())
    (row,) = doc["rows"]
    assert row["n"] == 10 and row["outputs_agree"]
    assert set(row["per_iteration_us"]) == {"numpy", "executor", "prepared", "grpc"}


def test_bench_model_computes_scaled_fibonacci():
    from nnhal.tools.bench import PHI, numpy_loop

    state, i = numpy_loop(20)
    fib = [0, 1]
    while len(fib) < 22:
        fib.append(fib[-1] + fib[-2])
    assert i.tolist() == [20]
    np.testing.assert_allclose(state[0] * PHI**20, fib[20:22], rtol=1e-4)


# ---- bad inputs ----------------------------------------------------------------


@pytest.mark.parametrize(
    "make_args, message",
    [
        (lambda t, m: ["run", str(t / "missing.json")], "no such file"),
        (lambda t, m: ["supported", str(t / "missing.json")], "no such file"),
        (lambda t, m: ["vectors", str(t / "missing")], "no such file"),
        (lambda t, m: ["run", str(t / "bad.json")], "not a valid JSON"),
        (lambda t, m: ["vectors", str(t / "bad.json")], "not a valid JSON"),
        (lambda t, m: ["run", str(t / "shape.json")], "missing key 'main'"),
        (lambda t, m: ["run", str(m), "--profile", "no-such-profile"], "no-such-profile"),
        (lambda t, m: ["run", str(m), "--profile", "x", "--target", "127.0.0.1:1"], "--profile"),
        (lambda t, m: ["run", str(m), "--target", "nonsense"], "bad address"),
        (
            lambda t, m: ["run", str(m), "--target", "127.0.0.1:1", "--connect-timeout", "0.5"],
            "DEVICE_UNAVAILABLE",
        ),
        (lambda t, m: ["run", str(t / "two.json")], "--name"),
        (lambda t, m: ["run", str(t / "two.json"), "--name", "zzz"], "no model named"),
        (lambda t, m: ["run", str(m), "--inputs", str(t / "missing.npz")], "no such file"),
        (lambda t, m: ["run", str(m), "--inputs", str(t / "bad.json")], "npz"),
        (lambda t, m: ["run", str(m), "--inputs", str(t / "one.npz")], "input 1"),
        (lambda t, m: ["bench", "control-flow", "--repeat", "0"], "--repeat"),
    ],
)
def test_bad_inputs_give_a_clear_message(tmp_path, add_file, make_args, message, capsys):
    (tmp_path / "bad.json").write_text("{ this is not json")
    (tmp_path / "shape.json").write_text('{"name": "x"}')
    two = [model_to_json(add_model(), name=f"m/{k}") for k in range(2)]
    (tmp_path / "two.json").write_text(json.dumps(two))
    np.savez(tmp_path / "one.npz", in0=np.zeros(2, np.float32))
    code, _, err = run_cli(capsys, *make_args(tmp_path, add_file[0]))
    assert code != 0
    assert message in err, err
    assert err.count("\n") == 1 and err.startswith("nnhal ")  # one line


def test_bad_input_in_a_subprocess_has_no_traceback(tmp_path):
    (tmp_path / "bad.json").write_text("[{")
    proc = subprocess.run(
        [sys.executable, "-m", "nnhal.tools.cli", "run", str(tmp_path / "bad.json")],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "NNHAL_DEBUG": ""},
    )
    assert proc.returncode != 0
    assert proc.stderr.startswith("nnhal run: error: ") and "Traceback" not in proc.stderr


def test_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as e:
        main([])
    assert e.value.code == 2
    capsys.readouterr()
    assert main(["bench"]) == 2  # a usage error found after parsing: one line, not the usage
    assert capsys.readouterr().err.splitlines() == [
        "nnhal bench: error: choose --suite control-flow (or --model FILE), or `bench control-flow`"
    ]


def test_nnhal_modules_do_not_import_driver_at_import_time():
    code = (
        "import sys, nnhal.tools.cli, nnhal.tools.bench, nnhal.vector_runner, nnhal.vectors, nnhal.builder; "
        "print(sorted(m for m in sys.modules if m == 'driver' or m.startswith('driver.')))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_proto_prints_and_writes_the_installed_files(tmp_path, capsys):
    code, out, _ = run_cli(capsys, "proto")
    assert code == 0
    names = [line.split(": ")[1] for line in out.splitlines() if line.startswith("// file: ")]
    assert names == [f"nnhal/v1_3/{n}.proto" for n in
                     ("control", "device", "prepared_model", "types", "types_legacy")]  # fmt: skip
    assert "service IDevice" in out
    code, out, _ = run_cli(capsys, "proto", "--out", str(tmp_path))
    assert code == 0
    written = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.proto"))
    assert written == names
    source = REPO_ROOT / "proto" / "nnhal" / "v1_3" / "device.proto"
    assert (tmp_path / "nnhal/v1_3/device.proto").read_text() == source.read_text()


@pytest.mark.parametrize("args", [["proto"], ["ops"]])
def test_a_reader_that_goes_away_ends_the_command_quietly(args):
    """`nnhal ops | head -1`: no "Broken pipe" error, no traceback."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "nnhal", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stdout.readline()
    proc.stdout.close()  # the reader goes away after one line
    _, err = proc.communicate(timeout=120)
    assert err == b"" and proc.returncode in (0, 141)


def test_device_picks_one_device_of_the_target(add_file, capsys):
    """`--device` on the commands that talk to a server: the same model, two devices."""
    from nnhal.driver.device import Device
    from nnhal.driver.profile import load_profile
    from nnhal.driver.service import create_server

    devices = [Device(load_profile("default")), Device(load_profile("nnapi-sample_quant"))]
    server, address = create_server(devices, "127.0.0.1:0")
    try:
        model = str(add_file[0])
        for device, want in (("default", [True]), ("nnapi-sample_quant", [False]), (None, [True])):
            extra = ["--device", device] if device else []
            code, out, _ = run_cli(capsys, "supported", model, "--target", address, *extra)
            assert code == 0 and json.loads(out)["supported"] == want, device
        code, out, _ = run_cli(capsys, "run", model, "--target", address, "--device", "default")
        assert code == 0 and json.loads(out)["status"] == "NONE"
        code, _, err = run_cli(capsys, "supported", model, "--target", address, "--device", "gpu")
        assert code == 1 and "gpu" in err
    finally:
        server.stop(None)
    code, _, err = run_cli(capsys, "supported", model, "--device", "default")
    assert code == 2 and "--device picks one device of --target's server" in err


@pytest.mark.timeout(240)
def test_vectors_and_cts_pick_a_device_of_the_target(tmp_path, capsys, monkeypatch):
    """`vectors --device` and `cts --device`: a float32 ADD passes on the server's float
    device and is skipped (reported unsupported) by its quant-only device."""
    import re

    from nnhal.driver.device import Device
    from nnhal.driver.profile import load_profile
    from nnhal.driver.service import create_server

    a = np.array([1.0, 2.0], np.float32)
    b = np.array([3.0, -4.0], np.float32)
    path = tmp_path / "add.json"
    save_vectors(
        path, [model_to_json(add_model(), name="mine/add", inputs=[a, b], expected=[a + b])]
    )
    monkeypatch.chdir(tmp_path)  # the cts session's rootdir
    devices = [Device(load_profile("default")), Device(load_profile("nnapi-sample_quant"))]
    server, address = create_server(devices, "127.0.0.1:0")
    vectors = ["vectors", str(path), "--target", address]
    cts = ["cts", "--target", address]
    cts_tail = ["--families", "vectors", "--vectors", str(path), "--no-corpus", "--", "-q",
                "-p", "no:cacheprovider"]  # fmt: skip
    try:
        for device, vectors_line, cts_line in (
            ("default", "1 passed, 0 failed, 0 skipped", r"1 passed(, \d+ warnings?)? in "),
            ("nnapi-sample_quant", "0 passed, 0 failed, 1 skipped", r"1 skipped(, \d+ warnings?)? in "),
        ):  # fmt: skip
            code, out, _ = run_cli(capsys, *vectors, "--device", device)
            assert code == 0 and out.strip().splitlines()[-1] == vectors_line, (device, out)
            code, out, _ = run_cli(capsys, *cts, "--device", device, *cts_tail)
            assert code == 0, (device, out)
            assert re.match(cts_line, out.strip().splitlines()[-1]), (device, out)
        for argv in ([*vectors, "--device", "gpu"], [*cts, "--device", "gpu", *cts_tail]):
            code, _, err = run_cli(capsys, *argv)
            assert code == 1 and "no device 'gpu'" in err, (argv, err)
    finally:
        server.stop(None)
        for device in devices:
            device.close()
