"""``nnhal bench control-flow``: what a WHILE iteration costs beyond the numpy work.

The model (built with ``nnhal.builder``)::

    main:  WHILE(cond, body, state0 [1,2] f32 (input), i0 = [0] i32 (constant),
                 n [1] i32 (input)) -> state [1,2], i [1]
    cond:  LESS(i, n) -> TENSOR_BOOL8 [1]
    body:  state' = FULLY_CONNECTED(state, W [2,2], b = [0, 0], activation 0)
           i'     = ADD(i, [1], activation 0)

``W = [[0, 1], [1, 1]] / phi`` (phi the golden ratio) maps ``(a, b)`` to
``(b, a + b) / phi``: from ``state0 = (0, 1)`` the state after ``i``
iterations is ``(F(i), F(i+1)) / phi**i``. Plain Fibonacci overflows float32
after ~185 iterations (and ``0 * inf`` then gives NaN); the scaled form stays
finite for any ``n`` (its eigenvalues are 1 and -1/phi**2), so outputs can be
compared for every ``n`` while the arithmetic per iteration is the same.

Each ``n`` is timed four ways in this process, against the same numpy work
written by hand (``while i < n: state = state @ W.T + b; i = i + 1`` on numpy
arrays):

- ``executor``: ``nnhal.driver.executor`` ``CompiledModel.run`` directly;
- ``prepared``: the driver's ``PreparedModel.execute`` (request decoding,
  validation, output writing);
- ``grpc``: ``nnhal.client`` against an in-process server (the full path).

Two warm-up runs each (a model's first execution is interpreted, its second
generates the code the rounds run), then ``repeat`` interleaved rounds (every way once per
round, so drift hits all alike); the figure is the median run time divided by
``n`` (per-call overhead included, which dominates at small ``n``).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from nnhal.builder import ModelBuilder
from nnhal.types import (
    LOOP_TIMEOUT_MAXIMUM_NS,
    DataLocation,
    InlineMemory,
    Model,
    OperandType,
    OperationType,
    Request,
    RequestArgument,
)

PHI = (1 + 5**0.5) / 2
W = (np.array([[0.0, 1.0], [1.0, 1.0]]) / PHI).astype(np.float32)
B = np.zeros(2, np.float32)
STATE0 = np.array([[0.0, 1.0]], np.float32)

F32 = OperandType.TENSOR_FLOAT32
I32 = OperandType.TENSOR_INT32
BOOL8 = OperandType.TENSOR_BOOL8


def fibonacci_while_model() -> Model:
    """The benchmark model: inputs (state0 [1,2], n [1]); outputs (state [1,2], i [1])."""
    mb = ModelBuilder()
    cond, body = mb.subgraph(), mb.subgraph()

    c_state, c_i, c_n = cond.input(F32, [1, 2]), cond.input(I32, [1]), cond.input(I32, [1])
    c_out = cond.output(BOOL8, [1])
    cond.operation(OperationType.LESS, [c_i, c_n], [c_out])
    del c_state  # the condition only looks at the counter

    b_state, b_i, _b_n = body.input(F32, [1, 2]), body.input(I32, [1]), body.input(I32, [1])
    b_state_out, b_i_out = body.output(F32, [1, 2]), body.output(I32, [1])
    w = body.constant(F32, W)
    b = body.constant(F32, B)
    act = body.constant(OperandType.INT32, 0)
    one = body.constant(I32, [1])
    body.operation(OperationType.FULLY_CONNECTED, [b_state, w, b, act], [b_state_out])
    body.operation(OperationType.ADD, [b_i, one, act], [b_i_out])

    g = mb.main
    state0 = g.input(F32, [1, 2])
    n = g.input(I32, [1])
    i0 = g.constant(I32, [0])
    state, i = g.output(F32, [1, 2]), g.output(I32, [1])
    g.operation(
        OperationType.WHILE, [g.subgraph_ref(cond), g.subgraph_ref(body), state0, i0, n], [state, i]
    )
    return mb.build()


def numpy_loop(n: int) -> tuple[np.ndarray, np.ndarray]:
    """The same arithmetic by hand, on numpy arrays, as an app would write it."""
    state = STATE0.copy()
    i = np.array([0], np.int32)
    n_arr = np.array([n], np.int32)
    one = np.array([1], np.int32)
    w_t = W.T
    b = B
    while i < n_arr:
        state = state @ w_t + b
        i = i + one
    return state, i


def fibonacci_request(n: int) -> Request:
    """The Fibonacci WHILE's request for ``n`` iterations, inline: pool 0 holds the
    inputs (state, n), pool 1 the 12 bytes of outputs."""
    inputs = STATE0.tobytes() + np.array([n], np.int32).tobytes()
    return Request(
        inputs=(
            RequestArgument(location=DataLocation(0, 0, 8)),
            RequestArgument(location=DataLocation(0, 8, 4)),
        ),
        outputs=(
            RequestArgument(location=DataLocation(1, 0, 8)),
            RequestArgument(location=DataLocation(1, 8, 4)),
        ),
        pools=(InlineMemory(inputs), InlineMemory(bytes(12))),
    )


def _prepared_runner(prepared: Any, n: int) -> Callable[[], list[np.ndarray]]:
    """``PreparedModel.execute`` with an inline request: pool 0 inputs, pool 1 outputs."""
    inputs = STATE0.tobytes() + np.array([n], np.int32).tobytes()
    request = fibonacci_request(n)
    in_view = memoryview(bytearray(inputs))
    out_buf = bytearray(12)
    views = [in_view, memoryview(out_buf)]

    def run() -> list[np.ndarray]:
        prepared.execute(request, views, loop_timeout_ns=LOOP_TIMEOUT_MAXIMUM_NS)
        return [
            np.frombuffer(out_buf, np.float32, 2, 0).reshape(1, 2).copy(),
            np.frombuffer(out_buf, np.int32, 1, 8).copy(),
        ]

    return run


def _time(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter_ns()
    out = fn()
    return (time.perf_counter_ns() - t0) / 1e3, out  # µs


def _agree(ref: tuple[np.ndarray, np.ndarray], got: Sequence[np.ndarray]) -> str | None:
    state, i = (np.asarray(x) for x in got[:2])
    if i.reshape(-1).tolist() != ref[1].reshape(-1).tolist():
        return f"counter {i.tolist()} != {ref[1].tolist()}"
    if state.shape != ref[0].shape or not np.allclose(state, ref[0], rtol=1e-5, atol=1e-6):
        return f"state {state.tolist()} != {ref[0].tolist()}"
    return None


def run_control_flow_bench(
    ns: Sequence[int] = (10, 1_000, 100_000),
    repeat: int = 5,
    json_path: str | Path | None = None,
    grpc: bool = True,
    out: Any = None,
) -> bool:
    """Run the benchmark, print the table; returns False when any output disagrees."""
    from nnhal.driver.device import Device
    from nnhal.driver.executor import compile_model

    out = out or sys.stdout
    model = fibonacci_while_model()
    try:
        from nnhal.validation import validate_model

        validate_model(model)
    except ImportError:  # pragma: no cover - validation is part of the package
        pass
    compiled = compile_model(model)
    device = Device()
    prepared = device.prepareModel_1_3(model)

    server = client = remote = None
    if grpc:
        from nnhal.driver.service import create_server

        from nnhal.client import connect

        server, address = create_server(device, "127.0.0.1:0")
        client = connect(address)
        remote = client.prepareModel_1_3(model)

    rows = []
    ok = True
    try:
        for n in ns:
            n_in = np.array([n], np.int32)
            ways: dict[str, Callable[[], Any]] = {
                "numpy": lambda n=n: numpy_loop(n),
                "executor": lambda n_in=n_in: compiled.run(
                    [STATE0.copy(), n_in], loop_timeout_ns=LOOP_TIMEOUT_MAXIMUM_NS
                ),
                "prepared": _prepared_runner(prepared, n),
            }
            if remote is not None:
                ways["grpc"] = lambda n_in=n_in: (
                    remote.execute([STATE0, n_in], loop_timeout_ns=LOOP_TIMEOUT_MAXIMUM_NS).outputs
                )
            times: dict[str, list[float]] = {k: [] for k in ways}
            ref = numpy_loop(n)
            problems = []
            for k, fn in ways.items():  # warm-up, and the outputs must agree
                fn()  # a model's first execution is interpreted, the second generates code
                _, got = _time(fn)
                why = _agree(ref, got)
                if why:
                    problems.append(f"{k}: {why}")
            for _ in range(repeat):
                for k, fn in ways.items():
                    times[k].append(_time(fn)[0])
            med = {k: statistics.median(v) for k, v in times.items()}
            per_iter = {k: v / max(n, 1) for k, v in med.items()}
            rows.append(
                {
                    "n": n,
                    "median_us": med,
                    "per_iteration_us": per_iter,
                    "ratio_to_numpy": {k: med[k] / med["numpy"] for k in med},
                    "outputs_agree": not problems,
                    "problems": problems,
                }
            )
            ok = ok and not problems
    finally:
        if remote is not None:
            remote.release()
        if client is not None:
            client.close()
        if server is not None:
            server.stop(None)

    _print_table(rows, repeat, out)
    if json_path:
        doc = {
            "benchmark": "control-flow",
            "model": "Fibonacci WHILE: FULLY_CONNECTED [1,2]x[2,2]^T, ADD counter, LESS(i, n)",
            "repeat": repeat,
            "rows": rows,
        }
        Path(json_path).write_text(json.dumps(doc, indent=1), encoding="utf-8")
    return ok


def _print_table(rows: list[dict], repeat: int, out: Any) -> None:
    if not rows:
        return
    ways = list(rows[0]["median_us"])
    print(
        f"control-flow: Fibonacci WHILE (FULLY_CONNECTED + ADD, LESS condition); "
        f"median of {repeat} interleaved rounds; µs per iteration (ratio to numpy)",
        file=out,
    )
    header = f"{'n':>8}  " + "  ".join(f"{w:>18}" for w in ways) + "  outputs"
    print(header, file=out)
    for r in rows:
        cells = []
        for w in ways:
            per = r["per_iteration_us"][w]
            cells.append(
                f"{per:>10.3f}" + ("" if w == "numpy" else f" ({r['ratio_to_numpy'][w]:.2f}x)")
            )
        agree = "agree" if r["outputs_agree"] else "DISAGREE: " + "; ".join(r["problems"])
        print(f"{r['n']:>8}  " + "  ".join(f"{c:>18}" for c in cells) + f"  {agree}", file=out)
    out.flush()
