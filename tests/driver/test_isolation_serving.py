"""One server per address (driver/server.py): SO_REUSEPORT is off, so a second server on
a busy port fails at once, naming the port and, when it can tell, the process holding it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from repo_paths import REPO_ROOT

from nnhal.driver.device import Device
from nnhal.driver.server import create_server


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
            capture_output=True, text=True, timeout=120, cwd=REPO_ROOT,
        )
        assert done.returncode == 1
        ours = [line for line in done.stderr.splitlines() if line.startswith("nnhal serve:")]
        assert len(ours) == 1 and "is in use" in ours[0], done.stderr
        assert done.stdout == ""  # it never said it was serving
    finally:
        first.stop(None).wait()
