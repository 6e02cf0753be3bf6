"""A small app (falls back to a second device on failure) driven through injected faults,
its behaviour asserted from the servers' call traces. Also: multi-device serving, the
fault table's rules and errors, latency in Timing, the sample-driver profiles."""

from __future__ import annotations

import numpy as np
import pytest

from nnhal.builder import ModelBuilder
from nnhal.client import connect
from nnhal.control import Control
from nnhal.errors import DeviceUnavailable, HalError, InvalidArgument, OutputInsufficientSize
from nnhal.types import DeviceStatus, ErrorStatus, OperandType, OperationType

F32 = OperandType.TENSOR_FLOAT32


def model(op=OperationType.ADD):
    mb = ModelBuilder()
    g = mb.main
    a = g.input(F32, [1, 4])
    b = g.input(F32, [1, 4])
    y = g.output(F32, [1, 4])
    g.operation(op, [a, b, g.constant(OperandType.INT32, 0)], [y])
    return mb.build()


X = np.arange(4, dtype=np.float32).reshape(1, 4)


class App:
    """The app under test: tries its preferred device, retries once after
    DEVICE_UNAVAILABLE, and falls back to the next device on any other failure
    (or when the device says it is not AVAILABLE)."""

    def __init__(self, address: str, devices: list[str]) -> None:
        self.address = address
        self.devices = devices

    def infer(self, m, inputs) -> tuple[np.ndarray, str]:
        last: Exception | None = None
        for name in self.devices:
            with connect(self.address, device=name) as device:
                if device.getStatus() != DeviceStatus.AVAILABLE:
                    continue
                try:
                    prepared = device.prepareModel_1_3(m)
                except HalError as exc:
                    last = exc
                    continue
                for attempt in range(2):
                    try:
                        result = prepared.execute(inputs)
                        prepared.release()
                        return result.outputs[0], name
                    except DeviceUnavailable as exc:
                        last = exc
                        if attempt == 1:
                            break
                    except HalError as exc:
                        last = exc
                        break
                prepared.release()
        raise RuntimeError(f"no device could run the model: {last}")


@pytest.fixture(scope="module")
def server():
    from nnhal.driver.device import Device
    from nnhal.driver.profile import load_profile
    from nnhal.driver.service import create_server

    devices = [Device(load_profile("example-npu")), Device(load_profile("default"))]
    srv, address = create_server(devices, "127.0.0.1:0")
    yield address
    srv.stop(None)


@pytest.fixture
def control(server):
    with Control(server) as c:
        for name in ("example-npu", "default"):
            c.set_faults("", device=name)
            c.set_offline(False, device=name)
            c.trace(name, clear=True)
        yield c


def methods(trace):
    return [(e["method"], e["status"]) for e in trace if e["method"] != "getStatus"]


def test_devices_are_listed_and_chosen_by_name(server, control) -> None:
    listed = control.list_devices()
    assert [d["name"] for d in listed] == ["example-npu", "default"]
    assert listed[0]["type"] == "ACCELERATOR" and listed[0]["versionString"]
    with connect(server, device="default") as d:
        assert d.getVersionString() == listed[1]["versionString"]
    with pytest.raises(DeviceUnavailable):
        connect(server, device="nope", timeout=2)


def test_no_faults_runs_on_the_preferred_device(server, control) -> None:
    out, used = App(server, ["example-npu", "default"]).infer(model(), [X, X])
    np.testing.assert_allclose(out, X + X)
    assert used == "example-npu"
    assert methods(control.trace("example-npu")) == [
        ("prepareModel_1_3", "NONE"),
        ("executeSynchronously_1_3", "NONE"),
        ("IPreparedModel.release", "NONE"),
    ]
    assert control.trace("default") == []


def test_app_retries_after_device_unavailable(server, control) -> None:
    control.set_faults(
        [
            {
                "method": "executeSynchronously_1_3",
                "status": "DEVICE_UNAVAILABLE",
                "when": "nth",
                "n": 1,
            }
        ],
        device="example-npu",
    )
    _, used = App(server, ["example-npu", "default"]).infer(model(), [X, X])
    assert used == "example-npu"
    trace = control.trace("example-npu")
    executes = [e for e in trace if e["method"] == "executeSynchronously_1_3"]
    assert [e["status"] for e in executes] == ["DEVICE_UNAVAILABLE", "NONE"]
    assert executes[0]["injected"] == 0 and "injected" not in executes[1]


