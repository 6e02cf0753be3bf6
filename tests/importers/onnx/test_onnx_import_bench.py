"""``nnhal bench --model MODEL.onnx``: nnhal and onnxruntime side by side, outputs compared."""

from __future__ import annotations

import csv
import json

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from nnhal.tools.cli import main
from repo_paths import REPO_ROOT

EXAMPLES = REPO_ROOT / "examples" / "onnx"


def _bench(tmp_path, name, *extra):
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


def test_if_model_without_a_trip_count(tmp_path):
    code, doc, _ = _bench(tmp_path, "if_on_data")
    assert code == 0 and doc["ok"]
    (w,) = doc["workloads"]
    assert {c["param"] for c in w["cases"]} == {1}
    assert "onnxruntime" in {c["way"] for c in w["cases"]}


def test_bad_onnx_file_is_a_usage_error(tmp_path, capsys):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"nope")
    with pytest.raises(SystemExit) as exc:
        main(["bench", "--model", str(bad), "--no-progress"])
    assert exc.value.code == 2
    assert "not an ONNX model" in capsys.readouterr().err
