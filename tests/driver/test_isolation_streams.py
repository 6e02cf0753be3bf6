"""Open streams cannot starve unary calls (driver/streams.py, docs/security.md).

In process: the per-client and server-wide budgets of burst and health-Watch
streams answer RESOURCE_EXHAUSTED beyond them and free their place when a
stream ends. Against a real ``nnhal serve`` (slow): with 500 idle bursts and
500 unauthenticated health watches open (or refused), ``getStatus``, a health
``Check`` and a small execution still answer; the time each took is printed.
"""

from __future__ import annotations

import collections
import json
import subprocess
import sys
import threading
import time

import grpc
import numpy as np
import pytest
from dying_client import add_model
from grpc_health.v1 import health_pb2 as hpb
from grpc_health.v1 import health_pb2_grpc as hgrpc
from nnhal.driver.device import Device
from nnhal.driver.server import create_server
from nnhal.driver.streams import StreamLimits
from repo_paths import REPO_ROOT

from nnhal._client_security import ClientSecurity
from nnhal._proto.v1_3 import device_pb2 as dpb
from nnhal._proto.v1_3 import device_pb2_grpc as dgrpc
from nnhal._proto.v1_3 import prepared_model_pb2_grpc as pgrpc
from nnhal.client import connect
from nnhal.control import SESSION_HEADER

X = np.ones(2, np.float32)
#: channel option: do not share the connection with other channels of this process
OWN_CONNECTION = [("grpc.use_local_subchannel_pool", 1)]


class OpenStream:
    """A stream whose requests never come (an idle client); ``code()`` once it ended."""

    def __init__(self, call_factory, request=None) -> None:
        self._stop = threading.Event()
        self._ended = threading.Event()
        self._code = None

        def idle():
            self._stop.wait()
            return
            yield  # a generator that sends nothing

        self.call = call_factory(idle() if request is None else request)
        self.call.add_done_callback(self._done)

    def _done(self, call) -> None:
        self._code = call.code()
        self._ended.set()

    def code(self, timeout: float = 30.0):
        """The status the stream ended with (None if still open after ``timeout``)."""
        return self._code if self._ended.wait(timeout) else None

    def close(self) -> None:
        self._stop.set()
        self.call.cancel()


def _burst(channel, metadata=()):
    stub = pgrpc.IPreparedModelStub(channel)
    return OpenStream(lambda it: stub.configureExecutionBurst(it, metadata=metadata))


def _watch(channel):
    stub = hgrpc.HealthStub(channel)
    return OpenStream(lambda req: stub.Watch(req), hpb.HealthCheckRequest(service=""))


def _wait_until(predicate, timeout_s=30.0):
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.02)
    return False


@pytest.fixture
def small_server():
    limits = StreamLimits(max_bursts=6, max_bursts_per_client=3, max_watches=4,
                          max_watches_per_client=2)
    server, address = create_server(Device(), "127.0.0.1:0", max_workers=2, streams=limits)
    try:
        yield server, address
    finally:
        server.stop(None).wait()


@pytest.mark.slow  # waits out leases and stream timeouts on the wall clock
def test_per_client_and_server_budgets(small_server):
    server, address = small_server
    gate = server.guard.streams
    channels = [grpc.insecure_channel(address, options=OWN_CONNECTION) for _ in range(3)]
    sessions = [((SESSION_HEADER, f"session-{i}"),) for i in range(3)]
    opened = []
    try:
        # one client: 3 bursts admitted, the 4th refused (per client)
        mine = [_burst(channels[0], sessions[0]) for _ in range(4)]
        opened += mine
        assert _wait_until(lambda: gate.open_streams()["burst"] == 3)
        refused = [s for s in mine if s.code(timeout=0.5) is not None]
        assert len(refused) == 1
        # a second client: 3 more; a third client: refused (server-wide, 6)
        opened += [_burst(channels[1], sessions[1]) for _ in range(3)]
        assert _wait_until(lambda: gate.open_streams()["burst"] == 6)
        third = _burst(channels[2], sessions[2])
        opened.append(third)
        assert third.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        # watches (no session: the connection is the client): 2 per connection
        watches = [_watch(channels[2]) for _ in range(3)]
        opened += watches
        assert _wait_until(lambda: gate.open_streams()["health Watch"] == 2)
        assert sum(w.code(timeout=0.5) == grpc.StatusCode.RESOURCE_EXHAUSTED for w in watches) == 1
        # the unary workers (2 of them) are free: calls answer at once
        stub = dgrpc.IDeviceStub(channels[2])
        assert stub.getStatus(dpb.DeviceQuery(), timeout=30).status == 0
        health = hgrpc.HealthStub(channels[2]).Check(hpb.HealthCheckRequest(), timeout=30)
        assert health.status == hpb.HealthCheckResponse.SERVING
        # a stream that ends gives its place back
        for s in mine:
            s.close()
        assert _wait_until(lambda: gate.open_streams()["burst"] == 3)
        again = _burst(channels[2], sessions[2])
        opened.append(again)
        assert _wait_until(lambda: gate.open_streams()["burst"] == 4)
        assert again.code(timeout=0.5) is None  # admitted, still open
    finally:
        for s in opened:
            s.close()
        for c in channels:
            c.close()