def test_app_falls_back_when_preparation_fails(server, control) -> None:
    control.set_faults([{"method": "prepareModel*", "status": "GENERAL_FAILURE"}], "example-npu")
    out, used = App(server, ["example-npu", "default"]).infer(model(), [X, X])
    assert used == "default"
    np.testing.assert_allclose(out, X + X)
    assert methods(control.trace("example-npu")) == [("prepareModel_1_3", "GENERAL_FAILURE")]
    assert methods(control.trace("default"))[:2] == [
        ("prepareModel_1_3", "NONE"),
        ("executeSynchronously_1_3", "NONE"),
    ]


def test_app_skips_an_offline_device(server, control) -> None:
    control.set_offline(True, "example-npu")
    _, used = App(server, ["example-npu", "default"]).infer(model(), [X, X])
    assert used == "default"
    npu = control.trace("example-npu")
    assert {e["method"] for e in npu} == {"getStatus"}  # connect() and the app's check
    with (
        connect(server, device="example-npu") as d,
        pytest.raises(DeviceUnavailable, match="offline"),
    ):
        d.prepareModel_1_3(model())
    control.set_offline(False, "example-npu")
    assert App(server, ["example-npu"]).infer(model(), [X, X])[1] == "example-npu"


def test_seeded_probability_is_reproducible(server, control) -> None:
    rule = {
        "method": "executeSynchronously_1_3",
        "status": "GENERAL_FAILURE",
        "when": "probability",
        "probability": 0.5,
    }
    app = App(server, ["example-npu", "default"])
    runs = []
    for _ in range(2):
        control.set_faults({"seed": 42, "rules": [rule]}, "example-npu")
        runs.append([app.infer(model(), [X, X])[1] for _ in range(12)])
    assert runs[0] == runs[1]
    assert set(runs[0]) == {"example-npu", "default"}  # seed 42 gives both outcomes


def test_operation_scoped_faults_and_latency(server, control) -> None:
    control.set_faults(
        [
            {"method": "execute*", "operation": "ADD", "status": "RESOURCE_EXHAUSTED_TRANSIENT"},
            {"method": "execute*", "operation": "MUL", "latency_ms": 20.0},
        ],
        "example-npu",
    )
    with connect(server, device="example-npu") as d:
        add = d.prepareModel_1_3(model(OperationType.ADD))
        mul = d.prepareModel_1_3(model(OperationType.MUL))
        with pytest.raises(HalError) as info:
            add.execute([X, X])
        assert info.value.status == ErrorStatus.RESOURCE_EXHAUSTED_TRANSIENT
        result = mul.execute([X, X], measure=True)
        assert result.timing.timeOnDevice >= 20000 and result.timing.timeInDriver >= 20000
    entry = [e for e in control.trace("example-npu") if e["method"] == "executeSynchronously_1_3"]
    assert entry[-1]["latency_us"] == 20000.0


def test_injected_output_insufficient_size_has_shapes(server, control) -> None:
    control.set_faults(
        [{"method": "executeSynchronously_1_3", "status": "OUTPUT_INSUFFICIENT_SIZE"}], "default"
    )
    with connect(server, device="default") as d:
        p = d.prepareModel_1_3(model())
        with pytest.raises(OutputInsufficientSize) as info:
            p.execute([X, X])
        assert [s.isSufficient for s in info.value.shapes] == [False]


@pytest.mark.parametrize(
    "table, key",
    [
        ({"rules": [{"status": "NOPE"}]}, "rules[0].status"),
        ({"rules": [{"when": "sometimes"}]}, "rules[0].when"),
        ({"rules": [{"operation": "FOO"}]}, "rules[0].operation"),
        ({"rules": [{"latency_ms": -1}]}, "rules[0].latency_ms"),
        ({"rules": [{"colour": 1}]}, "rules[0].colour"),
        ({"seed": "x"}, "seed"),
    ],
)
def test_bad_fault_tables(control, table, key) -> None:
    with pytest.raises(InvalidArgument, match=key.replace("[", r"\[").replace("]", r"\]")):
        control.set_faults(table, "default")


