"""Exposure: TLS, mutual TLS, bearer tokens, insecure exposure refused, health service.

Servers run in this process (``create_server(..., security=...)``) on loopback,
except where a test needs another address; certificates are made per module
(tests/certs.py).
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator

import grpc
import numpy as np
import pytest
from grpc_health.v1 import health_pb2 as hpb
from grpc_health.v1 import health_pb2_grpc as hgrpc
from nnhal.driver.device import Device
from nnhal.driver.security import CallGuard, ServerSecurity, peer_is_local
from nnhal.driver.server import create_server

from nnhal._client_security import ClientSecurity, is_loopback_host, open_channel, split_host
from nnhal._proto.v1_3 import device_pb2 as dpb
from nnhal._proto.v1_3 import device_pb2_grpc as dgrpc
from nnhal.builder import ModelBuilder
from nnhal.client import connect
from nnhal.control import Control
from nnhal.errors import DeviceUnavailable
from nnhal.types import OperandType, OperationType

pytest.importorskip("cryptography")
from certs import make_pki

F32 = OperandType.TENSOR_FLOAT32
TOKEN = "s3cret-token-0123456789abcdef"


def add_model():
    mb = ModelBuilder()
    g = mb.main
    a, b = g.input(F32, [3]), g.input(F32, [3])
    y = g.output(F32, [3])
    g.operation(OperationType.ADD, [a, b, g.constant(OperandType.INT32, 0)], [y])
    return mb.build()


def check_works(address: str, security: ClientSecurity) -> None:
    """A real preparation and execution through the secured channel."""
    with connect(address, timeout=10, security=security) as dev:
        prepared = dev.prepareModel_1_3(add_model())
        x = np.array([1, 2, 3], np.float32)
        out = prepared.execute([x, x * 10]).outputs[0]
        np.testing.assert_array_equal(out, x * 11)
        prepared.release()


def refused(address: str, security: ClientSecurity, *fragments: str) -> str:
    with pytest.raises(DeviceUnavailable) as info:
        connect(address, timeout=5, security=security).close()
    text = str(info.value)
    for fragment in fragments:
        assert fragment in text, text
    return text


def handshake_refused(address: str, security: ClientSecurity, fragment: str) -> None:
    """The connection fails at once (no waiting for readiness): UNAVAILABLE naming why."""
    channel = open_channel(address, (), security)
    try:
        with pytest.raises(grpc.RpcError) as info:
            dgrpc.IDeviceStub(channel).getStatus(dpb.DeviceQuery(), timeout=30)
    finally:
        channel.close()
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    assert fragment in info.value.details(), info.value.details()


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> dict[str, str]:
    return make_pki(tmp_path_factory.mktemp("pki"), extra_ips=(non_loopback_ip() or "127.0.0.2",))


def non_loopback_ip() -> str | None:
    """An IPv4 address of this host that is not loopback (None when there is none)."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect(("192.0.2.254", 9))  # no packet is sent: this only picks a route
        ip = probe.getsockname()[0]
    except OSError:
        return None
    finally:
        probe.close()
    return None if ip.startswith("127.") or ip == "0.0.0.0" else ip


def serve(security: ServerSecurity | None, address: str = "127.0.0.1:0", devices=None):
    server, bound = create_server(devices or Device(), address, security=security)
    return server, bound


@pytest.fixture
def tls_server(pki) -> Iterator[str]:
    server, address = serve(
        ServerSecurity.from_files(tls_cert=pki["server_cert"], tls_key=pki["server_key"])
    )
    yield address
    server.stop(None).wait()


# ---------------------------------------------------------------------------
# TLS and mutual TLS
# ---------------------------------------------------------------------------


def test_tls_server_answers_a_client_that_trusts_its_ca(tls_server, pki) -> None:
    check_works(tls_server, ClientSecurity.from_files(tls_ca=pki["ca"]))


def test_tls_server_refuses_plaintext_and_untrusting_clients(tls_server, pki) -> None:
    handshake_refused(tls_server, ClientSecurity(), "Socket closed")
    # a client trusting another CA does not accept the server's certificate
    rogue = ClientSecurity.from_files(tls_ca=pki["rogue_ca"])
    handshake_refused(tls_server, rogue, "CERTIFICATE_VERIFY_FAILED")


