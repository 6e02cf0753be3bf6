"""The nnhal pytest plugin: app tests against a mock NNAPI accelerator.

Installed with nnhal (entry point ``pytest11``), so an app's test suite gets,
with no code of its own:

- ``nnhal_server``: an ``nnhal serve`` for the test, stopped (and waited for)
  afterwards. Configure it with the marker
  ``@pytest.mark.nnhal(profiles=[...], op_packages=[...], faults=..., process=False)``
  or the ini options ``nnhal_profiles`` / ``nnhal_op_packages``; by default one
  device with the built-in ``default`` profile, in this process.
  ``process=True`` runs a real ``nnhal serve`` subprocess instead.
- ``nnhal_client``: an ``nnhal.client.Device`` connected to the server's first
  device (``nnhal_server.client(device)`` for another one), closed afterwards.
- ``nnhal_control``: an ``nnhal.control.Control`` of the server: faults,
  offline, the call trace, resource usage.
- ``nnhal_trace``: assertions on the call trace: ``nnhal_trace.calls(method)``,
  ``nnhal_trace.assert_called(method, status="NONE", times=None)``.

``faults`` is a profile ``[faults]`` table as TOML text, a ``pathlib.Path`` to
such a file, or its parsed form (see docs/app-testing.md); it is applied to
every device.

Nothing here is imported by nnhal itself, and the driver is imported only when
a fixture starts an in-process server, so the plugin costs an app's test
session nothing until it is used.
"""

from __future__ import annotations

import fnmatch
import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

#: how long a server subprocess may take to print its address (a slow machine)
START_TIMEOUT_S = 120.0
_ADDRESS = re.compile(r"on (\S+:\d+)\s*$")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "nnhal_profiles", "device profiles nnhal_server serves (names or paths)", type="linelist"
    )
    parser.addini(
        "nnhal_op_packages", "op packages (configs or folders) nnhal_server loads", type="linelist"
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "nnhal(profiles=None, op_packages=None, faults=None, process=False): "
        "how the nnhal_server fixture serves (nnhal pytest plugin)",
    )


@dataclass
class ServerOptions:
    profiles: list[str] = field(default_factory=lambda: ["default"])
    op_packages: list[str] = field(default_factory=list)
    faults: Any = None
    process: bool = False

    @classmethod
    def for_test(cls, request: pytest.FixtureRequest) -> ServerOptions:
        marker = request.node.get_closest_marker("nnhal")
        kw = dict(marker.kwargs) if marker is not None else {}
        unknown = set(kw) - {"profiles", "op_packages", "faults", "process"}
        if unknown or (marker is not None and marker.args):
            raise pytest.UsageError(
                f"@pytest.mark.nnhal takes profiles=, op_packages=, faults=, process= "
                f"(got {sorted(unknown) or list(marker.args)})"
            )
        ini_profiles = request.config.getini("nnhal_profiles")
        ini_packages = request.config.getini("nnhal_op_packages")
        return cls(
            profiles=list(kw.get("profiles") or ini_profiles or ["default"]),
            op_packages=[str(p) for p in (kw.get("op_packages") or ini_packages or [])],
            faults=kw.get("faults"),
            process=bool(kw.get("process", False)),
        )


