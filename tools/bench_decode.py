"""Decoding workloads of the control-flow suite (see ``nnhal.tools.bench_workloads``).

- ``lstm-decode``: an LSTM (32 units) fed its own hidden state, looping while
  ``t < n AND score < thr`` with ``score += max(h)`` each step (a running
  score, as a decoder's log-probability); ``thr`` is chosen from the numpy
  trajectory halfway between two steps about two thirds through ``n``, so
  the loop exits early with a clear margin and both sides stop at the same
  step.
- ``greedy``: a greedy decoder: ``tok = ARGMAX(FC(h))``, ``h = tanh(FC(h) +
  E[tok])``, token ``t + 1`` written with EQUAL/SELECT into a fixed
  ``[1, 1024]`` buffer (HAL 1.3 WHILE operands must be fully specified), then
  ``tokens = SLICE(buffer, [0, 0], [1, t + 1])``: the tokens output (main
  output 0, dimensions ``[1, 0]``) has a shape known only after the loop, so
  over gRPC the first execution with a too-small buffer gets
  OUTPUT_INSUFFICIENT_SIZE and the client retries.
"""

from __future__ import annotations

import numpy as np
from nnhal.tools.bench_workloads import BOOL8, F32, I32, Arrays, O, T, Workload, _counter

from nnhal.builder import ModelBuilder
from nnhal.types import Model

UNITS = 32
GATES = ("input", "forget", "cell", "output")


def _lstm_layer(seed: int = 11) -> dict:
    rng = np.random.default_rng(seed)
    scale = 1 / np.sqrt(UNITS)
    layer = {}
    for g in GATES:
        layer[f"w_{g}"] = rng.uniform(-scale, scale, (UNITS, UNITS)).astype(np.float32)
        layer[f"r_{g}"] = rng.uniform(-scale, scale, (UNITS, UNITS)).astype(np.float32)
        layer[f"b_{g}"] = rng.uniform(0.0, 0.3, UNITS).astype(np.float32)
    return layer


def _lstm_decode_model(layer: dict) -> Model:
    mb = ModelBuilder()
    cond, body = mb.subgraph(), mb.subgraph()
    state = [(F32, [1, UNITS]), (F32, [1, UNITS]), (F32, [1]), (I32, [1]), (I32, [1]), (F32, [1])]
    _h, _c, score, t, n, thr = (cond.input(*s) for s in state)
    running, low = cond.temporary(BOOL8, [1]), cond.temporary(BOOL8, [1])
    cond.operation(O.LESS, [t, n], [running])
    cond.operation(O.LESS, [score, thr], [low])
    cond.operation(O.LOGICAL_AND, [running, low], [cond.output(BOOL8, [1])])

    h, c, score, t, _n, _thr = (body.input(*s) for s in state)
    h_out, c_out, score_out, t_out = (body.output(*s) for s in state[:4])
    cell = [body.constant(F32, layer[f"w_{g}"]) for g in GATES]
    cell += [body.constant(F32, layer[f"r_{g}"]) for g in GATES]
    cell += [body.no_value(F32) for _ in range(3)]
    cell += [body.constant(F32, layer[f"b_{g}"]) for g in GATES]
    cell += [body.no_value(F32), body.no_value(F32)]
    scalars = [body.constant(T.INT32, 4), body.constant(T.FLOAT32, 0.0)]
    scalars.append(body.constant(T.FLOAT32, 0.0))
    scratch = body.temporary(F32, [1, 4 * UNITS])
    output = body.temporary(F32, [1, UNITS])
    body.operation(O.LSTM, [h, *cell, h, c, *scalars], [scratch, h_out, c_out, output])
    axes, keep = body.constant(I32, [1]), body.constant(T.BOOL, False)
    best = body.temporary(F32, [1])
    body.operation(O.REDUCE_MAX, [h_out, axes, keep], [best])
    body.operation(O.ADD, [score, best, body.constant(T.INT32, 0)], [score_out])
    none = body.constant(T.INT32, 0)
    body.operation(O.ADD, [t, body.constant(I32, [1]), none], [t_out])

    g = mb.main
    h0, n, thr = g.input(F32, [1, UNITS]), g.input(I32, [1]), g.input(F32, [1])
    outs = [g.output(*s) for s in state[:4]]
    g.operation(
        O.WHILE,
        [g.subgraph_ref(cond), g.subgraph_ref(body), h0, g.constant(F32, np.zeros((1, UNITS))),
         g.constant(F32, [0.0]), g.constant(I32, [0]), n, thr],
        outs,
    )  # fmt: skip
    return mb.build()