def test_tls_server_name_is_checked(tls_server, pki) -> None:
    port = tls_server.rpartition(":")[2]
    via_name = f"localhost:{port}"  # in the certificate's names
    check_works(via_name, ClientSecurity.from_files(tls_ca=pki["ca"]))
    wrong = ClientSecurity.from_files(tls_ca=pki["ca"], tls_server_name="not-the-server.example")
    handshake_refused(tls_server, wrong, "Hostname Verification")


def test_mutual_tls_requires_a_client_certificate_from_the_ca(pki) -> None:
    security = ServerSecurity.from_files(
        tls_cert=pki["server_cert"], tls_key=pki["server_key"], tls_client_ca=pki["ca"]
    )
    server, address = serve(security)
    try:
        handshake_refused(address, ClientSecurity.from_files(tls_ca=pki["ca"]), "Socket closed")
        rogue = ClientSecurity.from_files(
            tls_ca=pki["ca"], tls_cert=pki["rogue_cert"], tls_key=pki["rogue_key"]
        )
        handshake_refused(address, rogue, "Socket closed")
        good = ClientSecurity.from_files(
            tls_ca=pki["ca"], tls_cert=pki["client_cert"], tls_key=pki["client_key"]
        )
        check_works(address, good)
    finally:
        server.stop(None).wait()


def test_bad_tls_configurations_are_refused(pki, tmp_path) -> None:
    with pytest.raises(ValueError, match="--tls-key"):
        ServerSecurity.from_files(tls_cert=pki["server_cert"])
    with pytest.raises(ValueError, match="needs TLS"):
        ServerSecurity.from_files(tls_client_ca=pki["ca"])
    with pytest.raises(ValueError, match="cannot read the TLS certificate"):
        ServerSecurity.from_files(tls_cert=str(tmp_path / "missing.pem"), tls_key=pki["server_key"])
    with pytest.raises(ValueError, match="--tls-cert and --tls-key"):
        ClientSecurity.from_files(tls_ca=pki["ca"], tls_cert=pki["client_cert"])


# ---------------------------------------------------------------------------
# Bearer tokens
# ---------------------------------------------------------------------------


@pytest.fixture
def token_server(tmp_path) -> Iterator[str]:
    path = tmp_path / "tokens"
    path.write_text(f"# rotated tokens\nold-token-abcdefghijklmnop\n{TOKEN}\n")
    server, address = serve(ServerSecurity.from_files(token_file=str(path)))
    yield address
    server.stop(None).wait()


def raw_status(address: str, metadata=()) -> grpc.StatusCode:
    with grpc.insecure_channel(address) as channel:
        try:
            dgrpc.IDeviceStub(channel).getStatus(dpb.DeviceQuery(), metadata=metadata, timeout=10)
        except grpc.RpcError as exc:
            return exc.code()
    return grpc.StatusCode.OK


def test_token_missing_wrong_and_right(token_server) -> None:
    refused(token_server, ClientSecurity(), "UNAUTHENTICATED", "needs a bearer token")
    refused(
        token_server,
        ClientSecurity(token="wrong-token-abcdefghijk"),
        "UNAUTHENTICATED",
        "not valid",
    )
    refused(token_server, ClientSecurity(token=TOKEN + "x"), "not valid")
    check_works(token_server, ClientSecurity(token=TOKEN))
    check_works(
        token_server, ClientSecurity(token="old-token-abcdefghijklmnop")
    )  # every line counts


def test_token_check_on_the_wire(token_server) -> None:
    assert raw_status(token_server) == grpc.StatusCode.UNAUTHENTICATED
    assert (
        raw_status(token_server, [("authorization", f"Basic {TOKEN}")])
        == grpc.StatusCode.UNAUTHENTICATED
    )
    assert raw_status(token_server, [("authorization", TOKEN)]) == grpc.StatusCode.UNAUTHENTICATED
    assert (
        raw_status(token_server, [("authorization", "Bearer ")]) == grpc.StatusCode.UNAUTHENTICATED
    )
    assert raw_status(token_server, [("authorization", f"Bearer {TOKEN}")]) == grpc.StatusCode.OK
    assert raw_status(token_server, [("authorization", f"bearer {TOKEN}")]) == grpc.StatusCode.OK


