"""nnhal extensions for clients and app tests: device choice, sync fences, faults, trace.

- ``select_device(channel, name)``: a channel whose every call carries the
  gRPC metadata ``nnhal-device: name`` (``nnhal.client.connect(..., device=)``;
  per-call metadata, ``nnhal._metadata``).
- ``list_devices(address)``: the server's devices (name, version, type), like
  the Android service manager's listing.
- ``create_fence`` / ``signal_fence`` / ``wait_fence``: client sync fences for
  ``executeFenced(waitFor=...)``.
- ``Control``: ``set_faults`` (a ``[faults]`` table as TOML text or a dict),
  ``set_offline``, ``trace`` (the device's call trace, parsed JSON), ``resource_usage``
  (the server's memory, threads, files, shared memory and live objects).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import grpc

from nnhal._metadata import with_metadata
from nnhal._proto.v1_3 import control_pb2 as cpb
from nnhal._proto.v1_3 import control_pb2_grpc as cgrpc
from nnhal._proto.v1_3 import prepared_model_pb2 as ppb
from nnhal.errors import DeviceUnavailable, error_from_status
from nnhal.types import DeviceType, ErrorStatus

DEVICE_HEADER = "nnhal-device"
SESSION_HEADER = "nnhal-session"
FENCE_STATES = {0: "ACTIVE", 1: "SIGNALED", 2: "ERROR"}


def select_device(channel: grpc.Channel, name: str) -> grpc.Channel:
    """``channel`` with ``nnhal-device: name`` on every call."""
    return with_metadata(channel, ((DEVICE_HEADER, name),))


def _ok(reply: Any) -> Any:
    if reply.status != ErrorStatus.NONE:
        raise error_from_status(reply.status, reply.message)
    return reply


# ---- fences ----


def create_fence(device: Any) -> int:
    """A sync fence the client signals itself (``device``: an nnhal.client.Device)."""
    return _ok(device.fence_stub.createFence(ppb.CreateFenceRequest())).fence


def signal_fence(device: Any, fence: int, status: ErrorStatus = ErrorStatus.NONE) -> None:
    """Signal a client fence: NONE = signalled, any other status = error state."""
    _ok(device.fence_stub.signalFence(ppb.SignalFenceRequest(fence=fence, fenceStatus=int(status))))


def wait_fence(device: Any, fence: int, timeout_s: float = 0.0) -> str:
    """Wait up to ``timeout_s`` for the fence; its state: ACTIVE, SIGNALED or ERROR."""
    message = ppb.WaitFenceRequest(fence=fence, timeoutMs=int(timeout_s * 1000))
    return FENCE_STATES[_ok(device.fence_stub.waitFence(message)).state]


# ---- control ----


class Control:
    """The INnhalControl service of a server at ``address`` (or on an existing channel)."""

    def __init__(
        self, address: str | None = None, channel: grpc.Channel | None = None, security: Any = None
    ) -> None:
        from nnhal._client_security import open_channel  # TLS and token (default: environment)

        self._own = channel is None
        self.channel = channel if channel is not None else open_channel(address or "", (), security)
        self.stub = cgrpc.INnhalControlStub(self.channel)

    def __enter__(self) -> Control:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._own:
            self.channel.close()

    def _call(self, method: Callable, message: Any) -> Any:
        try:
            return _ok(method(message, timeout=30))
        except grpc.RpcError as exc:
            raise DeviceUnavailable(f"nnhal control: {exc.code()}: {exc.details()}") from None

    def list_devices(self) -> list[dict[str, Any]]:
        try:
            reply = self.stub.listDevices(cpb.ListDevicesRequest(), timeout=30)
        except grpc.RpcError as exc:
            raise DeviceUnavailable(f"nnhal control: {exc.code()}: {exc.details()}") from None
        return [
            {
                "name": d.name,
                "versionString": d.versionString,
                "type": DeviceType(d.type).name,
                "description": d.description,
                "profile": d.profileSource,
            }
            for d in reply.devices
        ]

    def set_faults(self, faults: str | dict | list, device: str = "") -> Any:
        """Replace the device's faults: TOML text of a [faults] table, or its parsed form."""
        text = faults if isinstance(faults, str) else _to_toml(faults)
        reply = self._call(self.stub.setFaults, cpb.SetFaultsRequest(device=device, toml=text))
        return json.loads(reply.json or "null")

    def set_offline(self, offline: bool = True, device: str = "") -> None:
        self._call(self.stub.setOffline, cpb.SetOfflineRequest(device=device, offline=offline))

    def trace(self, device: str = "", clear: bool = False) -> list[dict[str, Any]]:
        reply = self._call(self.stub.getTrace, cpb.GetTraceRequest(device=device, clear=clear))
        return json.loads(reply.json)

    def resource_usage(self) -> dict[str, Any]:
        """The server's resources and live objects (see driver/resources.py for the keys)."""
        reply = self._call(self.stub.getResourceUsage, cpb.ResourceUsageRequest())
        return json.loads(reply.json)


def list_devices(address: str, security: Any = None) -> list[dict[str, Any]]:
    with Control(address, security=security) as control:
        return control.list_devices()


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"cannot write {type(v).__name__} as TOML")


def _to_toml(faults: dict | list) -> str:
    """{"rules": [...], "seed": 1, ...} (or just the rules list) as a [faults] TOML table."""
    if isinstance(faults, list):
        faults = {"rules": faults}
    lines = ["[faults]"]
    for key, value in faults.items():
        if key != "rules":
            lines.append(f"{key} = {_value(value)}")
    for rule in faults.get("rules", []):
        lines.append("[[faults.rules]]")
        lines.extend(f"{k} = {_value(v)}" for k, v in rule.items())
    return "\n".join(lines) + "\n"
