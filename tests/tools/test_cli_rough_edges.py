"""The command line's rough edges, each pinned: noisy bench fits, optional libraries asked
for, one-line usage errors with "did you mean", the faults echo, inputs that do not fit
their operand, exit codes of every subcommand, log lines, progress, Ctrl-C, trace values.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from nnhal.tools.cli import build_parser, main
from repo_paths import REPO_ROOT

FIB = str(REPO_ROOT / "examples" / "fib.json")
VECTORS = Path(os.environ.get("NNHAL_VECTORS") or REPO_ROOT.parent / "shared" / "nnapi-vectors")
LOG_LINE = re.compile(
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR|CRITICAL) nnhal[\w.]*: "
)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    """``main(argv)``; an argparse usage error (SystemExit) counts as its exit code."""
    try:
        code = main(list(argv))
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


@pytest.fixture
def server():
    """A served default device in this process; its address."""
    from nnhal.driver.device import Device
    from nnhal.driver.profile import load_profile
    from nnhal.driver.server import create_server

    device = Device(load_profile(None))
    srv, address = create_server(device, "127.0.0.1:0")
    try:
        yield address
    finally:
        srv.stop(None)
        device.close()


# ---- bench --suite: a fit that is noise is flagged, its ratios omitted ---------------


def test_two_point_fit_flags_noise():
    from nnhal.tools.bench_measure import two_point_fit

    falling = two_point_fit([(10, 100.0), (1000, 95.0)])
    assert falling.per_iteration_us < 0 and falling.noisy  # negative: never a cost
    within = two_point_fit([(10, 100.0), (1000, 150.0)], {10: 80.0, 1000: 20.0})
    assert within.noisy and within.noise_us == 80.0  # a rise of 50 inside a scatter of 80
    clear = two_point_fit([(10, 100.0), (1000, 1100.0)], {10: 5.0, 1000: 20.0})
    assert not clear.noisy and clear.per_iteration_us == pytest.approx(1000 / 990)
    assert clear.as_dict()["noisy"] is False and within.as_dict()["noisy"] is True


def test_suite_table_shows_noisy_instead_of_a_cost_and_no_ratio(capsys):
    from nnhal.tools.bench_measure import two_point_fit
    from nnhal.tools.bench_suite import print_table, run_suite
    from nnhal.tools.bench_workloads import suite

    doc = run_suite(
        suite(["parity"]), modes=("executor", "prepared"), trips=[1, 30], rounds=1,
        peers=False, profile_ops=False, progress=False,
    )  # fmt: skip
    w = doc["workloads"][0]
    # the executor's measured points, replaced by two that fall: the fit is noise
    w["fit"]["executor"] = two_point_fit([(1, 50.0), (30, 40.0)]).as_dict()
    w["fit"]["prepared"] = two_point_fit([(1, 50.0), (30, 350.0)], {1: 2.0, 30: 3.0}).as_dict()
    print_table(doc, compare=True)
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ")}
    assert rows["executor"].split()[1:3] == ["noisy", "-"]
    assert "-0.345" not in out  # the negative cost is not printed as data
    ex_ratio = rows["executor"].split()[5:7]
    assert ex_ratio == ["-", "-"], rows["executor"]  # no ratio to a noisy cost
    assert rows["prepared"].split()[1] == "10.345"
    assert re.search(r"noisy: executor: the rise .* within the samples' scatter", out)


def test_csv_carries_the_noisy_flag(tmp_path):
    from nnhal.tools.bench_measure import two_point_fit
    from nnhal.tools.bench_suite import run_suite, write_csv
    from nnhal.tools.bench_workloads import suite

    doc = run_suite(
        suite(["parity"]), modes=("executor",), trips=[1, 30], rounds=1, peers=False,
        profile_ops=False, progress=False,
    )  # fmt: skip
    doc["workloads"][0]["fit"]["executor"] = two_point_fit([(1, 5.0), (30, 4.0)]).as_dict()
    write_csv(doc, str(tmp_path / "s.csv"))
    text = (tmp_path / "s.csv").read_text()
    assert text.splitlines()[0].endswith(",fit_noisy")
    assert all(line.endswith(",True") for line in text.splitlines()[1:] if "executor" in line)


# ---- an optional library asked for and missing: exit 1 with the install hint --------


def test_plot_without_matplotlib_fails_before_running(monkeypatch, tmp_path, capsys):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if not installed
    code, out, err = run(
        capsys, "bench", "--suite", "control-flow", "--workload", "parity", "--rounds", "1",
        "--plot", str(tmp_path / "plots"),
    )  # fmt: skip
    assert code == 1 and out == ""  # nothing ran: it would have ended without the plot
    assert err.startswith("nnhal bench: error: --plot needs matplotlib")
    assert err.rstrip().endswith("pip install 'nnhal[plot]'") and len(err.splitlines()) == 1
    assert not (tmp_path / "plots").exists()


def test_models_suite_without_onnxruntime_fails_with_the_extra(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    code, _, err = run(capsys, "bench", "--suite", "models", "--rounds", "1")
    assert code == 1 and "needs onnxruntime" in err and "pip install 'nnhal[bench]'" in err


def test_import_onnx_without_onnx_fails_with_the_extra(monkeypatch, tmp_path, capsys):
    model = tmp_path / "m.onnx"
    model.write_bytes(b"\x08\x07")
    monkeypatch.setitem(sys.modules, "onnx", None)
    code, _, err = run(capsys, "import", str(model), "-o", str(tmp_path / "m.json"))
    assert code == 1 and "needs onnx" in err and "pip install 'nnhal[onnx]'" in err


def test_fuzz_engine_atheris_without_atheris_fails_with_the_extra(monkeypatch, capsys):
    from nnhal.tools.fuzz.runner import TARGET_NAMES
    from nnhal.tools.fuzz.runner import main as fuzz_main

    monkeypatch.setitem(sys.modules, "atheris", None)
    monkeypatch.setattr("nnhal.tools.fuzz.runner._limit_memory", lambda gib: None)
    assert fuzz_main([TARGET_NAMES[0], "--engine", "atheris", "--runs", "1"]) == 1
    err = capsys.readouterr().err
    assert "--engine atheris needs atheris" in err and "pip install 'nnhal[fuzz]'" in err


def test_every_extra_named_exists_in_pyproject():
    import tomllib
    from nnhal.tools.optional import EXTRAS

    extras = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert set(EXTRAS.values()) <= set(extras)
    for module, extra in EXTRAS.items():
        wanted = module.replace("_", "-")
        assert any(dep.startswith(wanted) for dep in extras[extra]), (module, extra)


# ---- unknown names: one line, "did you mean" ----------------------------------------


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["bench", "--suite", "control-flow", "--workload", "fibonaci"],
         "nnhal bench: error: unknown workload 'fibonaci' (did you mean 'fibonacci'?)"),
        (["bench", "--suite", "models", "--workload", "mobilenet-f3"],
         ("nnhal bench: error: unknown models workload 'mobilenet-f3' (did you mean "
          "'mobilenet-f32' or 'mobilenet-q8'?)")),
        (["vectors", FIB, "--operations", "ADD,WHIEL"],
         "nnhal vectors: error: --operations: unknown operation 'WHIEL' (did you mean 'WHILE'?)"),
        (["cts", "--families", "generatd", "--no-corpus"],
         "nnhal cts: error: --families: unknown family 'generatd' (did you mean 'generated'?)"),
        (["run", FIB, "--profile", "exmple-npu"],
         ("nnhal run: error: unknown profile 'exmple-npu' (did you mean 'example-npu'?): not a "
          "built-in profile and no such file")),
    ],
)  # fmt: skip
def test_unknown_names_are_one_line_with_did_you_mean(capsys, argv, line):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert err.splitlines() == [line]  # no usage text before it


def test_did_you_mean_in_the_libraries_that_take_names():
    from nnhal.cts.dsl import _op_code, _type_code
    from nnhal.driver.evaluate import evaluate
    from nnhal.driver.faults import parse_rules
    from nnhal.driver.profile import parse_profile

    from nnhal.builder import ModelBuilder
    from nnhal.errors import HalError

    g = ModelBuilder().main
    with pytest.raises(ValueError, match=r"'TENSOR_FLOT32' \(did you mean 'TENSOR_FLOAT32'"):
        g.input("TENSOR_FLOT32", [1])
    a = g.input("TENSOR_FLOAT32", [1])
    with pytest.raises(ValueError, match=r"'CONV2D' \(did you mean 'CONV_2D'"):
        g.operation("CONV2D", [a], [g.output("TENSOR_FLOAT32", [1])])
    with pytest.raises(HalError, match=r"'SOFTMAXX' \(did you mean 'SOFTMAX'"):
        parse_rules({"rules": [{"operation": "SOFTMAXX", "status": "GENERAL_FAILURE"}]})
    with pytest.raises(ValueError, match=r"'FULY_CONNECTED' \(did you mean 'FULLY_CONNECTED'"):
        parse_profile({"name": "x", "exclude_operations": ["FULY_CONNECTED"]})
    with pytest.raises(ValueError, match=r"unknown key \(did you mean 'exclude_operations'"):
        parse_profile({"name": "x", "exclude_operation": ["ADD"]})
    with pytest.raises(HalError, match=r"'ADDD' \(did you mean 'ADD'"):
        evaluate("ADDD", [np.ones(1, np.float32)] * 2, {"activation": 0})
    with pytest.raises(ValueError, match=r"\(did you mean 'TENSOR_INT32'"):
        _type_code("TENSOR_INT23")
    with pytest.raises(ValueError, match=r"\(did you mean 'RESHAPE'"):
        _op_code("RESHAP")


def test_a_name_nothing_is_close_to_lists_the_known_ones():
    from nnhal.suggest import unknown_names

    assert unknown_names("workload", ["zzz"], ["fibonacci", "rnn"]) == (
        "unknown workload 'zzz'; known: fibonacci, rnn"
    )


# ---- nnhal faults echoes every setting of every rule --------------------------------


def test_faults_echo_has_n_probability_and_latencies(server, tmp_path, capsys):
    faults = tmp_path / "faults.toml"
    faults.write_text(
        "[faults]\nseed = 3\n"
        '[[faults.rules]]\nmethod = "execute*"\nstatus = "GENERAL_FAILURE"\nwhen = "nth"\nn = 3\n'
        '[[faults.rules]]\nmethod = "prepare*"\nwhen = "probability"\nprobability = 0.25\n'
        'status = "DEVICE_UNAVAILABLE"\nlatency_ms = 2.5\nlatency_per_operation_us = 40\n'
        "latency_from_capabilities_us = 1.5\n"
    )
    code, out, _ = run(capsys, "faults", server, str(faults))
    assert code == 0
    rules = json.loads(out)["rules"]
    assert rules[0]["when"] == "nth" and rules[0]["n"] == 3
    assert rules[1]["probability"] == 0.25 and rules[1]["latency_ms"] == 2.5
    assert rules[1]["latency_per_operation_us"] == 40
    assert rules[1]["latency_from_capabilities_us"] == 1.5
    assert run(capsys, "faults", server, "--clear")[0] == 0


# ---- inputs that do not fit their operand -------------------------------------------


def _npz(path: Path, **arrays) -> str:
    np.savez(path, **arrays)
    return str(path)


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        ({"in0": np.array([[1e300, 1.0]]), "in1": np.array([10], np.int32)},
         r"input 0 \(in0\): value 1e\+300 does not fit TENSOR_FLOAT32"),
        ({"in0": np.zeros((1, 2), np.float32), "in1": np.array([10.5])},
         r"input 1 \(in1\): TENSOR_INT32 takes integers; the value has fractions"),
        ({"in0": np.zeros((1, 2), np.float32), "in1": np.array([2**40])},
         r"input 1 \(in1\): values 1099511627776\.\.1099511627776 do not fit TENSOR_INT32"),
        ({"in0": np.zeros(2, np.float32), "in1": np.array([10], np.int32)},
         r"input 0 \(in0\): the operand has rank 2 \(dimensions \[1, 2\]\); the value has shape \[2\]"),
        ({"in0": np.zeros((1, 3), np.float32), "in1": np.array([10], np.int32)},
         r"input 0 \(in0\): the operand's dimensions are \[1, 2\]"),
    ],
)  # fmt: skip
def test_inputs_that_do_not_fit_are_errors_naming_the_input(tmp_path, capsys, arrays, message):
    path = _npz(tmp_path / "in.npz", **arrays)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy RuntimeWarning on the way either
        code, out, err = run(capsys, "run", FIB, "--inputs", path)
    assert code == 1 and out == ""  # nothing ran
    assert len(err.splitlines()) == 1 and re.search(message, err), err


def test_inputs_that_fit_run(tmp_path, capsys):
    # float64 values float32 can hold, integers given as exact floats: accepted
    path = _npz(tmp_path / "in.npz", in0=np.array([[0.0, 1.0]]), in1=np.array([10.0]))
    code, out, _ = run(capsys, "run", FIB, "--inputs", path)
    assert code == 0 and json.loads(out)["outputs"][1] == [10]


def test_a_file_that_is_no_npz_is_one_clear_line(tmp_path, capsys):
    text = tmp_path / "in.npz"
    text.write_text("in0 = 1, 2\n")
    code, _, err = run(capsys, "run", FIB, "--inputs", str(text))
    assert code == 1
    assert err.splitlines() == [
        (
            f"nnhal run: error: {text}: not an .npz file (np.savez writes one: a zip archive "
            "of .npy arrays)"
        )
    ]
    assert "pickle" not in err
    npy = tmp_path / "one.npz"
    with open(npy, "wb") as f:
        np.save(f, np.zeros(2))
    assert run(capsys, "run", FIB, "--inputs", str(npy))[0] == 1


def test_fit_operand_for_half_quantized_and_bool_types():
    from nnhal.tools.npz_inputs import fit_operand

    from nnhal.types import OperandType as T

    with pytest.raises(ValueError, match="x: value 70000 does not fit TENSOR_FLOAT16"):
        fit_operand(np.array([70000.0]), T.TENSOR_FLOAT16, [1], "x")
    with pytest.raises(ValueError, match=r"values 300\.\.300 do not fit TENSOR_QUANT8_ASYMM "):
        fit_operand(np.array([300]), T.TENSOR_QUANT8_ASYMM, [1], "x")
    with pytest.raises(ValueError, match="TENSOR_QUANT8_ASYMM_SIGNED takes integers"):
        fit_operand(np.array([1.5]), T.TENSOR_QUANT8_ASYMM_SIGNED, [1], "x")
    with pytest.raises(ValueError, match="TENSOR_BOOL8 takes only 0/1"):
        fit_operand(np.array([2]), T.TENSOR_BOOL8, [1], "x")
    with pytest.raises(ValueError, match="INT32 is a scalar"):
        fit_operand(np.array([1, 2]), T.INT32, [], "x")
    # NaN and infinity are float values: kept; unknown sizes (0) take any size
    kept = fit_operand(np.array([np.nan, np.inf, 1.0]), T.TENSOR_FLOAT32, [0], "x")
    assert kept.dtype == np.float32 and np.isnan(kept[0]) and np.isinf(kept[1])


# ---- exit codes: every subcommand, a missing file (1) and a bad flag (2) ------------


def _missing_file_cases(tmp: Path, server_address: str) -> dict[tuple[str, ...], list[str]]:
    """Per subcommand (as the parser names it): a command line whose only fault is a
    missing file."""
    m = str(tmp / "missing")
    return {
        ("serve",): ["serve", "--address", "127.0.0.1:0", "--profile", f"{m}.toml"],
        ("supported",): ["supported", f"{m}.json"],
        ("run",): ["run", FIB, "--inputs", f"{m}.npz"],
        ("vectors",): ["vectors", m],
        ("cts",): ["cts", "--expectations", f"{m}.toml", "--no-corpus"],
        ("ops",): [],  # takes no file
        ("bench",): ["bench", "--model", f"{m}.json"],
        ("bench", "control-flow"): ["bench", "control-flow", "--n", "1", "--repeat", "1",
                                    "--no-grpc", "--json", f"{m}/no-such-dir/x.json"],
        ("oppkg",): [],  # its actions below
        ("oppkg", "generate"): ["oppkg", "generate", f"{m}.xml", "--out", str(tmp / "o")],
        ("oppkg", "validate"): ["oppkg", "validate", f"{m}.xml"],
        ("oppkg", "list"): ["oppkg", "list", "--op-package", m, "--no-entry-points"],
        ("oppkg", "rules"): ["oppkg", "rules", f"{m}.json"],
        ("oppkg", "test"): ["oppkg", "test", f"{m}.xml"],
        ("explain",): ["explain", f"{m}.json"],
        ("trace",): ["trace", server_address, "--token-file", m],
        ("devices",): ["devices", server_address, "--tls-ca", m],
        ("faults",): ["faults", server_address, f"{m}.toml"],
        ("stress",): ["stress", "--profile", f"{m}.toml", "--executions", "1"],
        ("resources",): ["resources", server_address, "--token-file", m],
        ("import",): ["import", f"{m}.tflite", "-o", str(tmp / "x.json")],
        ("tflite",): ["tflite", f"{m}.tflite"],
        ("plan",): ["plan", f"{m}.json"],
        ("proto",): ["proto", "--out", f"{FIB}/under-a-file"],
    }  # fmt: skip


def _subcommands(parser, prefix=()):
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*prefix, name)
                yield from _subcommands(sub, (*prefix, name))


def test_exit_codes_of_every_subcommand(tmp_path, capsys, server):
    cases = _missing_file_cases(tmp_path, server)
    assert sorted(_subcommands(build_parser())) == sorted(cases)  # every one is walked
    for path, argv in cases.items():
        code, _, err = run(capsys, *(argv or path), "--no-such-flag")
        assert code == 2, (path, err)  # usage
        assert "error: " in err, err  # argparse's: the usage, then the error
        if argv:
            assert "unrecognized arguments: --no-such-flag" in err, err
        else:  # ops; oppkg (without its ACTION)
            assert "--no-such-flag" in err or "required: ACTION" in err, err
            continue
        code, _, err = run(capsys, *argv)
        assert code == 1, (argv, code, err)  # a file error
        lines = [line for line in err.splitlines() if not LOG_LINE.match(line)]
        assert lines and lines[-1].startswith(f"nnhal {path[0]}"), (argv, err)
        assert "missing" in err or "Not a directory" in err, (argv, err)


# ---- log lines: time, level, logger ---------------------------------------------------


def test_command_log_lines_carry_time_level_and_logger(tmp_path, capsys):
    code, _, err = run(capsys, "oppkg", "list", "--op-package", str(tmp_path / "nope"))
    assert code == 1
    logged = [line for line in err.splitlines() if "skipped" in line and "nope" in line]
    assert logged and LOG_LINE.match(logged[0]), err
    assert " WARNING nnhal.op_packages: " in logged[0]


@pytest.mark.slow
def test_server_log_lines_carry_time_level_and_logger(tmp_path):
    from test_cli import start_serve, stop_serve

    from nnhal.control import Control

    proc, address = start_serve("--log-level", "info")
    try:
        with Control(address) as control:
            control.set_faults([{"method": "execute*", "status": "GENERAL_FAILURE"}])
            control.set_faults("")
    finally:
        code, err = stop_serve(proc)
    assert code == 0
    logged = [line for line in err.splitlines() if "faults of" in line]
    assert logged and all(LOG_LINE.match(line) for line in logged), err
    assert " nnhal.driver.service: faults of " in logged[0]


# ---- progress: on a terminal only, --quiet respected ---------------------------------


def _need_vectors() -> None:
    if not VECTORS.is_dir():  # as tests/tools/test_vectors.py
        pytest.skip(f"shared NNAPI vectors not found at {VECTORS} (set NNHAL_VECTORS)")


def _run_with_stderr_on_a_tty(argv: list[str], timeout: float) -> tuple[int, str, str]:
    """Run ``nnhal ARGV`` with stderr on a pseudo-terminal: (exit code, stdout, stderr)."""
    import fcntl
    import pty
    import select
    import struct
    import termios

    master, slave = pty.openpty()
    # a terminal of 24 x 100 (a new pseudo-terminal is 0 x 0: bars would be cut to nothing)
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "nnhal.tools.cli", *argv],
        stdout=subprocess.PIPE,
        stderr=slave,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "NNHAL_DEBUG": ""},
    )
    os.close(slave)
    chunks = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                data = os.read(master, 65536)
            except OSError:  # the child closed its end
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    os.close(master)
    out, _ = proc.communicate(timeout=60)
    return proc.returncode, out.decode(), b"".join(chunks).decode(errors="replace")


@pytest.mark.slow  # three subprocess runs
def test_vectors_progress_only_on_a_terminal_and_not_with_quiet():
    _need_vectors()
    argv = ["vectors", str(VECTORS), "--filter", "add/*"]
    code, out, err = _run_with_stderr_on_a_tty(argv, timeout=120)
    assert code == 0 and "passed" in out
    assert "model/s" in err or "it/s" in err or "%|" in err, err  # the bar
    code, out, err = _run_with_stderr_on_a_tty([*argv, "--quiet"], timeout=120)
    assert code == 0 and "passed" in out and err == ""
    proc = subprocess.run(
        [sys.executable, "-m", "nnhal.tools.cli", *argv],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0 and proc.stderr == ""  # piped: no bar


@pytest.mark.slow
def test_stress_shows_its_progress_on_a_terminal():
    argv = ["stress", "--clients", "1", "--executions", "0", "--duration", "4", "--warmup", "1"]
    code, out, err = _run_with_stderr_on_a_tty(argv, timeout=240)
    _assert_a_whole_run(code, out, err)
    assert "nnhal stress: warm-up" in err and "nnhal stress: measured round: " in err, err
    assert re.search(r"measured round: \d+ s of 4, [01]/1 clients done", err), err
    code, out, err = _run_with_stderr_on_a_tty([*argv, "--quiet"], timeout=240)
    _assert_a_whole_run(code, out, err)
    assert "measured round" not in err


def _assert_a_whole_run(code: int, out: str, err: str) -> None:
    """The run went to its end and printed its report. Its verdict (exit 0 or 1) is
    test_stress.py's subject, not this one's: on a machine starved by other jobs the
    verdict of a 4-second run has turned (in two of four loaded full runs, cause unread),
    and a verdict is a finding about the server, not a failure to show progress."""
    whole = f"exit {code}\nstdout:\n{out}\nstderr:\n{err}"
    assert code in (0, 1), whole
    assert "server resources" in out and ("\nOK: " in out or "\nFAILED: " in out), whole


def test_status_line_throttles_but_shows_each_phase():
    from nnhal.tools.progress import Status

    class Tty:
        def __init__(self):
            self.text = ""

        def write(self, s):
            self.text += s

        def flush(self):
            pass

    tty = Tty()
    s = Status(True, "x", every=3600, stream=tty)
    s.update("warm-up")
    s.update("round: 1 s")
    s.update("round: 2 s")  # same phase within `every`: not shown
    s.close()
    assert "x: warm-up" in tty.text and "x: round: 1 s" in tty.text
    assert "round: 2 s" not in tty.text and tty.text.endswith("\r\x1b[K")
    off = Tty()
    Status(False, "x", stream=off).update("warm-up")
    assert off.text == ""


# ---- Ctrl-C and gRPC's C core ---------------------------------------------------------


def test_grpc_core_logging_is_quieted_before_grpc_loads_unless_the_user_set_it():
    code = (
        "import os, sys; import nnhal.tools.cli; "
        "print(os.environ['GRPC_VERBOSITY'], 'grpc' in sys.modules)"
    )
    env = {k: v for k, v in os.environ.items() if k != "GRPC_VERBOSITY"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    ).stdout
    assert out.split() == ["ERROR", "False"]
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True,
        env={**env, "GRPC_VERBOSITY": "DEBUG"},
    ).stdout  # fmt: skip
    assert out.split() == ["DEBUG", "False"]


@pytest.mark.slow
def test_vectors_interrupted_exits_130_with_one_line():
    _need_vectors()
    env = {k: v for k, v in os.environ.items() if k not in ("GRPC_VERBOSITY", "NNHAL_DEBUG")}
    # Ctrl-C's usual handler, whatever this process inherited: a background job of a shell
    # without job control starts with SIGINT ignored, and Python keeps it ignored
    program = (
        "import signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
        "from nnhal.tools.cli import main; sys.exit(main())"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", program, "vectors", str(VECTORS)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    time.sleep(8)  # loading and running the corpus takes minutes: it is mid-run
    assert proc.poll() is None
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130
    assert err == "nnhal vectors: interrupted\n", err  # no traceback, no gRPC core line
    assert out == ""


# ---- trace: argument values, not type names -------------------------------------------


def test_trace_shows_argument_values(server, capsys):
    from nnhal.control import Control
    from nnhal.vector_runner import connect_device
    from nnhal.vectors import load_vectors

    test = load_vectors(FIB)[0]
    deadline = time.monotonic_ns() + 60 * 10**9  # as `nnhal run --deadline-ms` gives it
    with connect_device(server) as dev:
        prepared = dev.prepareModel_1_3(test.model)
        try:
            prepared.execute(
                list(test.inputs),
                output_shapes=[tuple(s) for s in test.expected_shapes],
                deadline_ns=deadline,
                loop_timeout_ns=5 * 10**9,
            )
        finally:
            prepared.release()
    code, out, _ = run(capsys, "trace", server)
    assert code == 0
    entries = json.loads(out)
    assert "Optional" not in out  # no type names where values belong
    execute = [e for e in entries if e["method"].startswith("execute")][-1]
    timeouts = execute["args"]["loopTimeoutDuration"]
    assert timeouts == {"nanoseconds": 5 * 10**9}, execute
    (when,) = execute["args"]["deadline"].values()  # nanosecondsSinceEpoch (or since boot)
    assert isinstance(when, int) and when > 0
    with Control(server) as control:
        control.trace(clear=True)
