"""Graceful shutdown of a real `nnhal serve` process.

The execution in flight is an op-package kernel held at a gate the test opens
(a file it creates), so "in flight when SIGTERM arrives" is certain, never a
matter of timing: the kernel creates ``GATE.entered`` when it starts and waits
for ``GATE.release``.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2 as hpb
from grpc_health.v1 import health_pb2_grpc as hgrpc
from repo_paths import REPO_ROOT

from nnhal._proto.v1_3 import device_pb2 as dpb
from nnhal._proto.v1_3 import device_pb2_grpc as dgrpc
from nnhal.builder import ModelBuilder
from nnhal.client import connect
from nnhal.errors import DeviceUnavailable
from nnhal.types import OperandType as T

pytestmark = pytest.mark.slow  # real `nnhal serve` processes

ROOT = REPO_ROOT
SOFT_CLIP = "com.example.soft_clip_package"
GATED_KERNEL = '''
"""SoftClip held at a gate (tests/test_shutdown.py)."""
import os
import time

import numpy as np

from nnhal.driver.op_packages.runtime import FAST, implementation

GATE = os.environ["NNHAL_TEST_GATE"]


@implementation(cost=FAST)
def soft_clip(x, *, limit=1.0):
    open(GATE + ".entered", "w").close()
    for _ in range(60000):  # at most ~10 minutes, should the test die
        if os.path.exists(GATE + ".release"):
            break
        time.sleep(0.01)
    return limit * np.tanh(x / np.asarray(limit, x.dtype))
'''


def soft_clip_model():
    mb = ModelBuilder()
    mb.extension(SOFT_CLIP, 7)
    g = mb.main
    x = g.input(T.TENSOR_FLOAT32, [2, 3])
    y = g.output(T.TENSOR_FLOAT32, [2, 3])
    g.operation(7 << 16, [x, g.constant(T.FLOAT32, 2.0)], [y])
    return mb.build()


X = np.array([[-3, -1, 0], [0.5, 1, 4]], np.float32)


class Server:
    """`nnhal serve` with the gated package; stderr collected line by line."""

    def __init__(self, tmp_path: Path, *args: str) -> None:
        pkg = tmp_path / "pkg"
        shutil.copytree(ROOT / "examples" / "qnn_xml", pkg)
        (pkg / "kernels" / "soft_clip.py").write_text(GATED_KERNEL)
        self.gate = tmp_path / "gate"
        env = {**os.environ, "NNHAL_TEST_GATE": str(self.gate), "PYTHONPATH": str(ROOT)}
        env.pop("NNHAL_TOKEN", None)
        command = [sys.executable, "-m", "nnhal.tools.cli", "serve", "--address", "127.0.0.1:0"]
        # the kernel is held for as long as the test needs: no kernel timeout in between
        profile = tmp_path / "gated.toml"
        profile.write_text('name = "gated"\nop_package_kernel_timeout_ms = 600000\n')
        command += ["--op-package", str(pkg / "soft_clip.xml"), "--profile", str(profile), *args]
        self.proc = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        line = self.proc.stdout.readline()
        assert " on 127.0.0.1:" in line, line + self.proc.stderr.read()
        self.address = line.split(" on ")[1].split()[0]
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            with self._changed:
                self.lines.append(line)
                self._changed.notify_all()

    def wait_for_line(self, fragment: str, timeout: float = 60) -> str:
        with self._changed:
            found = self._changed.wait_for(
                lambda: any(fragment in x for x in self.lines) or self.proc.poll() is not None,
                timeout,
            )
        matching = [x for x in self.lines if fragment in x]
        assert found and matching, f"no {fragment!r} in stderr: {''.join(self.lines)}"
        return matching[0]

    def wait_for_file(self, path: Path, timeout: float = 60) -> None:
        event = threading.Event()
        for _ in range(int(timeout / 0.01)):
            if path.exists() or self.proc.poll() is not None:
                break
            event.wait(0.01)
        assert path.exists(), f"{path} never appeared; stderr: {''.join(self.lines)}"

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self._reader.join(timeout=60)  # stderr ends with the process: the reader is done
        self.proc.stdout.close()
        self.proc.stderr.close()


@pytest.fixture
def start(tmp_path):
    servers = []

    def make(*args: str) -> Server:
        servers.append(Server(tmp_path, *args))
        return servers[-1]

    yield make
    for s in servers:
        s.close()


def in_flight_execution(server: Server):
    """Prepare, start executing in a thread; returns (thread, results) once the kernel runs."""
    dev = connect(server.address)
    prepared = dev.prepareModel_1_3(soft_clip_model())
    results: dict[str, object] = {}

    def run() -> None:
        try:
            results["outputs"] = prepared.execute([X]).outputs
        except Exception as exc:  # noqa: BLE001 - the test looks at it
            results["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    server.wait_for_file(Path(str(server.gate) + ".entered"))
    return thread, results, dev


def test_sigterm_lets_the_execution_in_flight_finish(start) -> None:
    server = start("--grace", "120")
    thread, results, dev = in_flight_execution(server)
    with grpc.insecure_channel(server.address) as channel:
        watch = hgrpc.HealthStub(channel).Watch(hpb.HealthCheckRequest(service=""), timeout=120)
        assert next(watch).status == hpb.HealthCheckResponse.SERVING
        server.proc.send_signal(signal.SIGTERM)
        line = server.wait_for_line("shutting down")
        # the execution, and maybe a session keepAlive of the client at that moment
        in_flight = int(re.search(r"(\d+) call\(s\) in flight", line).group(1))
        assert "SIGTERM" in line and in_flight >= 1, line
        assert next(watch).status == hpb.HealthCheckResponse.NOT_SERVING
        # the execution is held at its gate, so the server is certainly still draining
        assert thread.is_alive() and server.proc.poll() is None
        with grpc.insecure_channel(server.address) as fresh:
            with pytest.raises(grpc.RpcError) as info:
                dgrpc.IDeviceStub(fresh).getStatus(dpb.DeviceQuery(), timeout=30)
            assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    Path(str(server.gate) + ".release").touch()
    thread.join(120)
    assert "error" not in results, results
    expected = 2.0 * np.tanh(X / 2.0)
    np.testing.assert_allclose(results["outputs"][0], expected, rtol=1e-6)
    assert server.proc.wait(120) == 0
    server.wait_for_line("nnhal: stopped")
    dev.close()


def test_grace_period_ends_a_call_that_does_not_finish(start) -> None:
    server = start("--grace", "0.5")
    thread, results, dev = in_flight_execution(server)
    server.proc.send_signal(signal.SIGINT)
    assert server.proc.wait(120) == 0
    server.wait_for_line("still running after the grace period were cut off")
    thread.join(120)
    assert isinstance(results.get("error"), DeviceUnavailable), results
    dev.close()


def test_second_signal_stops_at_once(start) -> None:
    server = start("--grace", "600")
    thread, results, dev = in_flight_execution(server)
    server.proc.send_signal(signal.SIGTERM)
    server.wait_for_line("shutting down")
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(120) == 0
    server.wait_for_line("second signal: stopping now")
    thread.join(120)
    assert isinstance(results.get("error"), DeviceUnavailable), results
    dev.close()


def test_bad_grace_is_a_usage_error(capsys) -> None:
    from nnhal.tools.cli import main

    assert main(["serve", "--grace", "-1"]) == 2
    assert "--grace must be >= 0" in capsys.readouterr().err
