"""One ``nnhal stress`` client process: the kinds of calls, their expected statuses, the loop.

A *kind* is one action a client performs against the server (usually one HAL call,
sometimes a short sequence: a burst, a fenced execution waiting for a client fence,
a driver buffer's allocate / execute / copyTo / release). ``KINDS`` names, for each,
the statuses it may end with; anything else is *unexpected* and fails the run. An
action's outcome is the first non-NONE status of its calls, ``WRONG_OUTPUT`` when
every call succeeded but the numbers are wrong, or ``EXCEPTION`` when the client
itself failed (a transport error is DEVICE_UNAVAILABLE, as everywhere in nnhal).

``client_main`` is what each spawned process runs (``nnhal.tools.stress`` starts them): it
connects with its own channel and client session (every call with a gRPC deadline,
``connect_with_deadlines``), prepares the three shared models, waits for the other
clients (a barrier, so that they really run at the same time), then does its share of
actions, picked at random from the weights with its own seed, and returns per kind the
latencies and the outcomes.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from threading import BrokenBarrierError
from typing import Any

import numpy as np

from nnhal.builder import ModelBuilder
from nnhal.types import (
    BufferDesc,
    BufferRole,
    DataLocation,
    ErrorStatus,
    InlineMemory,
    Model,
    OperandType,
    OperationType,
    Request,
    RequestArgument,
    TokenMemory,
)

F32, I32, BOOL8 = OperandType.TENSOR_FLOAT32, OperandType.TENSOR_INT32, OperandType.TENSOR_BOOL8
Op = OperationType
DIMS = (2, 3)

_OK = frozenset({"NONE"})
_MISSED = frozenset({"MISSED_DEADLINE_TRANSIENT", "MISSED_DEADLINE_PERSISTENT"})
_INVALID = frozenset({"INVALID_ARGUMENT"})

#: kind -> the outcomes it may end with
KINDS: dict[str, frozenset[str]] = {
    "add": _OK,  # ADD on inline memory (executeSynchronously_1_3 or execute_1_3)
    "add_shared": _OK,  # the same on a POSIX shared-memory segment
    "while_fib": _OK,  # a WHILE running n = 0..40 steps of a Fibonacci-like recurrence
    "while_infinite": _MISSED,  # a WHILE that never ends, loopTimeoutDuration 1-5 ms
    "deadline_passed": _MISSED,  # execute or prepare with a deadline already behind us
    "deadline_expires": _MISSED,  # an endless WHILE (15 s loop timeout), deadline in 2-10 ms
    "invalid": _INVALID,  # one of several malformed requests / models / ids
    "burst": _OK,  # a burst: inline executions, a shared-memory slot, freeMemory, close
    "fenced": _OK,  # executeFenced (runs at once), getExecutionInfo, release
    "fenced_wait": _OK,  # executeFenced waiting for a client fence, signal, wait, release
    "buffer": _OK,  # allocate a driver buffer, execute into it, copyTo, copyFrom, release
    "churn": _OK,  # prepare an ADD of random size, execute once, release
}

#: relative frequencies (``--mix`` changes them)
DEFAULT_WEIGHTS: dict[str, float] = {
    "add": 4,
    "add_shared": 2,
    "while_fib": 2,
    "while_infinite": 1,
    "deadline_passed": 1,
    "deadline_expires": 1,
    "invalid": 2,
    "burst": 1,
    "fenced": 1,
    "fenced_wait": 1,
    "buffer": 1,
    "churn": 1,
}


# ---------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------


def add_model(dims: tuple[int, ...] = DIMS) -> Model:
    mb = ModelBuilder()
    g = mb.main
    a, b = g.input(F32, list(dims)), g.input(F32, list(dims))
    y = g.output(F32, list(dims))
    g.operation(Op.ADD, [a, b, g.constant(OperandType.INT32, 0)], [y])
    return mb.build()


def bad_add_model() -> Model:
    """ADD of a float32 and an int32 tensor: the device must reject it (INVALID_ARGUMENT)."""
    mb = ModelBuilder()
    g = mb.main
    a, b = g.input(F32, list(DIMS)), g.input(I32, list(DIMS))
    y = g.output(F32, list(DIMS))
    g.operation(Op.ADD, [a, b, g.constant(OperandType.INT32, 0)], [y])
    return mb.build()


FIB = np.array([[1.0, 1.0], [1.0, 0.0]], np.float32)


def fib_model() -> Model:
    """(a, b) -> (a + b, a) n times: inputs state [1, 2], n [1]; outputs state, i."""
    mb = ModelBuilder()
    cond, body = mb.subgraph(), mb.subgraph()
    _cs, ci, cn = cond.input(F32, [1, 2]), cond.input(I32, [1]), cond.input(I32, [1])
    flag = cond.output(BOOL8, [1])
    cond.operation(Op.LESS, [ci, cn], [flag])
    bs, bi, _bn = body.input(F32, [1, 2]), body.input(I32, [1]), body.input(I32, [1])
    bs_out, bi_out = body.output(F32, [1, 2]), body.output(I32, [1])
    act = body.constant(OperandType.INT32, 0)
    zero = body.constant(F32, np.zeros(2, np.float32))
    body.operation(Op.FULLY_CONNECTED, [bs, body.constant(F32, FIB), zero, act], [bs_out])
    body.operation(Op.ADD, [bi, body.constant(I32, [1]), act], [bi_out])
    g = mb.main
    s0, n = g.input(F32, [1, 2]), g.input(I32, [1])
    s, i = g.output(F32, [1, 2]), g.output(I32, [1])
    g.operation(
        Op.WHILE, [g.subgraph_ref(cond), g.subgraph_ref(body), s0, g.constant(I32, [0]), n], [s, i]
    )
    return mb.build()


def fib_expected(n: int) -> np.ndarray:
    state = np.array([[1.0, 0.0]], np.float32)
    for _ in range(n):
        state = state @ FIB.T
    return state


def infinite_model() -> Model:
    """WHILE (i >= n) { i = i + 1 } from i = 1, n = 0: never ends."""
    mb = ModelBuilder()
    cond, body = mb.subgraph(), mb.subgraph()
    ci, cn = cond.input(F32, [1]), cond.input(F32, [1])
    flag = cond.output(BOOL8, [1])
    cond.operation(Op.GREATER_EQUAL, [ci, cn], [flag])
    bi, _bn = body.input(F32, [1]), body.input(F32, [1])
    bo = body.output(F32, [1])
    body.operation(
        Op.ADD, [bi, body.constant(F32, [1.0]), body.constant(OperandType.INT32, 0)], [bo]
    )
    g = mb.main
    i, n = g.input(F32, [1]), g.input(F32, [1])
    out = g.output(F32, [1])
    g.operation(Op.WHILE, [g.subgraph_ref(cond), g.subgraph_ref(body), i, n], [out])
    return mb.build()


INFINITE_INPUTS = [np.array([1.0], np.float32), np.array([0.0], np.float32)]


# ---------------------------------------------------------------------------
# Actions
# ---------------------------------------------------------------------------


class WrongOutput(Exception):
    """A call succeeded but returned the wrong numbers."""


def _same(got: np.ndarray, want: np.ndarray, what: str) -> None:
    if got.shape != want.shape or not np.allclose(got, want, rtol=1e-5, atol=1e-6):
        raise WrongOutput(f"{what}: got {got.tolist()}, expected {want.tolist()}")


def _arg(pool: int, offset: int, length: int, dims: tuple[int, ...] = ()) -> RequestArgument:
    return RequestArgument(location=DataLocation(pool, offset, length), dimensions=dims)


class Client:
    """One client's device connection, its prepared models, and the actions of every kind."""

    def __init__(self, device: Any, rng: np.random.Generator) -> None:
        self.device = device
        self.rng = rng
        self.add = device.prepareModel_1_3(add_model())
        self.fib = device.prepareModel_1_3(fib_model())
        self.infinite = device.prepareModel_1_3(infinite_model())
        self.actions: dict[str, Callable[[], None]] = {
            kind: getattr(self, f"_{kind}") for kind in KINDS
        }

    def close(self) -> None:
        for prepared in (self.add, self.fib, self.infinite):
            prepared.release()

    def _xy(self, dims: tuple[int, ...] = DIMS) -> tuple[np.ndarray, np.ndarray]:
        x = self.rng.standard_normal(dims).astype(np.float32)
        return x, self.rng.standard_normal(dims).astype(np.float32)

    def _now(self) -> int:
        return time.monotonic_ns()

    # ---- kinds ----

    def _add(self, memory: str = "inline") -> None:
        x, y = self._xy()
        sync = bool(self.rng.integers(2))
        result = self.add.execute([x, y], memory=memory, synchronous=sync)
        _same(result.outputs[0], x + y, "ADD")

    def _add_shared(self) -> None:
        self._add("shared")

    def _while_fib(self) -> None:
        n = int(self.rng.integers(0, 41))
        inputs = [np.array([[1.0, 0.0]], np.float32), np.array([n], np.int32)]
        state, i = self.fib.execute(inputs).outputs
        _same(state, fib_expected(n), f"WHILE n={n}")
        _same(i, np.array([n], np.int32), f"WHILE n={n} counter")

    def _while_infinite(self) -> None:
        timeout = int(self.rng.integers(1, 6)) * 1_000_000
        self.infinite.execute(INFINITE_INPUTS, loop_timeout_ns=timeout)

    def _deadline_passed(self) -> None:
        past = self._now() - 1_000_000
        if self.rng.integers(4) == 0:
            # a prepare that succeeded anyway would leak: release it if it ever does
            self.device.prepareModel_1_3(add_model(), deadline_ns=past).release()
        else:
            self.add.execute(list(self._xy()), deadline_ns=past)

    def _deadline_expires(self) -> None:
        soon = self._now() + int(self.rng.integers(2, 11)) * 1_000_000
        self.infinite.execute(INFINITE_INPUTS, deadline_ns=soon, loop_timeout_ns=15 * 10**9)

    def _invalid(self) -> None:
        from nnhal.client import PreparedModel

        x, y = self._xy()
        data = x.tobytes() + y.tobytes()
        n = x.nbytes
        out = InlineMemory(bytes(n))
        ok_in = (_arg(0, 0, n), _arg(0, n, n))
        case = int(self.rng.integers(8))
        if case == 0:  # input dimensions that contradict the model's
            req = Request(
                (_arg(0, 0, n, (3, 2)), ok_in[1]), (_arg(1, 0, n),), (InlineMemory(data), out)
            )
        elif case == 1:  # one input missing
            req = Request(ok_in[:1], (_arg(1, 0, n),), (InlineMemory(data), out))
        elif case == 2:  # a pool index out of range
            req = Request((ok_in[0], _arg(7, 0, n)), (_arg(1, 0, n),), (InlineMemory(data), out))
        elif case == 3:  # a location past the end of its pool
            req = Request(
                (ok_in[0], _arg(0, n + 8, n)), (_arg(1, 0, n),), (InlineMemory(data), out)
            )
        elif case == 4:  # an execution on a prepared model id that does not exist
            PreparedModel(self.device, 1 << 40, None).execute_request(
                Request(ok_in, (_arg(1, 0, n),), (InlineMemory(data), out))
            )
            return
        elif case == 5:  # a model the device must reject
            self.device.prepareModel_1_3(bad_add_model()).release()
            return
        elif case == 6:  # a fenced execution waiting for a fence that does not exist
            req = Request(ok_in, (_arg(1, 0, n),), (InlineMemory(data), out))
            self.add.executeFenced(req, waitFor=[1 << 40]).callback.release()
            return
        else:  # a driver buffer whose role names an output the model does not have
            role = BufferRole(modelIndex=0, ioIndex=5, frequency=1.0)
            self.device.allocate(BufferDesc(), [self.add], [], [role]).release()
            return
        self.add.execute_request(req)

    def _burst(self) -> None:
        from nnhal._client_io import IoPlan

        with self.add.burst() as burst:
            for _ in range(2):
                x, y = self._xy()
                _same(burst.execute([x, y]).outputs[0], x + y, "burst ADD")
            x, y = self._xy()
            plan = IoPlan(self.add.model, [x, y], None, "shared")
            try:
                slot = burst.register(plan.request.pools[0])
                burst.execute_request(plan.request, slots=[slot])
                _same(plan.read_outputs((), {})[0], x + y, "burst ADD (memory slot)")
                burst.freeMemory(slot)
            finally:
                plan.close()

    def _fenced(self) -> None:
        x, y = self._xy()
        outputs, fenced = self.add.execute_fenced([x, y])
        try:
            status, _, _ = fenced.callback.getExecutionInfo()
            if status != ErrorStatus.NONE:
                raise _status_error(status, "getExecutionInfo")
            _same(outputs[0], x + y, "fenced ADD")
        finally:
            fenced.callback.release()

    def _fenced_wait(self) -> None:
        from nnhal._client_io import IoPlan
        from nnhal._proto.v1_3 import prepared_model_pb2 as ppb
        from nnhal.client import _rpc
        from nnhal.control import create_fence, signal_fence, wait_fence

        x, y = self._xy()
        fence = create_fence(self.device)
        plan = IoPlan(self.add.model, [x, y], None, "shared")
        try:
            fenced = self.add.executeFenced(plan.request, waitFor=[fence])
            try:
                signal_fence(self.device, fence)
                state = wait_fence(self.device, fenced.syncFence, timeout_s=30.0)
                status, _, _ = fenced.callback.getExecutionInfo()
                if status != ErrorStatus.NONE:
                    raise _status_error(status, f"fenced execution (fence {state})")
                _same(plan.read_outputs((), {})[0], x + y, "fenced ADD after a client fence")
            finally:
                fenced.callback.release()
        finally:
            plan.close()
            _rpc(self.device.fence_stub.release, ppb.ReleaseRequest(id=fence))

    def _buffer(self) -> None:
        role = BufferRole(modelIndex=0, ioIndex=0, frequency=1.0)
        buffer = self.device.allocate(BufferDesc(), [self.add], [role], [role])
        try:
            x, y = self._xy()
            n = x.nbytes
            pools = (TokenMemory(buffer.token), InlineMemory(x.tobytes() + y.tobytes()))
            # buffer = x + y (output into the driver buffer) ...
            self.add.execute_request(
                Request((_arg(1, 0, n), _arg(1, n, n)), (_arg(0, 0, 0),), pools)
            )
            got = np.frombuffer(buffer.copyTo(InlineMemory(bytes(n))), np.float32).reshape(DIMS)
            _same(got, x + y, "driver buffer after ADD")
            buffer.copyFrom(InlineMemory(y.tobytes()))
            got = np.frombuffer(buffer.copyTo(InlineMemory(bytes(n))), np.float32).reshape(DIMS)
            _same(got, y, "driver buffer after copyFrom")
        finally:
            buffer.release()

    def _churn(self) -> None:
        dims = tuple(int(d) for d in self.rng.integers(1, 9, size=int(self.rng.integers(1, 4))))
        prepared = self.device.prepareModel_1_3(add_model(dims))
        try:
            x, y = self._xy(dims)
            _same(prepared.execute([x, y]).outputs[0], x + y, f"ADD {list(dims)}")
        finally:
            prepared.release()