@pytest.mark.slow  # waits out leases and stream timeouts on the wall clock
def test_refusal_message_names_the_budget(small_server):
    _server, address = small_server
    channel = grpc.insecure_channel(address)
    streams = [_burst(channel) for _ in range(4)]
    try:
        codes = [s.code(timeout=1.0) for s in streams]
        refused = [s for s, c in zip(streams, codes) if c == grpc.StatusCode.RESOURCE_EXHAUSTED]
        assert len(refused) == 1
        assert "max_bursts_per_client" in refused[0].call.details()
    finally:
        for s in streams:
            s.close()
        channel.close()


def test_a_burst_still_runs_within_the_budget(small_server):
    _, address = small_server
    with connect(address) as dev:
        prepared = dev.prepareModel_1_3(add_model())
        with prepared.burst() as burst:
            for _ in range(3):
                np.testing.assert_array_equal(burst.execute([X, X]).outputs[0], X + X)


# ---------------------------------------------------------------------------
# Against a real server process
# ---------------------------------------------------------------------------


def serve_process(tmp_path, *extra: str):
    """A real ``nnhal serve`` on a free loopback port with a token file: (process, address,
    token). The caller terminates it."""
    token = "t" * 32
    (tmp_path / "tokens").write_text(token + "\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "nnhal", "serve", "--address", "127.0.0.1:0",
         "--token-file", str(tmp_path / "tokens"), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd=REPO_ROOT, text=True,
    )
    line = proc.stdout.readline()  # "nnhal: serving device NAME on HOST:PORT"
    assert " on " in line, f"nnhal serve did not start (exit {proc.poll()}): {line!r}"
    return proc, line.rsplit(" on ", 1)[1].strip(), token


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_500_idle_bursts_and_500_watches_do_not_freeze_a_real_server(tmp_path):
    proc, address, token = serve_process(tmp_path)
    streams, channels = [], []
    try:
        auth = (("authorization", f"Bearer {token}"),)
        with connect(address, security=ClientSecurity(token=token)) as dev:
            prepared = dev.prepareModel_1_3(add_model())
            # 50 connections x 10 idle bursts, 50 x 10 unauthenticated watches
            for i in range(50):
                # a connection of its own (gRPC shares one between identical channels)
                channel = grpc.insecure_channel(address, options=OWN_CONNECTION)
                channels.append(channel)
                meta = (*auth, (SESSION_HEADER, f"idle-{i}"))
                streams += [_burst(channel, meta) for _ in range(10)]
                streams += [_watch(channel) for _ in range(10)]
            time.sleep(2.0)  # let the server take (or refuse) every stream
            figures = {}
            stub = dgrpc.IDeviceStub(grpc.insecure_channel(address))
            for name, call in (
                ("getStatus", lambda: stub.getStatus(dpb.DeviceQuery(), metadata=auth, timeout=30)),
                ("health Check", lambda: hgrpc.HealthStub(channels[0]).Check(
                    hpb.HealthCheckRequest(), timeout=30)),
                ("execute ADD", lambda: prepared.execute([X, X])),
            ):
                times = []
                for _ in range(5):
                    t0 = time.perf_counter()
                    call()
                    times.append(time.perf_counter() - t0)
                figures[name] = max(times)
            codes = collections.Counter(str(s.code(timeout=0)) for s in streams)
            print(json.dumps({"slowest_s": figures, "streams": len(streams), "ended": codes}))
            # the calls answered (a frozen server times them out after 30 s); every stream
            # beyond the default budgets (64 bursts, 32 watches) was refused, none else ended
            assert codes[str(grpc.StatusCode.RESOURCE_EXHAUSTED)] == 1000 - 64 - 32
            assert codes["None"] == 64 + 32
    finally:
        for s in streams:
            s.close()
        for c in channels:
            c.close()
        proc.terminate()
        proc.wait(timeout=60)