def test_profile_faults_and_sample_profiles(tmp_path) -> None:
    from nnhal.driver.device import Device
    from nnhal.driver.profile import load_profile
    from nnhal.driver.service import create_server

    path = tmp_path / "flaky.toml"
    path.write_text(
        'name = "flaky"\n[faults]\nseed = 1\n[[faults.rules]]\nmethod = "getVersionString"\n'
        'status = "GENERAL_FAILURE"\nwhen = "after"\nn = 1\n'
    )
    srv, address = create_server(Device(load_profile(str(path))), "127.0.0.1:0")
    try:
        with connect(address) as d:
            assert d.getVersionString()
            with pytest.raises(HalError):
                d.getVersionString()
    finally:
        srv.stop(None)

    # the sample-driver rules, with the recursive IF/WHILE rule
    fast = Device(load_profile("nnapi-sample_float_fast"))
    quant = Device(load_profile("nnapi-sample_quant"))
    minimal = Device(load_profile("nnapi-sample_minimal"))
    assert fast.getSupportedOperations_1_3(model()) == [True]
    assert quant.getSupportedOperations_1_3(model()) == [False]
    assert minimal.getSupportedOperations_1_3(model(OperationType.MUL)) == [False]
    assert minimal.getSupportedOperations_1_3(model(OperationType.ADD)) == [True]
    caps = fast.getCapabilities_1_3()
    perf = {p.type: p.info for p in caps.operandPerformance}
    assert (perf[F32].execTime, perf[F32].powerUsage) == pytest.approx((0.8, 1.2))
    assert caps.relaxedFloat32toFloat16PerformanceTensor.execTime == pytest.approx(0.7)
    if_model = _if_model()
    assert fast.getSupportedOperations_1_3(if_model) == [True]  # the sample would say False
    assert minimal.getSupportedOperations_1_3(if_model) == [False]  # the branch uses MUL


def _if_model():
    mb = ModelBuilder()
    then_g, else_g = mb.subgraph(), mb.subgraph()
    for sub, op in ((then_g, OperationType.MUL), (else_g, OperationType.ADD)):
        a = sub.input(F32, [1, 4])
        y = sub.output(F32, [1, 4])
        sub.operation(op, [a, a, sub.constant(OperandType.INT32, 0)], [y])
    g = mb.main
    cond = g.input(OperandType.TENSOR_BOOL8, [1])
    x = g.input(F32, [1, 4])
    y = g.output(F32, [1, 4])
    g.operation(OperationType.IF, [cond, g.subgraph_ref(then_g), g.subgraph_ref(else_g), x], [y])
    return mb.build()


def test_latency_from_capabilities_and_the_cli(server, control, tmp_path, capsys) -> None:
    import json

    from nnhal.tools.cli import main

    # example-npu: TENSOR_FLOAT32 execTime is its profile's number; 1 ADD operation
    with connect(server, device="example-npu") as d:
        perf = {p.type: p.info.execTime for p in d.getCapabilities_1_3().operandPerformance}
        table = tmp_path / "faults.toml"
        table.write_text(
            '[faults]\n[[faults.rules]]\nmethod = "executeSynchronously_1_3"\n'
            "latency_from_capabilities_us = 1000.0\n"
        )
        assert main(["faults", server, str(table), "--device", "example-npu"]) == 0
        assert (
            json.loads(capsys.readouterr().out)["rules"][0]["method"] == "executeSynchronously_1_3"
        )
        p = d.prepareModel_1_3(model())
        p.execute([X, X], measure=True)
    assert main(["trace", server, "--device", "example-npu"]) == 0
    trace = json.loads(capsys.readouterr().out)
    last = [e for e in trace if e["method"] == "executeSynchronously_1_3"][-1]
    assert last["latency_us"] == pytest.approx(1000.0 * perf[F32], abs=0.1)
    assert last["args"]["measure"] == 1 and "preparedModel" in last["args"]
    prep = [e for e in trace if e["method"] == "prepareModel_1_3"][-1]
    assert prep["args"]["model"].startswith("1 operations (ADD)")
    assert main(["devices", server]) == 0
    assert [d["name"] for d in json.loads(capsys.readouterr().out)] == ["example-npu", "default"]
    assert main(["faults", server, "--offline", "--device", "default"]) == 0
    with connect(server, device="default") as d:
        assert d.getStatus() == DeviceStatus.OFFLINE
    assert main(["faults", server, "--clear", "--device", "example-npu"]) == 0
    capsys.readouterr()