def _status_error(status: ErrorStatus, what: str) -> Exception:
    from nnhal.errors import error_from_status

    return error_from_status(status, f"{what}: {status.name}")


# ---------------------------------------------------------------------------
# The process
# ---------------------------------------------------------------------------


def outcome(action: Callable[[], None]) -> tuple[str, str]:
    """Run one action: (outcome, message)."""
    from nnhal.errors import HalError

    try:
        action()
    except HalError as exc:
        return ErrorStatus(exc.status).name, exc.message or str(exc)
    except WrongOutput as exc:
        return "WRONG_OUTPUT", str(exc)
    except Exception as exc:  # noqa: BLE001 - a client-side failure is a finding too
        return "EXCEPTION", f"{type(exc).__name__}: {exc}"
    return "NONE", ""


def plan_kinds(
    rng: np.random.Generator, weights: dict[str, float], count: int, cover: bool
) -> Iterator[str]:
    """``count`` kinds (0 = no end) drawn from ``weights``; with ``cover``, every kind with a
    weight comes once first."""
    names = [k for k, w in weights.items() if w > 0]
    p = np.array([weights[k] for k in names], float)
    p /= p.sum()
    done = 0
    if cover:
        for name in names[:count] if count else names:
            yield name
            done += 1
    while not count or done < count:
        for i in rng.choice(len(names), size=256, p=p):
            if count and done >= count:
                return
            yield names[i]
            done += 1


