"""gRPC server reflection (grpcio-reflection): on by default, off with reflection=False
(``nnhal serve --no-reflection``); asked with the reflection client stub, as grpcurl would."""

from __future__ import annotations

import grpc
import pytest
from grpc_reflection.v1alpha import reflection_pb2 as rpb
from grpc_reflection.v1alpha import reflection_pb2_grpc as rgrpc
from nnhal.driver.device import Device
from nnhal.driver.server import create_server

HAL_SERVICES = {
    "nnhal.v1_3.IDevice",
    "nnhal.v1_3.IPreparedModel",
    "nnhal.v1_3.IBuffer",
    "nnhal.v1_3.IFencedExecutionCallback",
    "nnhal.v1_3.ISyncFence",
    "nnhal.v1_3.INnhalControl",
}


def _ask(address: str, *requests: rpb.ServerReflectionRequest) -> list:
    with grpc.insecure_channel(address) as channel:
        stub = rgrpc.ServerReflectionStub(channel)
        return list(stub.ServerReflectionInfo(iter(requests), timeout=30))


@pytest.fixture
def served():
    def start(**options):
        server, address = create_server(Device(), "127.0.0.1:0", **options)
        started.append(server)
        return address

    started: list = []
    yield start
    for server in started:
        server.stop(None).wait()


def test_reflection_lists_the_hal_services(served) -> None:
    address = served()
    (reply,) = _ask(address, rpb.ServerReflectionRequest(list_services=""))
    names = {s.name for s in reply.list_services_response.service}
    assert HAL_SERVICES <= names
    assert {"grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection"} <= names


def test_reflection_describes_a_hal_method(served) -> None:
    """A tool can build a call from the descriptors alone (no .proto files)."""
    from google.protobuf import descriptor_pb2

    address = served()
    (reply,) = _ask(
        address,
        rpb.ServerReflectionRequest(file_containing_symbol="nnhal.v1_3.IPreparedModel"),
    )
    files = [
        descriptor_pb2.FileDescriptorProto.FromString(raw)
        for raw in reply.file_descriptor_response.file_descriptor_proto
    ]
    methods = {
        m.name for f in files for s in f.service if s.name == "IPreparedModel" for m in s.method
    }
    assert {"execute_1_3", "configureExecutionBurst", "executeFenced"} <= methods


def test_reflection_can_be_turned_off(served) -> None:
    address = served(reflection=False)
    with pytest.raises(grpc.RpcError) as info:
        _ask(address, rpb.ServerReflectionRequest(list_services=""))
    assert info.value.code() == grpc.StatusCode.UNIMPLEMENTED


def test_serve_takes_no_reflection() -> None:
    from nnhal.tools.cli import build_parser

    args = build_parser().parse_args(["serve", "--no-reflection"])
    assert args.no_reflection is True
    assert build_parser().parse_args(["serve"]).no_reflection is False