def lstm_decode() -> Workload:
    layer = _lstm_layer()
    w = np.concatenate([layer[f"w_{g}"] for g in GATES]).T.copy()
    r = np.concatenate([layer[f"r_{g}"] for g in GATES]).T.copy()
    b = np.concatenate([layer[f"b_{g}"] for g in GATES])

    def sigmoid(v):
        return 1 / (1 + np.exp(-v))

    def step(h, c):
        gates = h @ w + h @ r + b
        u = UNITS
        i, f = sigmoid(gates[:, :u]), sigmoid(gates[:, u : 2 * u])
        z, o = np.tanh(gates[:, 2 * u : 3 * u]), sigmoid(gates[:, 3 * u :])
        c = f * c + i * z
        return (o * np.tanh(c)).astype(np.float32), c.astype(np.float32)

    def run(h, n, thr):
        c = np.zeros((1, UNITS), np.float32)
        score, t, scores = np.float32(0.0), 0, []
        while t < n and score < thr:
            h, c = step(h, c)
            score = np.float32(score + h.max())
            scores.append(float(score))
            t += 1
        return h, c, score, t, scores

    def inputs(n: int) -> Arrays:
        h0 = np.random.default_rng(n).uniform(-0.5, 0.5, (1, UNITS)).astype(np.float32)
        *_, scores = run(h0, n, np.inf)
        thr = np.inf
        k = (2 * n) // 3
        if n >= 3 and scores[k] - scores[k - 1] > 1e-3:  # exit after k + 1 iterations
            thr = (scores[k - 1] + scores[k]) / 2
        return [h0, np.array([n], np.int32), np.array([thr], np.float32)]

    def reference(ins: Arrays) -> Arrays:
        h, c, score, t, _ = run(ins[0], int(ins[1][0]), np.float32(ins[2][0]))
        return [h, c, np.array([score], np.float32), np.array([t], np.int32)]

    return Workload(
        "lstm-decode",
        f"LSTM decoding loop ({UNITS} units, fed its own state), exits when sum of max(h) >= thr",
        _lstm_decode_model(layer),
        inputs,
        reference,
        lambda ins, outs: _counter(outs, 3),
        (10, 100),
        rtol=1e-4,
        atol=1e-5,
        extra={"W": w, "R": r, "b": b},
    )


# ---------------------------------------------------------------------------
# greedy decode: an output that grows each iteration
# ---------------------------------------------------------------------------

HIDDEN, VOCAB = 16, 10
#: WHILE operands are fully specified: tokens live in a fixed buffer, sliced after the loop
MAX_TOKENS = 1024


def _greedy_weights(seed: int = 3) -> dict:
    rng = np.random.default_rng(seed)
    return {
        "Wo": rng.uniform(-1, 1, (VOCAB, HIDDEN)).astype(np.float32),
        "bo": rng.uniform(-0.1, 0.1, VOCAB).astype(np.float32),
        "Wh": rng.uniform(-0.5, 0.5, (HIDDEN, HIDDEN)).astype(np.float32),
        "bh": rng.uniform(-0.1, 0.1, HIDDEN).astype(np.float32),
        "E": rng.uniform(-1, 1, (VOCAB, HIDDEN)).astype(np.float32),
    }