def client_main(task: dict[str, Any]) -> dict[str, Any]:
    """One client process: connect, prepare, wait for the others, run, report per kind."""
    rng = np.random.default_rng([task["seed"], task["index"]])
    stats: dict[str, dict[str, Any]] = {}
    result: dict[str, Any] = {"index": task["index"], "kinds": stats, "error": None}
    barrier = _BARRIER
    try:
        device = connect_with_deadlines(task["address"], task["device"])
    except Exception as exc:  # noqa: BLE001 - reported, and the barrier must not hang
        result["error"] = f"client {task['index']}: cannot connect: {exc}"
        if barrier is not None:
            barrier.abort()
        return result
    try:
        try:
            client = Client(device, rng)
        except Exception as exc:  # noqa: BLE001
            result["error"] = f"client {task['index']}: cannot prepare its models: {exc}"
            if barrier is not None:
                barrier.abort()
            return result
        if barrier is not None:
            try:
                barrier.wait(timeout=300)
            except BrokenBarrierError:
                result["error"] = f"client {task['index']}: another client failed to start"
                client.close()
                return result
        device.deadline.seconds = task["call_timeout"]
        started = time.monotonic()
        end = started + task["duration"] if task["duration"] else None
        kinds = plan_kinds(rng, task["weights"], task["executions"], task["cover"])
        for kind in kinds:
            if end is not None and time.monotonic() >= end:
                break
            t0 = time.perf_counter()
            got, message = outcome(client.actions[kind])
            latency = time.perf_counter() - t0
            entry = stats.setdefault(
                kind, {"latencies": [], "outcomes": Counter(), "unexpected": []}
            )
            entry["latencies"].append(latency)
            entry["outcomes"][got] += 1
            if got not in KINDS[kind] and len(entry["unexpected"]) < 5:
                entry["unexpected"].append(f"{got}: {message}")
        result["elapsed"] = time.monotonic() - started
        device.deadline.seconds = SETUP_TIMEOUT
        client.close()
    finally:
        device.close()
    for entry in stats.values():
        entry["outcomes"] = dict(entry["outcomes"])
    return result


