"""The three control-flow models exported from PyTorch (examples/onnx) import and agree
with ONNX Runtime, on their stored inputs and on inputs that take other paths.

- greedy_decoder: the Loop's condition is data-dependent (it stops at the
  end-of-sequence token); seeds are chosen so some runs stop early and some
  run to max_len, and max_len varies (including 0).
- rnn_loop: the trip count is an input; x[t] is a Gather at the iteration.
- if_on_data: both branches are taken.
"""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from nnhal.importers.onnx import import_onnx
from nnhal.importers.onnx.inputs import load_npz, ort_session
from onnx_exec_helper import execute
from repo_paths import REPO_ROOT

EXAMPLES = REPO_ROOT / "examples" / "onnx"


def _both(name: str, feeds: dict) -> tuple[dict, dict]:
    path = EXAMPLES / f"{name}.onnx"
    result = import_onnx(path)
    assert result.ok, result.unsupported
    got = result.onnx_outputs(execute(result.model, result.nnapi_inputs(feeds)))
    sess = ort_session(path.read_bytes())
    want = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
    return got, want


def _agree(got: dict, want: dict) -> None:
    assert set(got) == set(want)
    for k, w in want.items():
        assert got[k].shape == w.shape, k
        assert got[k].dtype == w.dtype, k
        np.testing.assert_allclose(got[k], w, rtol=1e-4, atol=1e-5, err_msg=k)


@pytest.mark.parametrize("name", ["greedy_decoder", "rnn_loop", "if_on_data"])
def test_stored_inputs_agree(name):
    result = import_onnx(EXAMPLES / f"{name}.onnx")
    feeds = load_npz(EXAMPLES / f"{name}.npz", result)
    _agree(*_both(name, feeds))


def test_greedy_decoder_stops_on_data():
    rng = np.random.default_rng(0)
    steps_seen = set()
    for k in range(12):
        h0 = rng.standard_normal((1, 16)).astype(np.float32) * (0.5 + k / 4)
        for max_len in (0, 3, 20):
            got, want = _both("greedy_decoder", {"h0": h0, "max_len": np.array(max_len)})
            _agree(got, want)
            steps_seen.add((int(want["steps"][0]), max_len))
    stopped_early = {s for s, m in steps_seen if s < m}
    ran_out = {s for s, m in steps_seen if s == m and m > 0}
    assert stopped_early and ran_out, steps_seen  # both exits of the loop were exercised


def test_rnn_loop_trip_counts():
    result = import_onnx(EXAMPLES / "rnn_loop.onnx")
    feeds = load_npz(EXAMPLES / "rnn_loop.npz", result)
    for steps in (0, 1, 7, 64):
        _agree(*_both("rnn_loop", {**feeds, "steps": np.array(steps)}))


def test_if_on_data_takes_both_branches():
    base = np.linspace(-1, 1, 16, dtype=np.float32).reshape(1, 16)
    for x in (base + 0.5, base - 0.5):
        got, want = _both("if_on_data", {"x": x})
        _agree(got, want)
    assert float((base + 0.5).sum()) > 0 > float((base - 0.5).sum())


def test_imports_map_loops_to_while_and_ifs_to_if():
    ops = import_onnx(EXAMPLES / "greedy_decoder.onnx").summary()["operations"]
    assert ops["WHILE"] == 1 and ops["IF"] == 1
    assert import_onnx(EXAMPLES / "rnn_loop.onnx").summary()["operations"]["WHILE"] == 1
    assert import_onnx(EXAMPLES / "if_on_data.onnx").summary()["operations"]["IF"] == 1
