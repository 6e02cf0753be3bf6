"""``nnhal bench --model MODEL.onnx``: nnhal and onnxruntime side by side, outputs compared."""

from __future__ import annotations

import csv
import json

import pytest

pytest.importorskip("onnx")

from nnhal.tools.cli import main
from repo_paths import REPO_ROOT

EXAMPLES = REPO_ROOT / "examples" / "onnx"


def _bench(tmp_path, name, *extra):
    pytest.importorskip("onnxruntime")  # the side-by-side peer
    out = tmp_path / f"{name}.json"
    table = tmp_path / f"{name}.csv"
    code = main(["bench", "--model", str(EXAMPLES / f"{name}.onnx"), "--inputs",
                 str(EXAMPLES / f"{name}.npz"), "--mode", "executor", "--mode", "prepared",
                 "--rounds", "2", "--no-profile", "--no-progress", "--json", str(out),
                 "--csv", str(table), *extra])  # fmt: skip
    return code, json.loads(out.read_text()), list(csv.DictReader(table.open()))


def test_rnn_loop_side_by_side_with_a_fit(tmp_path):
    code, doc, rows = _bench(tmp_path, "rnn_loop", "--trips", "4", "--trips", "16")
    assert code == 0 and doc["ok"]
    (w,) = doc["workloads"]
    assert w["name"] == "onnx:rnn_loop" and "steps" in w["title"]
    ways = {c["way"] for c in w["cases"]}
    assert ways == {"executor", "prepared", "onnxruntime"}
    assert all(c["agree"] for c in w["cases"])
    assert {c["param"] for c in w["cases"]} == {4, 16}
    for way in ways:  # a two-point fit per way, over the trip counts
        assert [p[0] for p in w["fit"][way]["points"]] == [4, 16]
    assert {r["way"] for r in rows} == ways and len(rows) == 6


def test_greedy_decoder_side_by_side_over_max_len(tmp_path):
    # the trip count is max_len, the only rank-0 integer input: the loop's condition stops
    # it at the end-of-sequence token, so the trip count is an upper bound
    code, doc, rows = _bench(tmp_path, "greedy_decoder", "--trips", "2", "--trips", "8")
    assert code == 0 and doc["ok"]
    (w,) = doc["workloads"]
    assert w["name"] == "onnx:greedy_decoder" and "max_len" in w["title"]
    assert {c["way"] for c in w["cases"]} == {"executor", "prepared", "onnxruntime"}
    assert all(c["agree"] for c in w["cases"]) and len(rows) == 6
    assert {c["param"] for c in w["cases"]} == {2, 8}


def test_if_model_without_a_trip_count(tmp_path):
    code, doc, _ = _bench(tmp_path, "if_on_data")
    assert code == 0 and doc["ok"]
    (w,) = doc["workloads"]
    assert {c["param"] for c in w["cases"]} == {1}
    assert "onnxruntime" in {c["way"] for c in w["cases"]}


def test_bad_onnx_file_is_a_file_error(tmp_path, capsys):
    # the file's fault, not the command line's: exit 1 (not 2), one line, no traceback
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"nope")
    assert main(["bench", "--model", str(bad), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "not an ONNX model" in err and str(bad) in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