def test_token_guards_control_and_streaming_calls(token_server) -> None:
    with Control(token_server, security=ClientSecurity()) as control:
        with pytest.raises(DeviceUnavailable, match="UNAUTHENTICATED"):
            control.list_devices()
        with pytest.raises(DeviceUnavailable, match="UNAUTHENTICATED"):
            control.set_offline(True)
    with Control(token_server, security=ClientSecurity(token=TOKEN)) as control:
        assert [d["name"] for d in control.list_devices()] == ["default"]
    # a burst is a bidirectional stream: refused the same way without the token
    with connect(token_server, security=ClientSecurity(token=TOKEN)) as dev:
        prepared = dev.prepareModel_1_3(add_model())
        from nnhal._proto.v1_3 import prepared_model_pb2_grpc as pgrpc

        with grpc.insecure_channel(token_server) as bare:
            stream = pgrpc.IPreparedModelStub(bare).configureExecutionBurst(iter(()))
            with pytest.raises(grpc.RpcError) as info:
                list(stream)
            assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
        with prepared.burst() as burst:  # the client's own burst carries the token
            x = np.array([1, 2, 3], np.float32)
            np.testing.assert_array_equal(burst.execute([x, x]).outputs[0], x + x)
        future = prepared.execute_async([x, x])  # and so do the async forms
        np.testing.assert_array_equal(future.result(timeout=60).outputs[0], x + x)
        prepared.release()


def test_token_and_tls_together(pki, tmp_path) -> None:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    security = ServerSecurity.from_files(
        tls_cert=pki["server_cert"], tls_key=pki["server_key"], token_file=str(path)
    )
    server, address = serve(security)
    try:
        refused(address, ClientSecurity.from_files(tls_ca=pki["ca"]), "UNAUTHENTICATED")
        check_works(address, ClientSecurity.from_files(tls_ca=pki["ca"], token_file=str(path)))
    finally:
        server.stop(None).wait()


def test_token_files_and_environment(tmp_path, monkeypatch) -> None:
    empty = tmp_path / "empty"
    empty.write_text("\n# nothing\n")
    with pytest.raises(ValueError, match="holds no token"):
        ServerSecurity.from_files(token_file=str(empty))
    short = tmp_path / "short"
    short.write_text("abc\n")
    with pytest.raises(ValueError, match="at least 16"):
        ServerSecurity.from_files(token_file=str(short))
    monkeypatch.setenv("NNHAL_TOKEN", TOKEN)
    assert ClientSecurity.from_env().token == TOKEN
    with pytest.raises(ValueError, match="one line"):
        ClientSecurity(token="two\nlines")


def test_client_never_sends_a_token_in_clear_text_off_loopback() -> None:
    with pytest.raises(ValueError, match="clear text"):
        open_channel("192.0.2.77:50513", security=ClientSecurity(token=TOKEN))
    open_channel("127.0.0.1:1", security=ClientSecurity(token=TOKEN)).close()  # loopback: fine


def test_token_comparison_reads_every_token() -> None:
    guard = CallGuard(["a" * 20, "b" * 20])
    assert guard._refusal([("authorization", "Bearer " + "b" * 20)]) is None
    assert "not valid" in guard._refusal([("authorization", "Bearer " + "c" * 20)])
    assert "needs a bearer token" in guard._refusal([("other", "x")])


# ---------------------------------------------------------------------------
# Where a server may listen
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "host,expected",
    [
        ("127.0.0.1", True),
        ("127.9.8.7", True),
        ("localhost", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),
        ("::", False),
        ("", False),
        ("192.0.2.1", False),
        ("no-such-host.invalid", False),
    ],
)
def test_loopback_detection(host, expected) -> None:
    assert is_loopback_host(host) is expected