def _greedy_model(wts: dict) -> Model:
    mb = ModelBuilder()
    cond, body = mb.subgraph(), mb.subgraph()
    state = [(F32, [1, HIDDEN]), (I32, [1, MAX_TOKENS]), (I32, [1]), (I32, [1])]
    _h, _tokens, t, n = (cond.input(*s) for s in state)
    cond.operation(O.LESS, [t, n], [cond.output(BOOL8, [1])])

    h, tokens, t, _n = (body.input(*s) for s in state)
    h_out, tokens_out, t_out = (body.output(*s) for s in state[:3])
    none = body.constant(T.INT32, 0)
    logits = body.temporary(F32, [1, VOCAB])
    body.operation(
        O.FULLY_CONNECTED,
        [h, body.constant(F32, wts["Wo"]), body.constant(F32, wts["bo"]), none],
        [logits],
    )
    tok = body.temporary(I32, [1])
    body.operation(O.ARGMAX, [logits, body.constant(T.INT32, 1)], [tok])
    emb = body.temporary(F32, [1, HIDDEN])
    body.operation(O.GATHER, [body.constant(F32, wts["E"]), body.constant(T.INT32, 0), tok], [emb])
    pre, mixed = body.temporary(F32, [1, HIDDEN]), body.temporary(F32, [1, HIDDEN])
    body.operation(
        O.FULLY_CONNECTED,
        [h, body.constant(F32, wts["Wh"]), body.constant(F32, wts["bh"]), none],
        [pre],
    )
    body.operation(O.ADD, [pre, emb, none], [mixed])
    body.operation(O.TANH, [mixed], [h_out])
    # tokens[0, t + 1] = tok (position 0 holds the start token)
    slot = body.temporary(BOOL8, [1, MAX_TOKENS])
    at = body.temporary(I32, [1])
    body.operation(O.ADD, [t, body.constant(I32, [1]), none], [at])
    iota = body.constant(I32, np.arange(MAX_TOKENS, dtype=np.int32).reshape(1, -1))
    body.operation(O.EQUAL, [iota, at], [slot])
    wide = body.temporary(I32, [1, MAX_TOKENS])
    body.operation(O.MUL, [body.constant(I32, np.ones((1, MAX_TOKENS), np.int32)), tok, none],
                   [wide])  # fmt: skip
    body.operation(O.SELECT, [slot, wide, tokens], [tokens_out])
    body.operation(O.ADD, [t, body.constant(I32, [1]), none], [t_out])

    g = mb.main
    h0, start, n = g.input(F32, [1, HIDDEN]), g.input(I32, [1, MAX_TOKENS]), g.input(I32, [1])
    h_f, buf, t_f = (
        g.temporary(F32, [1, HIDDEN]),
        g.temporary(I32, [1, MAX_TOKENS]),
        g.temporary(I32, [1]),
    )
    g.operation(
        O.WHILE,
        [g.subgraph_ref(cond), g.subgraph_ref(body), h0, start, g.constant(I32, [0]), n],
        [h_f, buf, t_f],
    )
    # tokens = buf[:, :t + 1]: the output's shape is known only after the loop
    g_none = g.constant(T.INT32, 0)
    count, size = g.temporary(I32, [1]), g.temporary(I32, [2])
    g.operation(O.ADD, [t_f, g.constant(I32, [1]), g_none], [count])
    spread2 = g.temporary(I32, [2])
    g.operation(O.MUL, [count, g.constant(I32, [0, 1]), g_none], [spread2])
    g.operation(O.ADD, [spread2, g.constant(I32, [1, 0]), g_none], [size])  # [1, t + 1]
    tokens = g.output(I32, [1, 0])
    g.operation(O.SLICE, [buf, g.constant(I32, [0, 0]), size], [tokens])
    h_o, t_o = g.output(F32, [1, HIDDEN]), g.output(I32, [1])
    g.operation(O.ADD, [h_f, g.constant(F32, [0.0] * HIDDEN), g_none], [h_o])
    g.operation(O.ADD, [t_f, g.constant(I32, [0]), g_none], [t_o])
    return mb.build()


def greedy() -> Workload:
    wts = _greedy_weights()

    def reference(ins: Arrays) -> Arrays:
        h, tokens, n = ins[0], [int(ins[1][0, 0])], int(ins[2][0])
        for _ in range(n):
            tok = int(np.argmax(h @ wts["Wo"].T + wts["bo"]))
            h = np.tanh(h @ wts["Wh"].T + wts["bh"] + wts["E"][tok])
            tokens.append(tok)
        return [np.array([tokens], np.int32), h, np.array([n], np.int32)]

    def inputs(n: int) -> Arrays:
        if not 0 <= n < MAX_TOKENS:
            raise ValueError(f"greedy: n must be 0..{MAX_TOKENS - 1}, not {n}")
        h0 = np.random.default_rng(n).uniform(-1, 1, (1, HIDDEN)).astype(np.float32)
        return [h0, np.zeros((1, MAX_TOKENS), np.int32), np.array([n], np.int32)]

    return Workload(
        "greedy",
        f"greedy decode (hidden {HIDDEN}, vocabulary {VOCAB}): tokens output [1, n + 1]",
        _greedy_model(wts),
        inputs,
        reference,
        lambda ins, outs: _counter(outs, 2),
        (10, 200),
        rtol=1e-4,
        atol=1e-5,
        extra=wts,
    )