class Deadline:
    """The gRPC deadline (seconds) every call of a client gets; changeable."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds


class _DeadlineStub:
    """A stub whose calls without a ``timeout`` get the client's current deadline (a burst:
    its whole stream), so that a server that stops answering ends the action with
    DEVICE_UNAVAILABLE instead of hanging the run. (Per call, as nnhal._metadata does,
    rather than a channel interceptor.)"""

    def __init__(self, stub: Any, deadline: Deadline) -> None:
        self.wrapped = stub
        self.deadline = deadline

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.wrapped, name)
        deadline = self.deadline

        def call(request: Any, *args: Any, **kwargs: Any) -> Any:
            kwargs.setdefault("timeout", deadline.seconds)
            return method(request, *args, **kwargs)

        setattr(self, name, call)
        return call


_STUBS = ("stub", "prepared_model_stub", "buffer_stub", "callback_stub", "fence_stub")


def connect_with_deadlines(address: str, device: str) -> Any:
    """``nnhal.client.connect`` (with its client session) whose every call has a gRPC
    deadline: ``SETUP_TIMEOUT`` seconds, until the caller sets ``client.deadline.seconds``."""
    from nnhal.client import connect

    client = connect(address, timeout=30.0, device=device or None)
    client.deadline = Deadline(SETUP_TIMEOUT)
    for name in _STUBS:  # before any PreparedModel copies a stub
        setattr(client, name, _DeadlineStub(getattr(client, name), client.deadline))
    return client


SETUP_TIMEOUT = 300.0  # connecting and preparing the shared models, on a loaded machine
_BARRIER: Any = None


def init_worker(barrier: Any) -> None:
    """Pool initializer: the barrier every client waits at before its first action."""
    global _BARRIER
    _BARRIER = barrier