class NnhalServer:
    """A running ``nnhal serve``: its address, devices, and clients to it."""

    def __init__(self, options: ServerOptions) -> None:
        self.options = options
        self.address = ""
        self.devices: list[str] = []
        self._server: Any = None
        self._drivers: list[Any] = []
        self._process: subprocess.Popen[str] | None = None
        self._clients: list[Any] = []

    # -- starting and stopping ----------------------------------------------------

    def start(self) -> NnhalServer:
        if self.options.process:
            self._start_process()
        else:
            self._start_in_process()
        from nnhal.control import Control

        with Control(self.address) as control:
            self.devices = [d["name"] for d in control.list_devices()]
            if self.options.faults is not None:
                for name in self.devices:
                    control.set_faults(_faults_text(self.options.faults), device=name)
        return self

    def _start_in_process(self) -> None:
        from nnhal.driver.device import Device
        from nnhal.driver.op_packages.discovery import load_path
        from nnhal.driver.profile import load_profile
        from nnhal.driver.service import create_server

        packages = [p for path in self.options.op_packages for p in load_path(path)]
        self._drivers = [
            Device(load_profile(profile), op_packages=packages) for profile in self.options.profiles
        ]
        self._server, self.address = create_server(self._drivers, "127.0.0.1:0")

    def _start_process(self) -> None:
        argv = [sys.executable, "-m", "nnhal", "serve", "--address", "127.0.0.1:0"]
        for profile in self.options.profiles:
            argv += ["--profile", str(profile)]
        for package in self.options.op_packages:
            argv += ["--op-package", str(package)]
        self._process = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "GRPC_VERBOSITY": "ERROR"},
        )  # fmt: skip
        printed = []
        stdout = self._process.stdout
        assert stdout is not None
        for line in stdout:  # blocks until the server prints its address
            printed.append(line)
            found = _ADDRESS.search(line)
            if found and "serving" in line:
                self.address = found.group(1)
                # keep reading: a server whose log fills an unread pipe blocks
                threading.Thread(target=stdout.read, daemon=True).start()
                return
        self._process.wait(timeout=START_TIMEOUT_S)
        raise RuntimeError("nnhal serve did not start:\n" + "".join(printed))

    def stop(self) -> None:
        """Close the clients, stop the server and wait until it has stopped."""
        for client in self._clients:
            client.close()
        self._clients.clear()
        if self._server is not None:
            self._server.stop(grace=None).wait()
            self._server = None
        for device in self._drivers:
            device.close()  # op-package worker processes
        self._drivers.clear()
        if self._process is not None:
            self._process.send_signal(signal.SIGTERM)
            try:
                self._process.wait(timeout=START_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None

    # -- what a test uses ----------------------------------------------------------

    def client(self, device: str | None = None, **kwargs: Any) -> Any:
        """A connected ``nnhal.client.Device`` (closed when the server stops)."""
        from nnhal.client import connect

        if device is not None and device not in self.devices:
            raise ValueError(f"no device {device!r} on this server (it has {self.devices})")
        client = connect(self.address, device=device, **kwargs)
        self._clients.append(client)
        return client

    def control(self) -> Any:
        from nnhal.control import Control

        return Control(self.address)


def _faults_text(faults: Any) -> Any:
    """A path (``os.PathLike``) is a faults file; text and parsed tables pass as they are."""
    if isinstance(faults, os.PathLike):
        return Path(faults).read_text(encoding="utf-8")
    return faults


class NnhalTrace:
    """The call trace of one device, for assertions."""

    def __init__(self, control: Any, device: str = "") -> None:
        self.control = control
        self.device = device

    def calls(self, method: str = "*") -> list[dict[str, Any]]:
        """The traced calls whose method matches ``method`` (a glob), oldest first."""
        return [c for c in self.control.trace(self.device) if fnmatch.fnmatch(c["method"], method)]

    def clear(self) -> None:
        self.control.trace(self.device, clear=True)

    def assert_called(
        self, method: str, status: str | None = "NONE", times: int | None = None
    ) -> list[dict[str, Any]]:
        """Assert calls of ``method`` happened (with ``status`` unless None; exactly
        ``times`` of them unless None); returns them."""
        calls = self.calls(method)
        matching = [c for c in calls if status is None or c["status"] == status]
        shown = ", ".join(f"{c['method']}={c['status']}" for c in self.calls()) or "no calls"
        if times is None:
            assert matching, f"no {method} call with status {status}; trace: {shown}"
        else:
            assert len(matching) == times, (
                f"{len(matching)} {method} calls with status {status}, expected {times}; "
                f"trace: {shown}"
            )
        return matching

    def statuses(self, method: str = "*") -> Sequence[str]:
        return [c["status"] for c in self.calls(method)]


@pytest.fixture
def nnhal_server(request: pytest.FixtureRequest) -> Iterator[NnhalServer]:
    """A running nnhal server configured by ``@pytest.mark.nnhal`` (see the module doc)."""
    server = NnhalServer(ServerOptions.for_test(request))
    try:
        yield server.start()
    finally:
        server.stop()


@pytest.fixture
def nnhal_client(nnhal_server: NnhalServer) -> Any:
    """A client ``Device`` connected to the server's first device."""
    return nnhal_server.client()


@pytest.fixture
def nnhal_control(nnhal_server: NnhalServer) -> Iterator[Any]:
    control = nnhal_server.control()
    try:
        yield control
    finally:
        control.close()


@pytest.fixture
def nnhal_trace(nnhal_control: Any) -> NnhalTrace:
    """The call trace of the server's first device."""
    return NnhalTrace(nnhal_control)
