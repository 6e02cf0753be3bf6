"""Misbehaving op-package kernels: they fail their execution, never the server.

The fixture package ``tests/data/op_packages/misbehaving`` has real kernels that
raise (Fail), never return (Hang), end their process (Exit: ``os._exit(3)``),
segfault (Crash), sleep (Nap), report their process id (Pid) and return an
object that is not an array (Odd), beside a well-behaved one (Good).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from nnhal.driver.device import Device
from nnhal.driver.op_packages.discovery import load_path
from nnhal.driver.profile import ProfileError, parse_profile
from nnhal.driver.service import create_server
from repo_paths import REPO_ROOT

from nnhal.builder import ModelBuilder
from nnhal.client import connect
from nnhal.errors import GeneralFailure, MissedDeadline
from nnhal.types import DeviceStatus, ErrorStatus
from nnhal.types import OperandType as T

ROOT = REPO_ROOT
CONFIG = ROOT / "tests" / "data" / "op_packages" / "misbehaving" / "misbehaving.json"
EXTENSION = "udo.misbehaving_package"
OPS = ["Good", "Fail", "Hang", "Exit", "Crash", "Nap", "Pid", "Odd"]
X = np.array([1, 2, 3, 4], np.float32)
WORKER_MODULE = "nnhal.driver.op_packages.worker"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]  # worker processes


@pytest.fixture(scope="module")
def packages():
    return load_path(CONFIG)


def model(op: str, ms: int = 0):
    mb = ModelBuilder()
    mb.extension(EXTENSION, 1)
    g = mb.main
    x = g.input(T.TENSOR_FLOAT32, [4])
    y = g.output(T.TENSOR_INT32, [1]) if op == "Pid" else g.output(T.TENSOR_FLOAT32, [4])
    ins = [x, g.constant(T.INT32, ms)] if op == "Nap" else [x]
    g.operation((1 << 16) | OPS.index(op), ins, [y])
    return mb.build()


def make_device(packages, **keys) -> Device:
    profile = parse_profile({"name": "kernels", **keys})
    return Device(profile, op_packages=packages)


def alive(pid: int) -> bool:
    """A process that exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def workers_of(parent: int) -> list[int]:
    """Worker processes started by ``parent`` (its pid ends their command line), alive."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        argv = [a.decode(errors="replace") for a in argv if a]
        mine = any(WORKER_MODULE in a for a in argv) and argv[-1] == str(parent)
        if mine and alive(int(entry)):
            found.append(int(entry))
    return sorted(found)


def wait_for(predicate, what: str, limit: float = 60.0) -> None:
    end = time.monotonic() + limit
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError(f"still not {what} after {limit} s")
        time.sleep(0.02)


@pytest.fixture
def device(packages):
    dev = make_device(packages, op_package_kernel_timeout_ms=5000)
    yield dev
    dev.close()
    assert dev.extensions.runner.pids() == []


@pytest.fixture
def server(device):
    srv, address = create_server(device, "127.0.0.1:0")
    client = connect(address)
    yield client
    client.close()
    srv.stop(None)


def run(client, op: str, **kw):
    return client.prepareModel_1_3(model(op)).execute([X], **kw)


# -- kernels run in a worker process --------------------------------------------


def test_kernels_run_in_a_worker_process_unless_inline(packages) -> None:
    isolated = make_device(packages)
    inline = make_device(packages, op_package_isolation="inline")
    try:
        (pid,) = isolated.prepareModel_1_3(model("Pid")).compiled.run([X])[0]
        assert pid != os.getpid() and isolated.extensions.runner.pids() == [pid]
        assert pid in workers_of(os.getpid())  # a child of this process running the worker
        (here,) = inline.prepareModel_1_3(model("Pid")).compiled.run([X])[0]
        assert here == os.getpid() and inline.extensions.runner is None
        # the same results either way
        for dev in (isolated, inline):
            (out,) = dev.prepareModel_1_3(model("Good")).compiled.run([X])
            np.testing.assert_array_equal(out, X + 1)
            assert out.dtype == np.float32 and out.flags.writeable
    finally:
        isolated.close()
    assert not alive(int(pid)) and int(pid) not in workers_of(os.getpid())


def test_raising_kernel_fails_only_its_execution(server, device) -> None:
    (before,) = run(server, "Pid").outputs[0]
    with pytest.raises(GeneralFailure) as info:
        run(server, "Fail")
    assert info.value.status == ErrorStatus.GENERAL_FAILURE
    assert info.value.message == (
        "MisbehavingPackage.Fail (subgraph 0, operation 0): kernel failed: ValueError: "
        "bad input: x has 4 elements"
    )
    np.testing.assert_array_equal(run(server, "Good").outputs[0], X + 1)
    (after,) = run(server, "Pid").outputs[0]
    assert after == before  # a kernel that raises does not cost its worker
    assert device.getStatus() == DeviceStatus.AVAILABLE


def test_hanging_kernel_is_killed_at_the_kernel_limit(server, device) -> None:
    (old,) = run(server, "Pid").outputs[0]
    with pytest.raises(GeneralFailure) as info:
        run(server, "Hang")
    assert info.value.message == (
        "MisbehavingPackage.Hang (subgraph 0, operation 0): the kernel did not return within "
        "5000 ms (op_package_kernel_timeout_ms); its worker process was killed and is being "
        "replaced"
    )
    assert not alive(int(old))
    np.testing.assert_array_equal(run(server, "Good").outputs[0], X + 1)
    (new,) = run(server, "Pid").outputs[0]
    assert new != old
    wait_for(lambda: server.getStatus() == DeviceStatus.AVAILABLE, "AVAILABLE")


def test_hanging_kernel_never_holds_a_client_past_its_deadline(packages) -> None:
    """The deadline (2 s: it must not pass before the request arrives, even on a slow
    machine, or the status is PERSISTENT) ends the call long before the kernel limit."""
    device = make_device(packages, op_package_kernel_timeout_ms=600_000)
    srv, address = create_server(device, "127.0.0.1:0")
    client = connect(address)
    try:
        prepared = client.prepareModel_1_3(model("Hang"))
        with pytest.raises(MissedDeadline) as info:
            prepared.execute([X], deadline_ns=time.monotonic_ns() + 2_000_000_000)
        assert info.value.status == ErrorStatus.MISSED_DEADLINE_TRANSIENT
        assert (
            "MisbehavingPackage.Hang (subgraph 0, operation 0): the execution deadline passed"
            in info.value.message
        )
        # the same through the fenced path (its own thread on the server)
        with pytest.raises(MissedDeadline):
            prepared.execute_fenced([X], deadline_ns=time.monotonic_ns() + 2_000_000_000)
        np.testing.assert_array_equal(run(client, "Good").outputs[0], X + 1)
    finally:
        client.close()
        srv.stop(None)
        device.close()


def test_cancelled_execution_stops_waiting_for_its_kernel(packages) -> None:
    """A client that goes away cancels its execution (nnhal.driver.executor.model.Cancel): a call
    waiting on a hanging kernel ends within a slice (not at the 10-minute kernel limit),
    and its worker is replaced."""

    device = make_device(packages, op_package_kernel_timeout_ms=600_000)
    try:
        _cancel_a_hanging_call(device)
    finally:
        device.close()


def _cancel_a_hanging_call(device) -> None:
    from nnhal.driver.executor.model import Cancel

    compiled = device.prepareModel_1_3(model("Hang")).compiled
    runner = device.extensions.runner
    cancel = Cancel()
    outcome: list[BaseException] = []

    def execute() -> None:
        try:
            compiled.run([X], cancel=cancel)
        except BaseException as exc:  # noqa: BLE001
            outcome.append(exc)

    thread = threading.Thread(target=execute)
    thread.start()
    wait_for(lambda: runner.stats()["busy"] == 1, "running the kernel")
    (hanging,) = runner.pids()
    cancel.cancel("the client went away")
    thread.join(60)
    assert not thread.is_alive()
    assert isinstance(outcome[0], GeneralFailure)
    assert outcome[0].message == "execution cancelled: the client went away"
    assert not alive(hanging)
    good = device.prepareModel_1_3(model("Good")).compiled
    np.testing.assert_array_equal(good.run([X])[0], X + 1)


@pytest.mark.parametrize(("op", "how"), [("Exit", "exit code 3"), ("Crash", "killed by SIGSEGV")])
def test_dying_worker_fails_the_execution_and_is_replaced(server, device, op, how) -> None:
    (old,) = run(server, "Pid").outputs[0]
    with pytest.raises(GeneralFailure) as info:
        run(server, op)
    assert info.value.message == (
        f"MisbehavingPackage.{op} (subgraph 0, operation 0): the kernel's worker process died "
        f"({how}); it is being replaced"
    )
    (new,) = run(server, "Pid").outputs[0]
    assert new != old and not alive(int(old))
    np.testing.assert_array_equal(run(server, "Good").outputs[0], X + 1)


def test_result_that_is_not_an_array(server) -> None:
    with pytest.raises(GeneralFailure) as info:
        run(server, "Odd")
    assert info.value.message.startswith(
        "MisbehavingPackage.Odd (subgraph 0, operation 0): the kernel's result cannot be sent "
        "back: PicklingError: Can't pickle <class 'nnhal_oppkg_misbehaving_package_"
    )
    np.testing.assert_array_equal(run(server, "Good").outputs[0], X + 1)


def test_the_server_unpickles_arrays_and_numbers_only() -> None:
    """Nothing a worker sends can make the server run code: only numpy's array and scalar
    constructors and plain containers unpickle."""
    import io
    import pickle

    from nnhal.driver.op_packages.processes import ResultUnpickler

    class Sneaky:
        def __reduce__(self):
            return (os.system, ("true",))

    def load(obj):
        buffers: list = []
        data = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
        frames = [bytearray(b.raw()) for b in buffers]
        return ResultUnpickler(io.BytesIO(data), buffers=frames).load()

    with pytest.raises(pickle.UnpicklingError, match=r"holds a posix\.system"):
        load(("ok", Sneaky()))
    got = load(("ok", (X, np.float16(2), [1, 2.5j], {"a": np.arange(3)[::2]}, None)))
    np.testing.assert_array_equal(got[1][0], X)
    assert got[1][1] == np.float16(2) and got[1][2] == [1, 2.5j]
    np.testing.assert_array_equal(got[1][3]["a"], [0, 2])


def test_wire_carries_large_and_odd_arrays_and_fails_cleanly() -> None:
    from nnhal.driver.op_packages.worker import WireTimeout, read_message, send_message

    r, w = os.pipe()
    try:
        big = np.arange(3 << 20, dtype=np.float32).reshape(3, -1)  # 12 MiB: many pipe-fulls
        message = ("call", 7, None, (big, big[:, ::3], np.zeros((0, 4), np.int8)), {"k": 2.5})
        writer = threading.Thread(target=send_message, args=(w, message))
        writer.start()
        got = read_message(r, time.monotonic_ns() + 60 * 10**9)
        writer.join()
        assert got[:3] == ("call", 7, None) and got[4] == {"k": 2.5}
        for sent, received in zip(message[3], got[3]):
            np.testing.assert_array_equal(received, sent)
            assert received.dtype == sent.dtype and received.flags.writeable
        with pytest.raises(WireTimeout):  # nothing comes
            read_message(r, time.monotonic_ns() + 50_000_000)
        os.write(w, b"\xff\xff\xff\xff")
        with pytest.raises(EOFError, match="corrupted message: 4294967295 frames"):
            read_message(r)
    finally:
        os.close(w)
    try:
        with pytest.raises(EOFError, match="closed"):
            read_message(r)
    finally:
        os.close(r)


def test_worker_that_lost_a_kernel_gets_it_again(device) -> None:
    """A worker keeps the last 256 kernels; for one it dropped it says so and is sent it."""
    compiled = device.prepareModel_1_3(model("Good")).compiled
    np.testing.assert_array_equal(compiled.run([X])[0], X + 1)
    runner = device.extensions.runner
    (worker,) = runner._idle
    kernel = compiled.plans[0].steps[0].kernel
    remote = next(c.cell_contents for c in kernel.__closure__
                  if type(c.cell_contents).__name__ == "RemoteKernel")  # fmt: skip
    stranger = type(remote)(runner, 10**9, remote.label, remote.definition)
    worker.remember(stranger.kid)  # the server believes the worker has it; it has not
    np.testing.assert_array_equal(stranger(X), X + 1)
    assert runner.pids() == [worker.pid]


# -- getStatus while a worker is replaced -----------------------------------------


def test_status_is_busy_while_the_worker_is_replaced(server, device) -> None:
    runner = device.extensions.runner
    run(server, "Good")  # a warm worker
    gate = threading.Event()
    spawn = runner._spawn

    def slow_spawn():
        gate.wait(60)
        return spawn()

    runner._spawn = slow_spawn  # the replacement waits for the test to let it start
    try:
        with pytest.raises(GeneralFailure, match="died"):
            run(server, "Exit")
        assert device.getStatus() == DeviceStatus.BUSY
        assert server.getStatus() == DeviceStatus.BUSY  # over gRPC too
    finally:
        gate.set()
    wait_for(lambda: server.getStatus() == DeviceStatus.AVAILABLE, "AVAILABLE")
    np.testing.assert_array_equal(run(server, "Good").outputs[0], X + 1)


def test_resource_usage_shows_the_worker_pool(packages) -> None:
    from nnhal.control import Control

    device = make_device(packages, op_package_kernel_timeout_ms=5000)
    plain = Device(parse_profile({"name": "plain"}))
    srv, address = create_server([device, plain], "127.0.0.1:0")
    client = connect(address, device="kernels")
    try:
        run(client, "Good")
        with Control(address) as control:
            usage = control.resource_usage()["devices"]
        assert usage["kernels"]["op_package_workers"] == {
            "slots": 1, "idle": 1, "busy": 0, "starting": 0, "restarting": 0,
        }  # fmt: skip
        assert usage["plain"]["op_package_workers"] is None  # no packages, no pool
    finally:
        client.close()
        srv.stop(None)
        device.close()


# -- concurrency -------------------------------------------------------------------


def test_other_executions_run_while_a_kernel_hangs(packages) -> None:
    """Two workers: a hanging kernel holds one; other executions use the other."""
    device = make_device(packages, op_package_kernel_timeout_ms=600_000)
    srv, address = create_server(device, "127.0.0.1:0")
    client = connect(address)
    outcome: list[BaseException] = []

    def hang() -> None:
        try:
            run(client, "Hang")
        except BaseException as exc:  # noqa: BLE001
            outcome.append(exc)

    hanging = threading.Thread(target=hang)
    try:
        hanging.start()
        wait_for(lambda: device.extensions.runner.stats()["busy"] == 1, "hanging")
        for _ in range(5):
            np.testing.assert_array_equal(run(client, "Good").outputs[0], X + 1)
        assert hanging.is_alive() and not outcome  # still hanging (the limit is 10 minutes)
        pids = device.extensions.runner.pids()
        assert len(pids) == 2
    finally:
        device.close()  # kills the hanging kernel's worker: its execution fails at once
        hanging.join(60)
        client.close()
        srv.stop(None)
    assert not hanging.is_alive()
    assert isinstance(outcome[0], GeneralFailure)
    assert "the device shut down while the kernel was running" in outcome[0].message
    assert not any(alive(p) for p in pids) and not set(pids) & set(workers_of(os.getpid()))


def test_one_worker_serializes_calls_and_the_next_one_gets_the_replacement(packages) -> None:
    device = make_device(packages, op_package_workers=1, op_package_kernel_timeout_ms=5000)
    try:
        hanging = device.prepareModel_1_3(model("Hang")).compiled
        good = device.prepareModel_1_3(model("Nap")).compiled  # Nap 0 ms: y = x + 1
        errors: list[BaseException] = []
        results: list[np.ndarray] = []

        def call(compiled, sink) -> None:
            try:
                sink.append(compiled.run([X])[0])
            except BaseException as exc:  # noqa: BLE001
                errors.append(exc)

        runner = device.extensions.runner
        threads = [threading.Thread(target=call, args=(hanging, results))]
        threads[0].start()
        wait_for(lambda: runner.stats()["busy"] == 1, "hanging")  # the only worker
        threads += [threading.Thread(target=call, args=(good, results)) for _ in range(3)]
        for t in threads[1:]:
            t.start()
        for t in threads:
            t.join(120)
        assert len(errors) == 1 and "did not return within 5000 ms" in str(errors[0])
        assert len(results) == 3  # they waited for the replacement of the killed worker
        for r in results:
            np.testing.assert_array_equal(r, X + 1)
        assert runner.stats() == {"slots": 1, "idle": 1, "busy": 0, "starting": 0,
                                  "restarting": 0}  # fmt: skip
        assert len(runner.pids()) == 1
    finally:
        device.close()


def test_worker_that_cannot_start(packages, monkeypatch) -> None:
    from nnhal.driver.op_packages import processes

    monkeypatch.setattr(
        processes, "command", lambda *a: [sys.executable, "-c", "import sys; sys.exit(5)"]
    )
    device = make_device(packages)
    try:
        compiled = device.prepareModel_1_3(model("Good")).compiled
        for _ in range(2):  # each call tries again, and says why it cannot
            with pytest.raises(GeneralFailure) as info:
                compiled.run([X])
            assert info.value.message == (
                "MisbehavingPackage.Good (subgraph 0, operation 0): cannot start an op-package "
                "worker: RuntimeError: the worker exited at start (exit code 5)"
            )
        monkeypatch.undo()
        np.testing.assert_array_equal(compiled.run([X])[0], X + 1)
    finally:
        device.close()


def test_closed_device_fails_kernel_calls(packages) -> None:
    device = make_device(packages)
    compiled = device.prepareModel_1_3(model("Good")).compiled
    device.close()
    with pytest.raises(GeneralFailure, match="the device is shut down"):
        compiled.run([X])
    assert device.extensions.runner.pids() == []


# -- no process outlives the server -------------------------------------------------


def _serve(*extra: str) -> tuple[subprocess.Popen, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [sys.executable, "-m", "nnhal.tools.cli", "serve", "--address", "127.0.0.1:0",
         "--op-package", str(CONFIG), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
    )  # fmt: skip
    line = proc.stdout.readline()
    assert " on " in line, line
    return proc, line.rsplit(" on ", 1)[1].strip()


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_serve_leaves_no_worker_behind(how: str) -> None:
    proc, address = _serve()
    try:
        client = connect(address, device="default")
        with pytest.raises(GeneralFailure):
            run(client, "Exit")
        np.testing.assert_array_equal(run(client, "Good").outputs[0], X + 1)
        assert client.getStatus() == DeviceStatus.AVAILABLE  # the server stayed up
        assert len(workers_of(proc.pid)) >= 1
        client.close()
    finally:
        proc.send_signal(getattr(signal, how))
        proc.wait(60)
    # SIGTERM: the server stops its workers; SIGKILL: they notice their parent is gone
    wait_for(lambda: workers_of(proc.pid) == [], "without workers", 30)


# -- the profile keys ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        ({"op_package_isolation": "thread"}, 'must be "process" or "inline"'),
        ({"op_package_kernel_timeout_ms": 0}, "must be an integer >= 1, got 0"),
        ({"op_package_kernel_timeout_ms": 1.5}, "must be an integer >= 1"),
        ({"op_package_workers": True}, "must be an integer >= 1"),
        ({"op_package_workers": 65}, "must be at most 64, got 65"),
    ],
)
def test_bad_profile_keys(keys, message) -> None:
    with pytest.raises(ProfileError, match=message) as info:
        parse_profile({"name": "p", **keys})
    assert repr(next(iter(keys))) in str(info.value)


def test_profile_defaults() -> None:
    p = parse_profile({"name": "p"})
    assert (p.op_package_isolation, p.op_package_kernel_timeout_ms, p.op_package_workers) == (
        "process",
        10_000,
        2,
    )
