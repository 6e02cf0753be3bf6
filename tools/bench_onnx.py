"""onnxruntime peers: an ONNX Loop/If model per workload, built with ``onnx.helper``.

Optional (``pip install 'nnhal[bench]'``: onnx + onnxruntime). Each builder
returns an ``OnnxPeer``: the serialized model, how to feed the workload's
main inputs, and which workload outputs the ONNX outputs correspond to (so
the same numpy check applies). ``onnx_workload`` makes a workload of a user's ONNX file
(``nnhal bench --model MODEL.onnx``). The models are the idiomatic ONNX form of
the same computation: ``Loop`` with the trip count ``M`` (plus a condition
where the workload exits early), ``If`` for branches, the iteration counter
carried as int32 like the NNAPI model's. Sessions run on the CPU provider
with one intra-op and one inter-op thread (the executor runs one loop
iteration at a time as well).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np


def available() -> str | None:
    """None when onnx and onnxruntime import, else why not."""
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError as exc:
        return f"onnxruntime peer skipped: {exc} (pip install 'nnhal[bench]')"
    return None


@dataclass
class OnnxPeer:
    model: bytes
    feed: Callable[[list[np.ndarray]], dict]
    outputs: list[int]  # workload output position of each ONNX output
    #: ONNX outputs -> the NNAPI model's form (int32, [1] for rank 0); None: as they are
    post: Callable[[list], list] | None = None


def session(peer: OnnxPeer):
    import onnxruntime as ort
    from nnhal.tools.bench_threads import ort_threads

    options = ort.SessionOptions()
    options.intra_op_num_threads = ort_threads()  # the run's --threads (0 = ort's default)
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # errors only: no shape-mismatch warnings on stderr
    return ort.InferenceSession(peer.model, options, providers=["CPUExecutionProvider"])


def runner(peer: OnnxPeer, sess, inputs: list[np.ndarray]) -> Callable[[], list]:
    """A callable giving the outputs in workload positions (others None)."""
    feed = peer.feed(inputs)
    width = max(peer.outputs) + 1

    def run() -> list:
        got = sess.run(None, feed)
        if peer.post is not None:
            got = peer.post(got)
        outs: list = [None] * width
        for position, value in zip(peer.outputs, got):
            outs[position] = value
        return outs

    return run


# ---------------------------------------------------------------------------


def _h():
    from onnx import TensorProto, helper, numpy_helper

    return helper, TensorProto, numpy_helper


def _model(graph) -> bytes:
    import onnx

    helper, _, _ = _h()
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


def _vi(name, elem, shape):
    helper, _, _ = _h()
    return helper.make_tensor_value_info(name, elem, shape)


def _trip(n: np.ndarray) -> np.ndarray:
    return np.array(int(np.asarray(n).reshape(-1)[0]), np.int64)


def _counter_nodes(helper, prefix: str = "") -> list:
    return [helper.make_node("Add", [f"{prefix}i_in", "one32"], [f"{prefix}i_out"])]


def fibonacci(extra: dict) -> OnnxPeer:
    helper, TP, nh = _h()
    body = helper.make_graph(
        [
            helper.make_node("MatMul", ["s_in", "Wt"], ["s_out"]),
            helper.make_node("Identity", ["c_in"], ["c_out"]),
            *_counter_nodes(helper),
        ],
        "body",
        [_vi("it", TP.INT64, []), _vi("c_in", TP.BOOL, []), _vi("s_in", TP.FLOAT, [1, 2]),
         _vi("i_in", TP.INT32, [1])],
        [_vi("c_out", TP.BOOL, []), _vi("s_out", TP.FLOAT, [1, 2]), _vi("i_out", TP.INT32, [1])],
        [nh.from_array(np.ascontiguousarray(extra["W"].T), "Wt"),
         nh.from_array(np.array([1], np.int32), "one32")],
    )  # fmt: skip
    graph = helper.make_graph(
        [helper.make_node("Loop", ["n", "", "s0", "i0"], ["s", "i"], body=body)],
        "fibonacci",
        [_vi("s0", TP.FLOAT, [1, 2]), _vi("n", TP.INT64, [])],
        [_vi("s", TP.FLOAT, [1, 2]), _vi("i", TP.INT32, [1])],
        [nh.from_array(np.array([0], np.int32), "i0")],
    )
    return OnnxPeer(_model(graph), lambda ins: {"s0": ins[0], "n": _trip(ins[1])}, [0, 1])


def nested(extra: dict) -> OnnxPeer:
    helper, TP, nh = _h()
    inner = helper.make_graph(
        [helper.make_node("Mul", ["pw_in", "f"], ["pw_out"]),
         helper.make_node("Identity", ["ic_in"], ["ic_out"])],
        "inner",
        [_vi("jt", TP.INT64, []), _vi("ic_in", TP.BOOL, []), _vi("pw_in", TP.FLOAT, [1])],
        [_vi("ic_out", TP.BOOL, []), _vi("pw_out", TP.FLOAT, [1])],
    )  # fmt: skip
    outer = helper.make_graph(
        [
            helper.make_node("Cast", ["i_in"], ["f"], to=TP.FLOAT),
            helper.make_node("Loop", ["p", "", "one_f"], ["pw"], body=inner),
            helper.make_node("Add", ["t_in", "pw"], ["t_out"]),
            helper.make_node("Identity", ["c_in"], ["c_out"]),
            *_counter_nodes(helper),
        ],
        "outer",
        [_vi("it", TP.INT64, []), _vi("c_in", TP.BOOL, []), _vi("t_in", TP.FLOAT, [1]),
         _vi("i_in", TP.INT32, [1])],
        [_vi("c_out", TP.BOOL, []), _vi("t_out", TP.FLOAT, [1]), _vi("i_out", TP.INT32, [1])],
        [nh.from_array(np.array([1.0], np.float32), "one_f"),
         nh.from_array(np.array([1], np.int32), "one32")],
    )  # fmt: skip
    graph = helper.make_graph(
        [helper.make_node("Loop", ["n", "", "t0", "i0"], ["t", "i"], body=outer)],
        "nested",
        [_vi("n", TP.INT64, []), _vi("p", TP.INT64, [])],
        [_vi("t", TP.FLOAT, [1]), _vi("i", TP.INT32, [1])],
        [nh.from_array(np.array([0.0], np.float32), "t0"),
         nh.from_array(np.array([0], np.int32), "i0")],
    )  # fmt: skip
    return OnnxPeer(_model(graph), lambda ins: {"n": _trip(ins[0]), "p": _trip(ins[1])}, [0, 1])


def parity(extra: dict) -> OnnxPeer:
    helper, TP, nh = _h()
    then_g = helper.make_graph(
        [helper.make_node("Add", ["s_in", "one_f"], ["s_then"])],
        "then",
        [],
        [_vi("s_then", TP.FLOAT, [1, 2])],
    )
    else_g = helper.make_graph(
        [helper.make_node("Mul", ["s_in", "half"], ["s_else"])],
        "else",
        [],
        [_vi("s_else", TP.FLOAT, [1, 2])],
    )
    body = helper.make_graph(
        [
            helper.make_node("Mod", ["i_in", "two32"], ["rem"]),
            helper.make_node("Equal", ["rem", "zero32"], ["even"]),
            helper.make_node("If", ["even"], ["s_out"], then_branch=then_g, else_branch=else_g),
            helper.make_node("Identity", ["c_in"], ["c_out"]),
            *_counter_nodes(helper),
        ],
        "body",
        [_vi("it", TP.INT64, []), _vi("c_in", TP.BOOL, []), _vi("s_in", TP.FLOAT, [1, 2]),
         _vi("i_in", TP.INT32, [1])],
        [_vi("c_out", TP.BOOL, []), _vi("s_out", TP.FLOAT, [1, 2]), _vi("i_out", TP.INT32, [1])],
        [nh.from_array(np.array([1.0, 1.0], np.float32), "one_f"),
         nh.from_array(np.array([0.5, 0.5], np.float32), "half"),
         nh.from_array(np.array([2], np.int32), "two32"),
         nh.from_array(np.array([0], np.int32), "zero32"),
         nh.from_array(np.array([1], np.int32), "one32")],
    )  # fmt: skip
    graph = helper.make_graph(
        [helper.make_node("Loop", ["n", "", "s0", "i0"], ["s", "i"], body=body)],
        "parity",
        [_vi("s0", TP.FLOAT, [1, 2]), _vi("n", TP.INT64, [])],
        [_vi("s", TP.FLOAT, [1, 2]), _vi("i", TP.INT32, [1])],
        [nh.from_array(np.array([0], np.int32), "i0")],
    )
    return OnnxPeer(_model(graph), lambda ins: {"s0": ins[0], "n": _trip(ins[1])}, [0, 1])


def rnn(extra: dict) -> OnnxPeer:
    helper, TP, nh = _h()
    state, width = extra["R"].shape[0], extra["W"].shape[1]
    body = helper.make_graph(
        [
            helper.make_node("Unsqueeze", ["it", "axis0"], ["idx"]),
            helper.make_node("Gather", ["X", "idx"], ["x"], axis=0),
            helper.make_node("Gemm", ["x", "W", "b"], ["xw"], transB=1),
            helper.make_node("MatMul", ["h_in", "Rt"], ["hr"]),
            helper.make_node("Add", ["xw", "hr"], ["pre"]),
            helper.make_node("Tanh", ["pre"], ["h_out"]),
            helper.make_node("Identity", ["c_in"], ["c_out"]),
            *_counter_nodes(helper),
        ],
        "body",
        [_vi("it", TP.INT64, []), _vi("c_in", TP.BOOL, []), _vi("h_in", TP.FLOAT, [1, state]),
         _vi("i_in", TP.INT32, [1])],
        [_vi("c_out", TP.BOOL, []), _vi("h_out", TP.FLOAT, [1, state]),
         _vi("i_out", TP.INT32, [1])],
        [nh.from_array(extra["W"], "W"), nh.from_array(extra["b"], "b"),
         nh.from_array(np.ascontiguousarray(extra["R"].T), "Rt"),
         nh.from_array(np.array([0], np.int64), "axis0"),
         nh.from_array(np.array([1], np.int32), "one32")],
    )  # fmt: skip
    graph = helper.make_graph(
        [helper.make_node("Loop", ["n", "", "h0", "i0"], ["h", "i"], body=body)],
        "rnn",
        [_vi("h0", TP.FLOAT, [1, state]), _vi("X", TP.FLOAT, [None, width]),
         _vi("n", TP.INT64, [])],
        [_vi("h", TP.FLOAT, [1, state]), _vi("i", TP.INT32, [1])],
        [nh.from_array(np.array([0], np.int32), "i0")],
    )  # fmt: skip
    return OnnxPeer(
        _model(graph), lambda ins: {"h0": ins[0], "X": ins[1], "n": _trip(ins[2])}, [0, 1]
    )


def greedy(extra: dict) -> OnnxPeer:
    helper, TP, nh = _h()
    hidden = extra["Wh"].shape[0]
    body = helper.make_graph(
        [
            helper.make_node("Gemm", ["h_in", "Wo", "bo"], ["logits"], transB=1),
            helper.make_node("ArgMax", ["logits"], ["tok64"], axis=1, keepdims=0),
            helper.make_node("Gather", ["E", "tok64"], ["emb"], axis=0),
            helper.make_node("Gemm", ["h_in", "Wh", "bh"], ["pre"], transB=1),
            helper.make_node("Add", ["pre", "emb"], ["mixed"]),
            helper.make_node("Tanh", ["mixed"], ["h_out"]),
            helper.make_node("Cast", ["tok64"], ["tok"], to=TP.INT32),
            helper.make_node("Identity", ["c_in"], ["c_out"]),
            *_counter_nodes(helper),
        ],
        "body",
        [_vi("it", TP.INT64, []), _vi("c_in", TP.BOOL, []), _vi("h_in", TP.FLOAT, [1, hidden]),
         _vi("i_in", TP.INT32, [1])],
        [_vi("c_out", TP.BOOL, []), _vi("h_out", TP.FLOAT, [1, hidden]),
         _vi("i_out", TP.INT32, [1]), _vi("tok", TP.INT32, [1])],
        [nh.from_array(extra[k], k) for k in ("Wo", "bo", "Wh", "bh", "E")]
        + [nh.from_array(np.array([1], np.int32), "one32")],
    )  # fmt: skip
    graph = helper.make_graph(
        [
            helper.make_node("Loop", ["n", "", "h0", "i0"], ["h", "i", "toks"], body=body),
            helper.make_node("Reshape", ["toks", "row"], ["row_toks"]),
            helper.make_node("Concat", ["start", "row_toks"], ["tokens"], axis=1),
        ],
        "greedy",
        [_vi("h0", TP.FLOAT, [1, hidden]), _vi("start", TP.INT32, [1, 1]),
         _vi("n", TP.INT64, [])],
        [_vi("tokens", TP.INT32, [1, None]), _vi("h", TP.FLOAT, [1, hidden]),
         _vi("i", TP.INT32, [1])],
        [nh.from_array(np.array([0], np.int32), "i0"),
         nh.from_array(np.array([1, -1], np.int64), "row")],
    )  # fmt: skip
    return OnnxPeer(
        _model(graph),
        lambda ins: {"h0": ins[0], "start": ins[1][:, :1].copy(), "n": _trip(ins[2])},
        [0, 1, 2],
    )


def lstm_decode(extra: dict) -> OnnxPeer:
    helper, TP, nh = _h()
    w, r, b = extra["W"], extra["R"], extra["b"]  # [U, 4U], [U, 4U], [4U]; gates i, f, z, o
    u = w.shape[0]
    vec = [1, u]
    body = helper.make_graph(
        [
            helper.make_node("MatMul", ["h_in", "W"], ["xw"]),
            helper.make_node("MatMul", ["h_in", "R"], ["hr"]),
            helper.make_node("Add", ["xw", "hr"], ["g0"]),
            helper.make_node("Add", ["g0", "b"], ["g"]),
            helper.make_node("Split", ["g", "sizes"], ["gi", "gf", "gz", "go"], axis=1),
            helper.make_node("Sigmoid", ["gi"], ["i"]),
            helper.make_node("Sigmoid", ["gf"], ["f"]),
            helper.make_node("Tanh", ["gz"], ["z"]),
            helper.make_node("Sigmoid", ["go"], ["o"]),
            helper.make_node("Mul", ["f", "c_in"], ["fc"]),
            helper.make_node("Mul", ["i", "z"], ["iz"]),
            helper.make_node("Add", ["fc", "iz"], ["c_out"]),
            helper.make_node("Tanh", ["c_out"], ["tc"]),
            helper.make_node("Mul", ["o", "tc"], ["h_out"]),
            helper.make_node("ReduceMax", ["h_out"], ["m"], axes=[1], keepdims=0),
            helper.make_node("Add", ["s_in", "m"], ["s_out"]),
            helper.make_node("Less", ["s_out", "thr"], ["low"]),
            helper.make_node("Squeeze", ["low", "axis0"], ["c_next"]),
            *_counter_nodes(helper),
        ],
        "body",
        [_vi("it", TP.INT64, []), _vi("c_cond", TP.BOOL, []), _vi("h_in", TP.FLOAT, vec),
         _vi("c_in", TP.FLOAT, vec), _vi("s_in", TP.FLOAT, [1]), _vi("i_in", TP.INT32, [1])],
        [_vi("c_next", TP.BOOL, []), _vi("h_out", TP.FLOAT, vec), _vi("c_out", TP.FLOAT, vec),
         _vi("s_out", TP.FLOAT, [1]), _vi("i_out", TP.INT32, [1])],
        [nh.from_array(w, "W"), nh.from_array(r, "R"), nh.from_array(b, "b"),
         nh.from_array(np.array([u] * 4, np.int64), "sizes"),
         nh.from_array(np.array([0], np.int64), "axis0"),
         nh.from_array(np.array([1], np.int32), "one32")],
    )  # fmt: skip
    graph = helper.make_graph(
        [
            helper.make_node("Less", ["s0", "thr"], ["low0"]),
            helper.make_node("Squeeze", ["low0", "axis0m"], ["go0"]),
            helper.make_node(
                "Loop", ["n", "go0", "h0", "c0", "s0", "i0"], ["h", "c", "s", "i"], body=body
            ),
        ],
        "lstm_decode",
        [_vi("h0", TP.FLOAT, vec), _vi("n", TP.INT64, []), _vi("thr", TP.FLOAT, [1])],
        [_vi("h", TP.FLOAT, vec), _vi("c", TP.FLOAT, vec), _vi("s", TP.FLOAT, [1]),
         _vi("i", TP.INT32, [1])],
        [nh.from_array(np.zeros((1, u), np.float32), "c0"),
         nh.from_array(np.array([0.0], np.float32), "s0"),
         nh.from_array(np.array([0], np.int32), "i0"),
         nh.from_array(np.array([0], np.int64), "axis0m")],
    )  # fmt: skip
    return OnnxPeer(
        _model(graph),
        lambda ins: {"h0": ins[0], "n": _trip(ins[1]), "thr": ins[2]},
        [0, 1, 2, 3],
    )


#: workload name -> builder
BUILDERS: dict[str, Callable[[dict], OnnxPeer]] = {
    "fibonacci": fibonacci,
    "nested": nested,
    "parity": parity,
    "rnn": rnn,
    "greedy": greedy,
    "lstm-decode": lstm_decode,
}


# ---------------------------------------------------------------------------
# a user's ONNX file: `nnhal bench --model MODEL.onnx [--inputs FILE.npz]`
# ---------------------------------------------------------------------------


def trip_input(model) -> str | None:
    """The graph input that is a Loop's trip count (directly or through Cast/Identity);
    else, in a model with a Loop, its only rank-0 integer input (exporters turn
    ``for i in range(n): ... break`` into a condition on ``n``)."""
    names = {vi.name for vi in model.graph.input}
    alias = {}
    for node in model.graph.node:
        if node.op_type in ("Cast", "Identity") and node.input and node.input[0]:
            alias[node.output[0]] = node.input[0]
    for node in model.graph.node:
        if node.op_type == "Loop" and node.input and node.input[0]:
            name = node.input[0]
            while name in alias:
                name = alias[name]
            if name in names:
                return name
    if not any(node.op_type == "Loop" for node in model.graph.node):
        return None
    scalars = [
        vi.name
        for vi in model.graph.input
        if vi.type.tensor_type.elem_type in (6, 7)  # INT32, INT64
        and vi.type.tensor_type.HasField("shape")
        and not vi.type.tensor_type.shape.dim
    ]
    return scalars[0] if len(scalars) == 1 else None


def onnx_workload(path: str, inputs_npz: str | None = None, trips: list[int] | None = None):
    """A Workload for ``path``: imported to NNAPI, checked against and timed with ORT.

    The ONNX Runtime session is both the reference (its outputs are the
    expected values, for every way) and the ``onnxruntime`` way. When a
    graph input is a Loop trip count, the workload's parameter is that
    input's value (default: half of and the given value, or 8 and 32), so
    the suite's two-point fit gives the per-iteration cost; the iteration
    count used is the trip count (an upper bound when the loop's condition
    ends it early).
    """
    import onnx
    from nnhal.importers.onnx import OnnxImportError, import_onnx
    from nnhal.importers.onnx.inputs import load_npz, random_inputs
    from nnhal.importers.onnx.vectors_out import nnapi_outputs
    from nnhal.tools.bench_workloads import Workload

    try:
        result = import_onnx(path)
    except OnnxImportError as exc:
        raise ValueError(str(exc)) from None
    if not result.ok:
        first = result.unsupported[0]
        raise ValueError(
            f"{path}: {len(result.unsupported)} node(s) without an NNAPI mapping, e.g."
            f" {first.node} ({first.op_type}): {first.reason}"
        )
    try:
        base = load_npz(inputs_npz, result) if inputs_npz else random_inputs(result)
    except OnnxImportError as exc:
        raise ValueError(str(exc)) from None
    data = Path(path).read_bytes()
    trip = trip_input(onnx.load_from_string(data))
    if trip is not None:
        given = int(np.asarray(base[trip]).reshape(-1)[0]) if inputs_npz else 32
        params = tuple(trips or sorted({max(given // 2, 1), max(given, 2)}))
    else:
        params = (1,)
    ports = {p.name: p for p in result.inputs}
    sess = None
    if available() is None:
        sess = session(OnnxPeer(data, lambda ins: {}, []))

    def feeds_for(param: int) -> dict:
        f = dict(base)
        if trip is not None:
            f[trip] = np.asarray(param, ports[trip].dtype).reshape(np.shape(base[trip]))
        return f

    cache: dict[int, list] = {}

    def expected(param: int) -> list | None:
        if sess is None:
            return None
        if param not in cache:
            names = [p.name for p in result.outputs]
            cache[param] = nnapi_outputs(result, sess.run(names, feeds_for(param)))
        return cache[param]

    def model_inputs(param: int) -> list:
        return result.nnapi_inputs(feeds_for(param))

    def reference(ins: list) -> list | None:
        param = _param_of(ins, trip, result)
        return expected(param)

    def iterations(ins: list, _outs: list) -> int:
        return _param_of(ins, trip, result) if trip is not None else 0

    def to_ort(ins: list) -> dict:
        out = {}
        for p, v in zip(result.inputs, ins):
            v = np.asarray(v).astype(p.dtype)
            out[p.name] = v.reshape(()) if p.shape == () else v
        return out

    peer = OnnxPeer(data, to_ort, list(range(len(result.outputs))),
                    post=lambda vals: nnapi_outputs(result, vals))  # fmt: skip
    name = Path(path).stem
    return Workload(
        f"onnx:{name}",
        f"ONNX file {path}" + (f" (trip count input {trip!r})" if trip else ""),
        result.model,
        model_inputs,
        reference if sess is not None else None,
        iterations,
        params,
        rtol=1e-3,
        atol=1e-4,
        extra={"onnx_peer": peer},
        timed_reference=False,
    )


def _param_of(ins: list, trip: str | None, result) -> int:
    if trip is None:
        return 1
    k = [p.name for p in result.inputs].index(trip)
    return int(np.asarray(ins[k]).reshape(-1)[0])
