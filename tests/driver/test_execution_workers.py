"""Executions in worker processes (create_server(execution_workers=N), nnhal serve --workers):
the same answers as a server that runs them itself, clients in parallel, a dead worker replaced."""

from __future__ import annotations

import os
import signal
import threading

import numpy as np
import pytest
from nnhal.driver.device import Device
from nnhal.driver.server import create_server
from nnhal.tools.bench import STATE0, fibonacci_while_model
from test_service_control_flow import _infinite_loop_model
from validation_models import add_model

from nnhal.client import connect
from nnhal.errors import GeneralFailure, HalError

pytestmark = pytest.mark.slow  # worker processes start a fresh interpreter each


@pytest.fixture(scope="module")
def pair():
    """A client of a server with two execution workers, and one of a plain server."""
    servers, clients = [], []
    for workers in (2, 0):
        server, address = create_server(Device(), "127.0.0.1:0", execution_workers=workers)
        servers.append(server)
        clients.append(connect(address, timeout=30.0))
    yield clients
    for client in clients:
        client.close()
    for server in servers:
        server.stop(None).wait()


def _outcome(client, model, inputs, **kw):
    prepared = client.prepareModel_1_3(model)
    try:
        result = prepared.execute(inputs, **kw)
        return "ok", [o.tolist() for o in result.outputs]
    except HalError as exc:
        return exc.status.name, exc.message
    finally:
        prepared.release()


@pytest.mark.parametrize(
    "case",
    ["add", "fibonacci", "loop_timeout", "deadline_passed", "wrong_input_length"],
)
def test_workers_answer_as_the_server_itself(pair, case) -> None:
    x = np.array([1.5, -2.0], np.float32)
    cases = {
        "add": (add_model(), [x, x], {}),
        "fibonacci": (fibonacci_while_model(), [STATE0, np.array([7], np.int32)], {}),
        "loop_timeout": (
            _infinite_loop_model(),
            [np.array([1.0], np.float32), np.array([0.0], np.float32)],
            {"loop_timeout_ns": 20_000_000},
        ),
        "deadline_passed": (add_model(), [x, x], {"deadline_ns": 1}),
        "wrong_input_length": (add_model(dims=(2,)), [x[:1], x], {}),
    }
    model, inputs, kw = cases[case]
    pooled, plain = (_outcome(client, model, inputs, **kw) for client in pair)
    assert pooled == plain
    if case in ("add", "fibonacci"):
        assert pooled[0] == "ok"
    else:
        assert pooled[0] != "ok"


def test_clients_execute_in_parallel_and_get_their_own_results(pair) -> None:
    client = pair[0]
    prepared = client.prepareModel_1_3(add_model())
    failures: list[str] = []

    def work(k: int) -> None:
        x = np.full(2, k, np.float32)
        for _ in range(20):
            out = prepared.execute([x, x]).outputs[0]
            if out.tolist() != [2.0 * k, 2.0 * k]:
                failures.append(f"client {k}: {out.tolist()}")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not failures
    prepared.release()


def test_a_dead_worker_fails_its_execution_and_is_replaced() -> None:
    server, address = create_server(Device(), "127.0.0.1:0", execution_workers=1)
    client = connect(address, timeout=30.0)
    try:
        prepared = client.prepareModel_1_3(add_model())
        x = np.ones(2, np.float32)
        assert prepared.execute([x, x]).outputs[0].tolist() == [2.0, 2.0]
        (state,) = server.states.values()
        (worker,) = state.pool._workers
        os.kill(worker.process.pid, signal.SIGKILL)
        worker.process.wait(timeout=30)
        with pytest.raises(GeneralFailure, match="execution worker"):
            prepared.execute([x, x])
        # a new worker took its place, and compiles the model again
        assert prepared.execute([x, x]).outputs[0].tolist() == [2.0, 2.0]
    finally:
        client.close()
        server.stop(None).wait()


def test_serve_takes_workers() -> None:
    from nnhal.tools.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["serve"]).workers == 0
    assert parser.parse_args(["serve", "--workers", "3"]).workers == 3
    assert parser.parse_args(["serve", "--workers", "auto"]).workers == (os.cpu_count() or 1)
    with pytest.raises(SystemExit):
        parser.parse_args(["serve", "--workers", "-1"])


def test_a_worker_keeps_compiled_code_per_prepared_model(monkeypatch):
    """The worker is not told the client: its compiled code is kept per prepared model,
    so one prepared model's first execution is not faster for another's having run;
    also the code generated at the second execution, outside the compilation's scope
    (the tiered executor)."""
    from nnhal.driver.executor import code_cache
    from nnhal.driver.workers import compile_for_worker

    monkeypatch.setenv("NNHAL_EXECUTOR", "tiered")
    model = fibonacci_while_model()
    code_cache.clear()
    try:
        first = compile_for_worker(1, model, None)
        again = compile_for_worker(2, model, None)
        assert code_cache.owner() is None  # the scope ends with the compilation
        n = np.array([5], np.int32)
        for _ in range(2):  # interpreted, then generated
            want = first.run([STATE0.copy(), n])
            for a, b in zip(again.run([STATE0.copy(), n]), want):
                np.testing.assert_array_equal(a, b)
        owners = {owner for owner, _ in code_cache._codes}
        assert owners == {"prepared:1", "prepared:2"}
    finally:
        code_cache.clear()
