"""The driver in this process, for commands run without ``--target``.

It sits behind a real gRPC server on a free loopback port, so an in-process
run takes the same path as a run against ``nnhal serve``. Its cache root is
the system's temporary folder: the only client is this process, and the
conformance suite's caching tests name their cache files in temporary
folders there (the server still creates them exclusively and follows no link).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from nnhal.vector_runner import connect_device


@contextmanager
def local_device(profile: str | None = None, **device_options: Any) -> Iterator[Any]:
    """The driver in this process behind a gRPC server on a free port; yields a client Device.

    ``device_options`` are ``Device(...)`` keywords, as ``nnhal serve`` builds them
    (``nnhal.tools.cli_oppkg.device_options``: op packages and their backend).
    """
    from nnhal.driver.device import Device
    from nnhal.driver.profile import load_profile
    from nnhal.driver.security import ServerSecurity
    from nnhal.driver.server import create_server

    device = Device(load_profile(profile), **device_options)
    security = ServerSecurity(cache_roots=(tempfile.gettempdir(),))
    server, address = create_server(device, "127.0.0.1:0", security=security)
    try:
        with connect_device(address) as dev:
            yield dev
    finally:
        server.stop(None)
        device.close()