def test_address_parsing_and_peers() -> None:
    assert split_host("[::1]:5") == "::1" and split_host("a.b:5") == "a.b"
    assert peer_is_local("ipv4:127.0.0.1:5000") and peer_is_local("ipv6:[::1]:5000")
    assert peer_is_local("unix:/tmp/s")
    assert not peer_is_local("ipv4:192.0.2.3:5000") and not peer_is_local("ipv6:[2001:db8::1]:5")
    assert not peer_is_local("") and not peer_is_local("weird")


def test_insecure_exposure_is_refused_unless_allowed() -> None:
    with pytest.raises(ValueError, match="--allow-insecure"):
        serve(None, "0.0.0.0:0")
    with pytest.raises(ValueError, match="without TLS"):
        serve(ServerSecurity(tokens=(TOKEN,)), "0.0.0.0:0")  # a token alone travels in clear
    server, address = serve(ServerSecurity(allow_insecure=True), "0.0.0.0:0")
    try:
        port = address.rpartition(":")[2]
        check_works(f"127.0.0.1:{port}", ClientSecurity())
    finally:
        server.stop(None).wait()


def test_cli_serve_refuses_insecure_exposure(capsys) -> None:
    from nnhal.tools.cli import main

    assert main(["serve", "--address", "0.0.0.0:0"]) == 2
    err = capsys.readouterr().err
    assert "nnhal serve: error: refusing to listen on 0.0.0.0 without TLS" in err
    assert "--allow-insecure" in err
    # a missing file is a file error (1), not a usage error
    assert main(["serve", "--tls-cert", "/nonexistent.pem", "--tls-key", "/x"]) == 1
    assert "--tls-cert /nonexistent.pem: no such file" in capsys.readouterr().err


def test_tls_server_on_a_non_loopback_address(pki) -> None:
    ip = non_loopback_ip()
    if ip is None:
        pytest.skip("this host has no non-loopback IPv4 address")
    security = ServerSecurity.from_files(tls_cert=pki["server_cert"], tls_key=pki["server_key"])
    server, address = serve(security, f"{ip}:0")
    try:
        check_works(address, ClientSecurity.from_files(tls_ca=pki["ca"]))
    finally:
        server.stop(None).wait()


# ---------------------------------------------------------------------------
# Health
# ---------------------------------------------------------------------------


def _check(stub, service: str) -> int:
    return stub.Check(hpb.HealthCheckRequest(service=service), timeout=10).status


def test_health_statuses_follow_devices(tmp_path) -> None:
    from nnhal.driver.profile import load_profile

    second = tmp_path / "second.toml"
    second.write_text('name = "second"\n')
    devices = [Device(), Device(load_profile(str(second)))]
    path = tmp_path / "token"
    path.write_text(TOKEN)
    server, address = serve(ServerSecurity.from_files(token_file=str(path)), devices=devices)
    SERVING, NOT = hpb.HealthCheckResponse.SERVING, hpb.HealthCheckResponse.NOT_SERVING
    try:
        with grpc.insecure_channel(address) as channel:  # health needs no token
            stub = hgrpc.HealthStub(channel)
            assert [_check(stub, s) for s in ("", "default", "second")] == [SERVING] * 3
            with pytest.raises(grpc.RpcError) as info:
                _check(stub, "no-such-device")
            assert info.value.code() == grpc.StatusCode.NOT_FOUND
            watch = stub.Watch(hpb.HealthCheckRequest(service="second"), timeout=60)
            assert next(watch).status == SERVING
            with Control(address, security=ClientSecurity(token=TOKEN)) as control:
                control.set_offline(True, device="second")
                assert next(watch).status == NOT  # pushed to the watcher
                assert [_check(stub, s) for s in ("", "default", "second")] == [
                    SERVING,
                    SERVING,
                    NOT,
                ]
                control.set_faults("[faults]\noffline = true\n", device="default")
                assert _check(stub, "") == NOT  # no device serves
                listed = stub.List(hpb.HealthListRequest(), timeout=10).statuses
                assert {k: v.status for k, v in listed.items()} == {
                    "": NOT,
                    "default": NOT,
                    "second": NOT,
                }
                control.set_offline(False, device="second")
                assert next(watch).status == SERVING
                assert _check(stub, "") == SERVING
            unknown = stub.Watch(hpb.HealthCheckRequest(service="nope"), timeout=60)
            assert next(unknown).status == hpb.HealthCheckResponse.SERVICE_UNKNOWN
            unknown.cancel()
            server.stop(30)  # shutdown: watchers hear NOT_SERVING, then their stream ends
            assert next(watch).status == NOT
            assert list(watch) == []
    finally:
        server.stop(None).wait()


