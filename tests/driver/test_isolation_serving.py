"""One server per address (driver/server.py): SO_REUSEPORT is off, so a second server on
a busy port fails at once, naming the port and, when it can tell, the process holding it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from nnhal.driver.device import Device
from nnhal.driver.server import create_server
from repo_paths import REPO_ROOT


def test_a_second_server_on_a_busy_port_fails():
    first, address = create_server(Device(), "127.0.0.1:0")
    try:
        with pytest.raises(OSError) as info:
            second, _ = create_server(Device(), address)
            second.stop(None)
        port = address.rpartition(":")[2]
        assert f"port {port} is in use" in str(info.value)
        assert f"process {os.getpid()}" in str(info.value)  # this test process holds it
    finally:
        first.stop(None).wait()


@pytest.mark.slow
def test_nnhal_serve_on_a_busy_port_exits_1_with_one_line():
    first, address = create_server(Device(), "127.0.0.1:0")
    try:
        done = subprocess.run(
            [sys.executable, "-m", "nnhal", "serve", "--address", address],
            check=False, capture_output=True, text=True, timeout=120, cwd=REPO_ROOT,
        )
        assert done.returncode == 1
        ours = [line for line in done.stderr.splitlines() if line.startswith("nnhal serve:")]
        assert len(ours) == 1 and "is in use" in ours[0], done.stderr
        assert done.stdout == ""  # it never said it was serving
    finally:
        first.stop(None).wait()


def test_a_refused_connection_is_reported_at_once():
    import socket
    import time

    from nnhal.client import connect
    from nnhal.errors import DeviceUnavailable

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t0 = time.monotonic()
    with pytest.raises(DeviceUnavailable, match="connection refused"):
        connect(f"127.0.0.1:{port}", timeout=60.0)
    took = time.monotonic() - t0
    print(f"refused connection reported after {took:.3f} s")
    assert took < 30.0  # not the 60 s connect timeout (a hang guard, not a speed check)


def test_a_device_the_server_lacks_is_refused_with_one_device_too() -> None:
    from nnhal.client import connect
    from nnhal.errors import DeviceUnavailable

    server, address = create_server(Device(), "127.0.0.1:0")
    try:
        with pytest.raises(DeviceUnavailable, match="has no device 'gpu'.*devices: default"):
            connect(address, device="gpu")
        with connect(address, device="default") as client:
            assert client.getVersionString()
    finally:
        server.stop(None)
