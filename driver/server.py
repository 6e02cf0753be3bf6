"""The gRPC server: one or several devices behind the HAL services, and INnhalControl.

Each device gets its own ``ServiceState`` (object registries, faults, trace);
one servicer per HAL service serves them all, each call resolving its device
once (``_service_support.Devices.call``) from the gRPC metadata key
``nnhal-device`` (the device name); without it, the first device. A name that
no device has aborts the call with gRPC NOT_FOUND (a transport-level "no such
service", as asking the Android service manager for a missing instance). ``INnhalControl`` (control.proto) lists the devices and changes
their faults, offline state and trace, and keeps client sessions alive
(``nnhal.driver.sessions``: one table for the server, whose expiry releases the
session's objects on every device).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
from grpc_reflection.v1alpha import reflection as reflection_service
from nnhal.driver._service_support import Devices, ServiceState
from nnhal.driver.faults import parse_toml
from nnhal.driver.limits import grpc_options
from nnhal.driver.security import Guard
from nnhal.driver.service import (
    BufferServicer,
    DeviceServicer,
    FencedExecutionCallbackServicer,
    PreparedModelServicer,
    SyncFenceServicer,
)
from nnhal.driver.sessions import SessionTable
from nnhal.driver.streams import CONNECTION_OPTIONS, StreamGate, StreamLimits
from nnhal.driver.workers import ExecutionPool

from nnhal import DEFAULT_ADDRESS
from nnhal._proto.v1_3 import control_pb2 as cpb
from nnhal._proto.v1_3 import control_pb2_grpc as cgrpc
from nnhal._proto.v1_3 import device_pb2 as dpb
from nnhal._proto.v1_3 import device_pb2_grpc as dgrpc
from nnhal._proto.v1_3 import prepared_model_pb2 as ppb
from nnhal._proto.v1_3 import prepared_model_pb2_grpc as pgrpc
from nnhal.errors import HalError
from nnhal.types import ErrorStatus

log = logging.getLogger("nnhal.driver.service")

#: The services a server answers, as server reflection lists them.
SERVICE_NAMES: tuple[str, ...] = (
    dpb.DESCRIPTOR.services_by_name["IDevice"].full_name,
    ppb.DESCRIPTOR.services_by_name["IPreparedModel"].full_name,
    ppb.DESCRIPTOR.services_by_name["IBuffer"].full_name,
    ppb.DESCRIPTOR.services_by_name["IFencedExecutionCallback"].full_name,
    ppb.DESCRIPTOR.services_by_name["ISyncFence"].full_name,
    cpb.DESCRIPTOR.services_by_name["INnhalControl"].full_name,
    "grpc.health.v1.Health",
    reflection_service.SERVICE_NAME,
)

class ControlServicer(cgrpc.INnhalControlServicer):
    def __init__(self, states: dict[str, ServiceState], sessions: SessionTable) -> None:
        self.states = states
        self.sessions = sessions

    def _state(self, name: str) -> ServiceState:
        if not name:
            return next(iter(self.states.values()))
        state = self.states.get(name)
        if state is None:
            raise HalError(f"no device {name!r} (devices: {', '.join(self.states)})")
        return state

    def _reply(self, fn: Callable[[], str]) -> cpb.ControlReply:
        try:
            return cpb.ControlReply(status=ErrorStatus.NONE, json=fn())
        except HalError as exc:
            return cpb.ControlReply(status=ErrorStatus.INVALID_ARGUMENT, message=exc.message)

    def listDevices(
        self, request: cpb.ListDevicesRequest, context: grpc.ServicerContext
    ) -> cpb.ListDevicesReply:
        devices = []
        for state in self.states.values():
            d = state.device
            profile = getattr(d, "profile", None)
            devices.append(
                cpb.DeviceInfo(
                    name=d.name,
                    versionString=d.getVersionString(),
                    type=int(d.getType()),
                    description=getattr(profile, "description", ""),
                    profileSource=str(getattr(profile, "source", "")),
                )
            )
        return cpb.ListDevicesReply(devices=devices)

    def setFaults(
        self, request: cpb.SetFaultsRequest, context: grpc.ServicerContext
    ) -> cpb.ControlReply:
        def run() -> str:
            state = self._state(request.device)
            state.faults.set(parse_toml(request.toml) if request.toml.strip() else None)
            log.warning("faults of %s set: %s", state.device.name, state.faults.describe())
            return json.dumps(state.faults.describe())

        return self._reply(run)

    def setOffline(
        self, request: cpb.SetOfflineRequest, context: grpc.ServicerContext
    ) -> cpb.ControlReply:
        def run() -> str:
            state = self._state(request.device)
            state.faults.offline = bool(request.offline)
            log.warning(
                "device %s %s", state.device.name, "offline" if request.offline else "online"
            )
            return json.dumps({"offline": state.faults.offline})

        return self._reply(run)

    def getTrace(
        self, request: cpb.GetTraceRequest, context: grpc.ServicerContext
    ) -> cpb.ControlReply:
        return self._reply(
            lambda: json.dumps(self._state(request.device).trace.entries(clear=request.clear))
        )

    def keepAlive(
        self, request: cpb.KeepAliveRequest, context: grpc.ServicerContext
    ) -> cpb.KeepAliveReply:
        try:
            granted = self.sessions.keep_alive(request.session, request.leaseMillis)
        except HalError as exc:
            return cpb.KeepAliveReply(status=ErrorStatus.INVALID_ARGUMENT, message=exc.message)
        return cpb.KeepAliveReply(status=ErrorStatus.NONE, leaseMillis=granted)

    def endSession(
        self, request: cpb.EndSessionRequest, context: grpc.ServicerContext
    ) -> cpb.ControlReply:
        def run() -> str:
            if not request.session:
                raise HalError("endSession: empty session id")
            return json.dumps({"released": self.sessions.end(request.session)})

        return self._reply(run)

    def getResourceUsage(
        self, request: cpb.ResourceUsageRequest, context: grpc.ServicerContext
    ) -> cpb.ControlReply:
        from nnhal.driver.resources import (
            resource_usage,  # stress / leak checks (driver/resources.py)
        )

        return self._reply(lambda: json.dumps(resource_usage(self.states)))


def _why_busy(port: str) -> str | None:
    """"port N is in use (by process PID ...)" when something listens on it, else None.
    Best effort: Linux /proc only; the holder is named when this user may see it."""
    try:
        number = int(port)
    except ValueError:
        return None
    if number <= 0:
        return None
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            # local address "HEX_IP:HEX_PORT", state 0A = LISTEN, inode in column 10
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == number:
                inodes.add(fields[9])
    if not inodes:
        return None
    wanted = {f"socket:[{inode}]" for inode in inodes}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                if os.readlink(fd) in wanted:
                    cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                        errors="replace"
                    ).strip()
                    return f"port {number} is in use by process {proc.name} ({cmd[:120]})"
        except OSError:
            continue
    return f"port {number} is in use"


def _split_address(address: str) -> tuple[str, str]:
    if address.startswith("[") and "]:" in address:  # [::1]:port
        host, _, port = address.rpartition(":")
        return host, port
    if address.count(":") == 1:
        host, _, port = address.partition(":")
        return host, port
    return address, "0"  # a bare host (IPv4, name or IPv6 without brackets): ephemeral port


def create_server(
    devices: Any,
    address: str = "127.0.0.1:0",
    max_workers: int = 16,
    *,
    security: Any = None,
    streams: StreamLimits | None = None,
    reflection: bool = True,
    execution_workers: int = 0,
    worker_threads: int = 1,
) -> tuple[grpc.Server, str]:
    """Start a gRPC server for one device or a sequence of devices (names must differ);
    returns it and the "host:port" actually bound.

    ``max_workers``: threads kept for unary calls; open streams (bursts, health
    watches) have threads of their own within ``streams`` (``nnhal.driver.streams``),
    so no number of open streams delays a unary call.
    ``execution_workers``: run executions in that many worker processes (each with
    ``worker_threads`` BLAS threads), so that executions of different clients use every
    core (``nnhal.driver.workers``; 0: in this process, the lowest single-client latency).
    ``security``: a ``nnhal.driver.security.ServerSecurity`` (TLS, tokens, ...); without TLS
    an address that is not loopback is refused (ValueError) unless it allows insecure.
    The server also serves grpc.health.v1.Health (``nnhal.driver.health``) and, unless
    ``reflection`` is False, gRPC server reflection (grpc.reflection.v1alpha, grpcio-reflection:
    grpcurl, grpc_cli or Postman list and call the services without the .proto files; with
    bearer tokens, reflection calls need one too).
    """
    devices = list(devices) if isinstance(devices, Sequence) else [devices]
    if not devices:
        raise ValueError("no device to serve")
    states: dict[str, ServiceState] = {}

    def release_session(session: str, reason: str) -> int:
        return sum(state.release_session(session, reason) for state in states.values())

    pool_probe: list[Callable[[], bool]] = []
    sessions = SessionTable(release_session, backlog=lambda: any(p() for p in pool_probe))
    names = [getattr(device, "name", str(device)) for device in devices]
    duplicate = next((name for name in names if names.count(name) > 1), None)
    if duplicate is not None:
        raise ValueError(f"two devices are named {duplicate!r}; device names must differ")
    workers = (
        ExecutionPool(execution_workers, threads=worker_threads) if execution_workers else None
    )
    for device, name in zip(devices, names):
        try:
            states[name] = ServiceState(device, sessions, workers)
        except HalError as exc:  # a bad [faults] table
            raise ValueError(f"device {name!r}: {exc.message}") from None
    host, port = _split_address(address)
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    guard = Guard(host, security, states)  # exposure, tokens (driver/security.py)
    gate = StreamGate(streams)  # stream budgets (driver/streams.py)
    pool = ThreadPoolExecutor(
        max_workers=gate.limits.pool_size(max_workers), thread_name_prefix="nnhal-rpc"
    )
    # calls queued for a thread: lease renewals may be among them (driver/sessions.py)
    pool_probe.append(lambda: pool._work_queue.qsize() > 0)
    server = grpc.server(
        pool,
        # the devices' max_message_bytes, and idle / dead connections closed
        # one server per address: without SO_REUSEPORT a busy port fails the bind, instead
        # of the kernel spreading clients over two servers
        options=[*grpc_options(devices), *CONNECTION_OPTIONS, ("grpc.so_reuseport", 0)],
        # the token check first: an unauthenticated burst is refused without counting
        interceptors=[*guard.interceptors, gate],
    )
    guard.streams = gate
    # one servicer per service for all devices: each call names its device (Devices.call;
    # with one device too, a call naming a device the server lacks must fail)
    table = Devices(states)
    dgrpc.add_IDeviceServicer_to_server(DeviceServicer(table), server)
    pgrpc.add_IPreparedModelServicer_to_server(PreparedModelServicer(table), server)
    pgrpc.add_IBufferServicer_to_server(BufferServicer(table), server)
    pgrpc.add_IFencedExecutionCallbackServicer_to_server(
        FencedExecutionCallbackServicer(table), server
    )
    pgrpc.add_ISyncFenceServicer_to_server(SyncFenceServicer(table), server)
    cgrpc.add_INnhalControlServicer_to_server(ControlServicer(states, sessions), server)
    guard.add_services(server)
    if reflection:
        reflection_service.enable_server_reflection(SERVICE_NAMES, server)
    try:
        bound = guard.add_port(server, f"{host}:{port}")
    except RuntimeError as exc:
        raise OSError(f"cannot listen on {host}:{port}: {_why_busy(port) or exc}") from exc
    if bound == 0:
        raise OSError(f"cannot listen on {host}:{port}: {_why_busy(port) or 'the bind failed'}")
    if workers is not None:
        guard.on_stopped.append(workers.close)
    server.start()
    log.info("nnhal driver %s listening on %s:%d", ", ".join(states), host, bound)
    return guard.wrap(server), f"{host}:{bound}"


def close_devices(devices: Any) -> None:
    """Stop what the devices run beside the server (op-package worker processes)."""
    for device in devices if isinstance(devices, Sequence) else [devices]:
        close = getattr(device, "close", None)
        if close is not None:
            close()


def serve_forever(
    devices: Any,
    address: str = DEFAULT_ADDRESS,
    max_workers: int = 16,
    *,
    grace: float = 2.0,
    on_ready: Callable[[str], None] | None = None,
    security: Any = None,
    streams: StreamLimits | None = None,
    reflection: bool = True,
) -> None:
    """Serve until SIGINT or SIGTERM, then stop cleanly (arguments: ``create_server``).

    ``on_ready`` is called with the bound "host:port" once the server accepts
    calls. Signal handlers are only installed from the main thread (elsewhere
    the call serves until the process ends); the previous ones are restored.
    """
    server, bound = create_server(
        devices, address, max_workers, security=security, streams=streams, reflection=reflection
    )
    stop = threading.Event()

    def request_stop(signum: int, frame: Any) -> None:
        log.info("received %s: shutting down", signal.Signals(signum).name)
        stop.set()

    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, request_stop)
    try:
        if on_ready is not None:
            on_ready(bound)
        while not stop.wait(0.5):
            pass
    finally:
        server.stop(grace).wait()
        close_devices(devices)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        log.info("nnhal driver on %s stopped", bound)
