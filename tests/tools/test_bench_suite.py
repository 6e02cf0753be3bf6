"""`nnhal bench --suite control-flow`: workloads, measurement, modes, peers, output.

No timed assertions: the tests check that every piece runs, that outputs
agree with the numpy equivalents, and that the numbers are consistent
(percentiles ordered, fits positive where the work clearly grows). Trip
counts are small so the file stays fast.
"""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest
from nnhal.driver.executor import compile_model
from nnhal.tools import bench_onnx
from nnhal.tools.bench_measure import Stats, run_rounds, two_point_fit
from nnhal.tools.bench_profile import profile_operations
from nnhal.tools.bench_suite import print_table, run_suite, write_csv, write_json
from nnhal.tools.bench_workloads import suite, user_workload
from nnhal.tools.cli import main

from nnhal.validation import validate_model

NAMES = ["fibonacci", "nested", "parity", "rnn", "lstm-decode", "greedy"]
SMALL = {"fibonacci": 7, "nested": 4, "parity": 5, "rnn": 3, "lstm-decode": 12, "greedy": 6}


@pytest.fixture(scope="module")
def workloads():
    return {w.name: w for w in suite()}


@pytest.mark.parametrize("name", NAMES)
def test_workload_matches_numpy(workloads, name):
    w = workloads[name]
    validate_model(w.model)
    compiled = compile_model(w.model)
    for n in (0, SMALL[name]):
        inputs = w.inputs(n)
        outputs = compiled.run(inputs, loop_timeout_ns=10**10)
        assert w.check(inputs, outputs) is None
        iterations = w.iterations(inputs, outputs)
        assert 0 <= iterations <= max(n, 0)
        if name != "lstm-decode":
            assert iterations == n


def test_lstm_decode_exits_early(workloads):
    w = workloads["lstm-decode"]
    inputs = w.inputs(30)
    outputs = compile_model(w.model).run(inputs, loop_timeout_ns=10**10)
    assert np.isfinite(inputs[2][0]), "a threshold inside the trajectory was found"
    assert 0 < w.iterations(inputs, outputs) < 30


def test_greedy_output_shape_follows_trip_count(workloads):
    w = workloads["greedy"]
    compiled = compile_model(w.model)
    for n in (0, 3, 9):
        tokens = compiled.run(w.inputs(n))[0]
        assert tokens.shape == (1, n + 1)


def test_check_reports_disagreement(workloads):
    w = workloads["fibonacci"]
    inputs = w.inputs(5)
    good = w.numpy(inputs)
    assert w.check(inputs, good) is None
    assert "output 1" in w.check(inputs, [good[0], good[1] + 1])
    assert "shape" in w.check(inputs, [good[0].reshape(2), good[1]])
    assert "differs" in w.check(inputs, [good[0] + 1, good[1]])


def test_unknown_workload_and_bad_trip_counts(workloads):
    with pytest.raises(ValueError, match="unknown workload"):
        suite(["nope"])
    with pytest.raises(ValueError, match="rnn: T must be"):
        workloads["rnn"].inputs(5000)
    with pytest.raises(ValueError, match="greedy: n must be"):
        workloads["greedy"].inputs(-1)


@pytest.mark.skipif(bench_onnx.available() is not None, reason="onnxruntime not installed")
@pytest.mark.parametrize("name", sorted(bench_onnx.BUILDERS))
def test_onnx_peer_agrees(workloads, name):
    w = workloads[name]
    peer = bench_onnx.BUILDERS[name](w.extra)
    session = bench_onnx.session(peer)
    inputs = w.inputs(SMALL[name])
    assert w.check(inputs, bench_onnx.runner(peer, session, inputs)()) is None


def test_stats_ordered_and_fit():
    stats = Stats.of([5.0, 1.0, 3.0, 2.0, 100.0, 4.0])
    assert stats.min <= stats.p50 <= stats.p90 <= stats.p95 <= stats.p99 <= stats.max
    assert stats.min == 1.0 and stats.max == 100.0 and stats.n == 6 and stats.spread > 0
    with pytest.raises(ValueError):
        Stats.of([])
    fit = two_point_fit([(1000, 1010.0), (10, 20.0)])
    assert fit.per_iteration_us == pytest.approx(1.0) and fit.fixed_us == pytest.approx(10.0)
    assert two_point_fit([(5, 1.0)]) is None and two_point_fit([(5, 1.0), (5, 2.0)]) is None


def test_run_rounds_interleaves_and_stops():
    calls: list[str] = []
    samples, first = run_rounds(
        {"a": lambda: calls.append("a") or 1, "b": lambda: calls.append("b") or 2}, rounds=3
    )
    assert calls == ["a", "b"] * 4  # one warm-up, then three interleaved rounds
    assert first == {"a": 1, "b": 2} and all(len(v) == 3 for v in samples.values())
    samples, _ = run_rounds({"a": lambda: None}, min_time=0.0, min_rounds=2)
    assert len(samples["a"]) == 2


def test_profile_splits_condition_and_body(workloads):
    w = workloads["fibonacci"]
    prof = profile_operations(w.model, w.inputs(5), loop_timeout_ns=10**10, runs=1)
    calls = {o["operation"].split(" (")[0]: o["calls"] for o in prof["operations"]}
    assert calls == {"LESS": 6, "FULLY_CONNECTED": 5, "ADD": 5}
    assert {"condition", "body", "control"} <= set(prof["roles_us"])
    assert all(v >= 0 for v in prof["roles_us"].values())


