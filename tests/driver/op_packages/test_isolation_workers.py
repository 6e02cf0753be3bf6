"""Op-package kernel workers are contained (driver/op_packages/processes.py, worker.py).

The fixture package ``tests/data/op_packages/contained`` has a kernel that
starts a long-lived child process (Spawn) and one that allocates without
bound (Bomb). Each worker leads its own process group and is killed as a
group, so Spawn's children end with their worker, whether the device closes,
the worker is replaced, or the server process is killed; the worker's data
memory is limited (``max_worker_memory_bytes``), so Bomb fails its execution
with GENERAL_FAILURE naming the limit while the server stays well.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from nnhal.driver.device import Device
from nnhal.driver.op_packages.discovery import load_path
from nnhal.driver.profile import parse_profile
from repo_paths import REPO_ROOT

from nnhal.builder import ModelBuilder
from nnhal.errors import GeneralFailure
from nnhal.types import OperandType as T

CONFIG = REPO_ROOT / "tests" / "data" / "op_packages" / "contained" / "contained.json"
EXTENSION = "udo.contained_package"
OPS = ["Spawn", "Bomb"]
X = np.array([1, 2, 3, 4], np.float32)

pytestmark = pytest.mark.timeout(180)


def model(op: str):
    mb = ModelBuilder()
    mb.extension(EXTENSION, 1)
    g = mb.main
    x = g.input(T.TENSOR_FLOAT32, [4])
    y = g.output(T.TENSOR_INT32, [1]) if op == "Spawn" else g.output(T.TENSOR_FLOAT32, [4])
    g.operation((1 << 16) | OPS.index(op), [x], [y])
    return mb.build()


def device(**limits) -> Device:
    table = {"limits": limits} if limits else {}
    return Device(parse_profile({"name": "contained", **table}), op_packages=load_path(CONFIG))


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def wait_gone(pid: int, limit: float = 30.0) -> bool:
    end = time.monotonic() + limit
    while alive(pid):
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


def test_a_kernels_children_end_with_the_device():
    dev = device()
    try:
        (child,) = dev.prepareModel_1_3(model("Spawn")).compiled.run([X])[0]
        (worker,) = dev.extensions.runner.pids()
        assert alive(child) and os.getpgid(worker) == worker  # it leads its own group
        assert os.getpgid(child) == worker
    finally:
        dev.close()
    assert wait_gone(child), f"the kernel's child {child} outlived its worker"


def test_a_kernels_children_end_when_the_worker_is_killed():
    dev = device()
    try:
        (child,) = dev.prepareModel_1_3(model("Spawn")).compiled.run([X])[0]
        (worker,) = dev.extensions.runner.pids()
        for w in dev.extensions.runner._idle:  # as a timeout or a cancel does
            w.kill()
        assert wait_gone(worker) and wait_gone(child)
    finally:
        dev.close()


def test_an_allocation_bomb_fails_naming_the_limit():
    dev = device(max_worker_memory_bytes=1 << 30)
    try:
        prepared = dev.prepareModel_1_3(model("Bomb"))
        with pytest.raises(GeneralFailure) as info:
            prepared.compiled.run([X])
        assert "max_worker_memory_bytes" in info.value.message, info.value.message
        # the device still works (the same worker, or a fresh one)
        (child,) = dev.prepareModel_1_3(model("Spawn")).compiled.run([X])[0]
        assert child > 0
    finally:
        dev.close()


_SERVER = """
import sys
from nnhal.driver.device import Device
from nnhal.driver.op_packages.discovery import load_path
from nnhal.driver.profile import parse_profile
sys.path[:0] = sys.argv[2:4]
from test_isolation_workers import model, X
dev = Device(parse_profile({"name": "c"}), op_packages=load_path(sys.argv[1]))
(child,) = dev.prepareModel_1_3(model("Spawn")).compiled.run([X])[0]
print(int(child), flush=True)
sys.stdin.read()
"""


@pytest.mark.slow
def test_a_kernels_children_end_when_the_server_is_killed():
    proc = subprocess.Popen(
        [sys.executable, "-c", _SERVER, str(CONFIG), os.path.dirname(__file__),
         str(REPO_ROOT / "tests")],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO_ROOT,
    )
    try:
        child = int(proc.stdout.readline())
        assert alive(child)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        # the worker's watchdog sees its parent gone and ends its whole group
        assert wait_gone(child), f"the kernel's child {child} outlived the server"
    finally:
        if proc.poll() is None:
            proc.kill()
