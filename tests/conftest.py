"""Shared fixtures: an in-process nnhal server and a client connected to it.

- ``driver_device``: the default driver ``Device`` (built-in profile), one per session.
- ``server_address``: "host:port" of a gRPC server on 127.0.0.1 (ephemeral port) serving
  ``driver_device``; started once per session, stopped at the end.
- ``client_device``: an ``nnhal.client.Device`` connected to it, closed after the test.
- ``shapes_mode``: runs an executor test twice, with shape proofs and with
  ``NNHAL_STRICT_SHAPES=1``.

The executor (``NNHAL_EXECUTOR``, ``driver/executor/model.py``) defaults to
``generated`` here unless the environment sets it: most tests run a model once,
and under the product's default (``tiered``) that one execution would be
interpreted, leaving the generated code they were written for untested. The
interpreter has tests of its own and the whole vector corpus (in-process:
``tiered``; against ``nnhal serve``: this setting). ``NNHAL_EXECUTOR=interpreted
pytest`` runs every test through the interpreter.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

os.environ.setdefault("NNHAL_EXECUTOR", "generated")  # also for the servers tests start


@pytest.fixture(scope="session")
def driver_device():
    from nnhal.driver.device import Device

    return Device()


@pytest.fixture(scope="session")
def server_address(driver_device) -> Iterator[str]:
    from nnhal.driver.service import create_server

    server, address = create_server(driver_device, "127.0.0.1:0")
    try:
        yield address
    finally:
        server.stop(grace=None).wait()


@pytest.fixture
def client_device(server_address: str):
    from nnhal.client import connect

    device = connect(server_address, timeout=10.0)
    try:
        yield device
    finally:
        device.close()


@pytest.fixture
def generated_executor(monkeypatch):
    """For tests of generated code itself (its caches, recipes, lazy parts): models
    compiled during the test generate their code at compile time, whatever
    ``NNHAL_EXECUTOR`` the run was given."""
    monkeypatch.setenv("NNHAL_EXECUTOR", "generated")


@pytest.fixture(params=["generated", "interpreted"])
def each_executor(request, monkeypatch):
    """Runs a test with the model's code generated and with it interpreted (both
    executors must answer alike: outputs, errors and the steps they name)."""
    monkeypatch.setenv("NNHAL_EXECUTOR", request.param)
    return request.param


@pytest.fixture(params=["proven", "strict"])
def shapes_mode(request, monkeypatch):
    """Run executor tests with shape proofs and with NNHAL_STRICT_SHAPES=1."""
    if request.param == "strict":
        monkeypatch.setenv("NNHAL_STRICT_SHAPES", "1")
    return request.param
