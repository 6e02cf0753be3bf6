"""Shared helpers of the runtime tests: served devices with chosen profiles."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any

from nnhal.runtime.devices import connect_target

from nnhal.types import OperationType


def alternate_profile(name: str = "half-npu", keep_even: bool = True) -> dict[str, Any]:
    """A profile excluding every other operation type (by code), faster than the CPU so the
    partitioner prefers it where it can: nearly every model spans it and the CPU."""
    codes = sorted(int(o) for o in OperationType if o != OperationType.OEM_OPERATION)
    excluded = [OperationType(c).name for i, c in enumerate(codes) if (i % 2 == 1) == keep_even]
    return {
        "name": name,
        "type": "ACCELERATOR",
        "exclude_operations": excluded,
        "capabilities": {"default": {"execTime": 0.5, "powerUsage": 0.5}},
    }


@contextmanager
def served(*profiles: dict[str, Any], cache_root: Any = None):
    """Serve one driver Device per profile (one server); yield runtime ClientDevices.

    ``cache_root``: where clients may name compilation cache files (none: refused)."""
    from nnhal.driver.device import Device
    from nnhal.driver.profile import parse_profile
    from nnhal.driver.security import ServerSecurity
    from nnhal.driver.server import create_server

    security = ServerSecurity(cache_roots=(str(cache_root),)) if cache_root else None
    server, address = create_server(
        [Device(parse_profile(p)) for p in profiles], "127.0.0.1:0", security=security
    )
    devices = []
    try:
        for p in profiles:
            devices.append(connect_target(f"{address}/{p['name']}"))
        yield address, devices
    finally:
        for d in devices:
            d.device.close()
        server.stop(None)