def test_run_suite_every_mode(workloads, tmp_path):
    chosen = [workloads["fibonacci"], workloads["greedy"]]
    doc = run_suite(chosen, trips=[0, 400], rounds=3, progress=False, loop_timeout_ms=5000)
    assert doc["ok"], [c["problem"] for w in doc["workloads"] for c in w["cases"]]
    for w in doc["workloads"]:
        ways = {c["way"] for c in w["cases"]}
        assert {"executor", "generic", "prepared", "grpc", "grpc-shm", "burst", "numpy"} <= ways
        for c in w["cases"]:
            s = c["stats"]
            assert s["min"] <= s["p50"] <= s["p90"] <= s["p95"] <= s["p99"] <= s["max"]
        assert w["fit"]["executor"]["per_iteration_us"] > 0
        assert w["prepare"]["in_process_us"] > 0 and w["prepare"]["in_process_first_us"] > 0
        assert isinstance(w["timing"], dict) and w["timing"]["timeInDriver"] > 0
    write_json(doc, tmp_path / "out.json")
    write_csv(doc, tmp_path / "out.csv")
    assert json.loads((tmp_path / "out.json").read_text())["suite"] == "control-flow"
    rows = list(csv.DictReader((tmp_path / "out.csv").open()))
    assert len(rows) == sum(len(w["cases"]) for w in doc["workloads"])
    print_table(doc, compare=True)


def test_user_model_file(tmp_path, workloads):
    from nnhal.vectors import model_to_json, save_vectors

    w = workloads["fibonacci"]
    inputs = w.inputs(4)
    expected = w.numpy(inputs)
    path = tmp_path / "fib.json"
    save_vectors(path, [model_to_json(w.model, name="fib", inputs=inputs, expected=expected)])
    user = user_workload(str(path))
    got = compile_model(user.model).run(user.inputs(0))
    assert user.check(user.inputs(0), got) is None
    assert user.check(user.inputs(0), [got[0] + 1, got[1]]) is not None
    doc = run_suite([user], modes=("executor",), rounds=1, peers=False, progress=False)
    assert doc["ok"] and {c["way"] for c in doc["workloads"][0]["cases"]} == {"executor"}
    with pytest.raises(ValueError, match="no model named"):
        user_workload(str(path), "other")


def test_cli_suite_and_legacy(tmp_path, capsys):
    out = tmp_path / "s.json"
    argv = ["bench", "--suite", "control-flow", "--workload", "parity", "--trips", "1"]
    argv += ["--trips", "30", "--rounds", "1", "--mode", "executor", "--no-peers", "--compare"]
    argv += ["--json", str(out), "--csv", str(tmp_path / "s.csv")]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "parity" in text and "agree" in text
    assert json.loads(out.read_text())["workloads"][0]["name"] == "parity"
    for bad, code in (
        (["bench"], 2),
        (["bench", "--suite", "control-flow", "--workload", "nope"], 2),
        (["bench", "--suite", "control-flow", "--rounds", "0"], 2),
        (["bench", "--model", str(tmp_path / "missing.json")], 1),  # a file error
    ):
        assert main(bad) == code, bad
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and err.startswith("nnhal bench: error: "), err
    assert main(["bench", "control-flow", "--n", "3", "--repeat", "1", "--no-grpc"]) == 0


def test_targets_run_small():
    from nnhal.tools.bench_targets import print_targets, run_targets

    targets = run_targets(rounds=1, big_elements=4096, transport_rounds=5,
                          prepare={"x": {"in_process_us": 2.0, "onnxruntime_session_us": 4.0,
                                         "in_process_first_us": 6.0}})  # fmt: skip
    assert targets["fixed_cost_us"]["value"] > 0
    for key in ("grpc_vs_echo", "burst_vs_pingpong", "inline_vs_shared_64mib"):
        assert targets[key]["ratio"] > 0
    assert targets["grpc_vs_echo"]["rounds"] == targets["burst_vs_pingpong"]["rounds"] == 5
    assert targets["prepare_vs_onnxruntime"]["ratios"] == {"x": 0.5}
    assert targets["prepare_vs_onnxruntime"]["first_ratios"] == {"x": 1.5}
    out = io.StringIO()
    print_targets(targets, out)
    assert "(x, target <= 1): first 1.50x (MISSED), again 0.50x (met)" in out.getvalue()


def test_plots_written(tmp_path, workloads):
    pytest.importorskip("matplotlib")
    from nnhal.tools.bench_plot import write_plots

    doc = run_suite(
        [workloads["fibonacci"]], modes=("executor",), trips=[1, 20], rounds=1, progress=False,
        peers=False,
    )  # fmt: skip
    write_plots(doc, str(tmp_path / "plots"))
    names = sorted(p.name for p in (tmp_path / "plots").iterdir())
    assert names == ["breakdown.png", "compare.png", "latency_fibonacci.png"]
    assert all((tmp_path / "plots" / n).stat().st_size > 1000 for n in names)


def test_failing_way_is_reported_not_fatal(workloads):
    from dataclasses import replace

    w = replace(workloads["fibonacci"], numpy=None)  # no numpy loop of 10**8 iterations
    doc = run_suite(
        [w], modes=("executor", "prepared"), trips=[0, 10**8], rounds=1, progress=False,
        peers=False, profile_ops=False, loop_timeout_ms=1,
    )  # fmt: skip
    entry = doc["workloads"][0]
    assert not doc["ok"]
    assert {(e["way"], e["param"]) for e in entry["errors"]} == {
        ("executor", 10**8),
        ("prepared", 10**8),
    }
    assert all("MISSED_DEADLINE" in e["error"] for e in entry["errors"])
    assert {c["param"] for c in entry["cases"]} == {0}
    print_table(doc, compare=False)
