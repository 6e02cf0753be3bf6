"""The standard gRPC health service (``grpc.health.v1.Health``) for a server's devices.

Service names: ``""`` (the server as a whole) and each device's name. A device
is SERVING while its status is AVAILABLE or BUSY and it is not offline
(``INnhalControl.setOffline``, a ``[faults]`` table with ``offline = true``),
else NOT_SERVING. ``""`` is SERVING while at least one device serves. From the
start of a shutdown every name is NOT_SERVING and open ``Watch`` streams end
after saying so (so a watching load balancer never holds the shutdown's grace
period). An unknown name is NOT_FOUND for ``Check`` and SERVICE_UNKNOWN for
``Watch``, as the protocol says.

Statuses are computed when asked (``Check``, ``List``), so they are exact at
that moment; a ``Watch`` stream looks again every ``poll_s`` seconds and sends
only changes. Health calls need no bearer token (``nnhal.driver.security``): probes
such as Kubernetes' cannot send one, and a status reveals nothing else.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from typing import Any

import grpc
from grpc_health.v1 import health_pb2 as hpb
from grpc_health.v1 import health_pb2_grpc as hgrpc

from nnhal.types import DeviceStatus

SERVING = hpb.HealthCheckResponse.SERVING
NOT_SERVING = hpb.HealthCheckResponse.NOT_SERVING
SERVICE_UNKNOWN = hpb.HealthCheckResponse.SERVICE_UNKNOWN
HEALTH_SERVICE = "grpc.health.v1.Health"


def _device_serving(state: Any) -> bool:
    if state.faults.offline:
        return False
    try:
        status = state.device.getStatus()
    except Exception:  # noqa: BLE001 - a device that cannot say is not serving
        return False
    return status in (DeviceStatus.AVAILABLE, DeviceStatus.BUSY)


class DeviceHealth(hgrpc.HealthServicer):
    """Health of the devices of one server (``states``: device name -> ServiceState)."""

    def __init__(self, states: Mapping[str, Any], poll_s: float = 0.5) -> None:
        self._states = dict(states)
        self._poll_s = poll_s
        self._closing = threading.Event()

    def statuses(self) -> dict[str, int]:
        """Every service name's status now."""
        if self._closing.is_set():
            return {name: NOT_SERVING for name in ("", *self._states)}
        devices = {
            name: SERVING if _device_serving(s) else NOT_SERVING for name, s in self._states.items()
        }
        overall = SERVING if SERVING in devices.values() else NOT_SERVING
        return {"": overall, **devices}

    def status(self, service: str) -> int | None:
        return self.statuses().get(service)

    def shutdown(self) -> None:
        """Every name NOT_SERVING from now on; Watch streams end after saying so."""
        self._closing.set()

    # -- the RPCs ---------------------------------------------------------

    def Check(self, request: Any, context: grpc.ServicerContext) -> Any:
        status = self.status(request.service)
        if status is None:
            context.abort(grpc.StatusCode.NOT_FOUND, f"no service {request.service!r} here")
        return hpb.HealthCheckResponse(status=status)

    def List(self, request: Any, context: grpc.ServicerContext) -> Any:
        statuses = {name: hpb.HealthCheckResponse(status=s) for name, s in self.statuses().items()}
        return hpb.HealthListResponse(statuses=statuses)

    def Watch(self, request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        last = None
        while True:
            # read before the status: if the shutdown starts after this, the next round
            # (which does not wait) still sends NOT_SERVING before the stream ends
            closing = self._closing.is_set()
            status = self.status(request.service)
            status = SERVICE_UNKNOWN if status is None else status
            if status != last:
                yield hpb.HealthCheckResponse(status=status)
                last = status
            if closing or not context.is_active():
                return
            self._closing.wait(self._poll_s)