# ---------------------------------------------------------------------------
# The command line's client options
# ---------------------------------------------------------------------------


def test_cli_clients_with_tls_and_token(pki, tmp_path, capsys, monkeypatch) -> None:

    from nnhal.tools.cli import main

    from nnhal.vectors import model_to_json

    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    security = ServerSecurity.from_files(
        tls_cert=pki["server_cert"], tls_key=pki["server_key"], token_file=str(token_file)
    )
    server, address = serve(security)
    a = np.array([1, 2, 3], np.float32)
    model = tmp_path / "add.json"
    model.write_text(json.dumps(model_to_json(add_model(), name="add", inputs=[a, a])))
    tls = ["--tls-ca", pki["ca"]]
    try:
        assert (
            main(["run", str(model), "--target", address, *tls, "--token-file", str(token_file)])
            == 0
        )
        assert json.loads(capsys.readouterr().out)["outputs"] == [(a + a).tolist()]
        assert main(["devices", address, *tls, "--token", TOKEN]) == 0
        assert json.loads(capsys.readouterr().out)[0]["name"] == "default"
        monkeypatch.setenv("NNHAL_TOKEN", TOKEN)  # the environment, when no option is given
        assert main(["faults", address, "--offline", *tls]) == 0
        assert json.loads(capsys.readouterr().out) == {"offline": True}
        monkeypatch.delenv("NNHAL_TOKEN")
        assert main(["run", str(model), "--target", address, *tls, "--connect-timeout", "5"]) == 1
        assert "UNAUTHENTICATED" in capsys.readouterr().err
        assert main(["trace", address, *tls]) == 1
        assert "UNAUTHENTICATED" in capsys.readouterr().err
        assert main(["devices", address, "--token-file", str(tmp_path / "missing")]) == 1
        assert "--token-file " in capsys.readouterr().err
        assert main(["run", str(model), "--token", TOKEN]) == 2  # no --target: no connection
        assert "--token configure the connection to --target" in capsys.readouterr().err
    finally:
        server.stop(None).wait()


@pytest.mark.slow
def test_stress_and_resources_with_tls_and_token(pki, tmp_path, capsys, monkeypatch) -> None:

    from nnhal.tools.cli import main

    for variable in ("NNHAL_TOKEN", "NNHAL_TOKEN_FILE", "NNHAL_TLS_CA"):
        # export_client_options sets them in os.environ: set then delete, so that
        # monkeypatch restores their absence after the test
        monkeypatch.setenv(variable, "")
        monkeypatch.delenv(variable)
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    security = ServerSecurity.from_files(
        tls_cert=pki["server_cert"], tls_key=pki["server_key"], token_file=str(token_file)
    )
    server, address = serve(security)
    tls = ["--tls-ca", pki["ca"]]
    try:
        assert main(["resources", address, *tls, "--token-file", str(token_file)]) == 0
        assert "threads" in json.loads(capsys.readouterr().out)
        assert main(["resources", address, *tls]) == 1
        assert "UNAUTHENTICATED" in capsys.readouterr().err
        args = ["--clients", "1", "--executions", "6", "--json", *tls]
        code = main(["stress", address, *args, "--token-file", str(token_file)])
        report = json.loads(capsys.readouterr().out)
        assert report["unexpected"] == 0 and not report["client_errors"], report
        assert code == 0
    finally:
        server.stop(None).wait()
    assert os.environ["NNHAL_TLS_CA"] == os.path.abspath(pki["ca"])  # what the clients read
