"""Small explicit cases for the failures the fuzz targets found (fuzz/targets.py).

Each test is the smallest form of one finding, with the documented error the
driver gives now instead of an internal exception.
"""

from __future__ import annotations

import numpy as np
import pytest
from nnhal.driver.device import Device
from nnhal.driver.memory import MappedPools
from nnhal.driver.op_packages.generator import _generated_module, kernel_source
from nnhal.driver.op_packages.ini_loader import load_ini
from nnhal.driver.op_packages.json_loader import load_json
from nnhal.driver.op_packages.spec import ConfigError
from nnhal.tools.fuzz.models import request_for

from nnhal.builder import ModelBuilder
from nnhal.errors import GeneralFailure, InvalidArgument
from nnhal.types import OperandType, OperationType
from nnhal.validation import validate_model

F32, BOOL8, I32, INT32 = (OperandType.TENSOR_FLOAT32, OperandType.TENSOR_BOOL8,
                          OperandType.TENSOR_INT32, OperandType.INT32)  # fmt: skip


@pytest.fixture(scope="module")
def device() -> Device:
    return Device()


def _execute(device: Device, model, inputs):
    prepared = device.prepareModel_1_3(model)
    request = request_for(model, inputs)
    with MappedPools(request.pools) as mapped:
        return prepared.execute(request, mapped.views)


def test_an_omitted_request_input_read_by_a_required_position_is_invalid(device) -> None:
    # found by `validation`: hasNoValue inputs reached ADD's kernel as None (TypeError)
    mb = ModelBuilder()
    a, b = mb.main.input(F32, [2]), mb.main.input(F32, [2])
    out = mb.main.output(F32, [2])
    mb.main.operation(OperationType.ADD, [a, b, mb.main.constant(INT32, 0)], [out])
    with pytest.raises(InvalidArgument, match=r"input 1 .*has no value.*operation 0 \(ADD\)"):
        _execute(device, mb.build(), [np.ones(2, np.float32), None])


def _if_model(condition_no_value: bool, value_no_value: bool):
    mb = ModelBuilder()
    branch = mb.subgraph()
    x = branch.input(F32, [2])
    y = branch.output(F32, [2])
    branch.operation(OperationType.RELU, [x], [y])
    cond = mb.main.no_value(BOOL8, [1]) if condition_no_value else mb.main.input(BOOL8, [1])
    value = mb.main.no_value(F32, [2]) if value_no_value else mb.main.input(F32, [2])
    out = mb.main.output(F32, [2])
    refs = [mb.main.subgraph_ref(branch), mb.main.subgraph_ref(branch)]
    mb.main.operation(OperationType.IF, [cond, *refs, value], [out])
    return mb.build()


def test_a_no_value_if_input_is_valid_but_executing_it_fails(device) -> None:
    # found by `graphs`: a NO_VALUE IF input reached RELU inside the branch as None
    # (kernel failed: TypeError). As for a NO_VALUE condition (the CTS model if_no_value),
    # the model is valid and its execution fails.
    validate_model(_if_model(False, True))
    with pytest.raises(GeneralFailure, match=r"IF \(subgraph 0, operation 0\): input 3 .*no value"):
        _execute(device, _if_model(False, True), [np.array([True])])
    shapes, _ = _execute(
        device, _if_model(False, False), [np.array([True]), np.ones(2, np.float32)]
    )
    assert shapes[0].dimensions == (2,)


def test_a_no_value_while_input_is_valid_but_executing_it_fails(device) -> None:
    mb = ModelBuilder()
    cond, body = mb.subgraph(), mb.subgraph()
    ci = cond.input(I32, [1])
    flag = cond.output(BOOL8, [1])
    cond.operation(OperationType.LESS, [ci, cond.constant(I32, [3], [1])], [flag])
    bi = body.input(I32, [1])
    bo = body.output(I32, [1])
    body.operation(
        OperationType.ADD, [bi, body.constant(I32, [1], [1]), body.constant(INT32, 0)], [bo]
    )
    g = mb.main
    x = g.input(F32, [2])  # main needs an input; the WHILE starts from NO_VALUE
    y = g.output(F32, [2])
    g.operation(OperationType.RELU, [x], [y])
    out = g.output(I32, [1])
    g.operation(OperationType.WHILE, [g.subgraph_ref(cond), g.subgraph_ref(body),
                                      g.no_value(I32, [1])], [out])  # fmt: skip
    model = mb.build()
    validate_model(model)
    with pytest.raises(
        GeneralFailure, match=r"WHILE \(subgraph 0, operation 1\): input 2 .*no value"
    ):
        _execute(device, model, [np.ones(2, np.float32)])


def test_broadcast_conflict_known_only_at_run_time_is_a_clean_general_failure(device) -> None:
    # found by `validation`: GREATER_EQUAL on [3] and [4] (declared [0]) failed inside numpy
    mb = ModelBuilder()
    a, b = mb.main.input(F32, [0]), mb.main.input(F32, [0])
    out = mb.main.output(BOOL8, [0])
    mb.main.operation(OperationType.GREATER_EQUAL, [a, b], [out])
    model = mb.build()
    with pytest.raises(GeneralFailure) as info:
        _execute(device, model, [np.ones(3, np.float32), np.ones(4, np.float32)])
    assert "GREATER_EQUAL (subgraph 0, operation 0)" in info.value.message
    assert "broadcast" in info.value.message and "kernel failed" not in info.value.message
    shapes, _ = _execute(device, model, [np.ones(3, np.float32), np.ones(1, np.float32)])
    assert shapes[0].dimensions == (3,)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (b'{"UdoPackage_0": {"UDO_PACKAGE_NAME": "a\x01b"}}', "bad string"),
        (b'{"UdoPackage_0": "\\q"}', "bad string"),
        (b"[" * 5000, "nested more than"),
        (b'{"a":' * 3000, "nested more than"),
    ],
)
def test_json_loader_reports_bad_strings_and_deep_nesting_as_config_errors(text, why) -> None:
    # found by `loaders`: json.JSONDecodeError and RecursionError escaped load_json
    with pytest.raises(ConfigError, match=why):
        load_json("udo.json", text)


_INI = """[{name}]
input0.name=x
input0.dtype=float32
input0.format=ND
attr.list={attr}
attr_{attr}.type=float
attr_{attr}.paramType=optional
attr_{attr}.defaultValue={default}
output0.name=y
output0.dtype=float32
output0.format=ND
"""


@pytest.mark.parametrize(
    ("name", "attr", "default"),
    [
        ("\x00quareAdd", "alpha", "1.0"),  # a NUL in the operation name
        ('Q"); import os #', "alpha", "1.0"),  # quotes: no code from the config may run
        ("Scale", "3alpha", "1.0"),  # a parameter name starting with a digit
        ("Scale", "alpha", "nan"),  # a non-finite default
    ],
)
def test_generated_op_package_sources_compile_whatever_the_names(name, attr, default) -> None:
    # found by `loaders`: NUL bytes, quotes and digit-first names gave invalid Python
    spec = load_ini("ops.ini", _INI.format(name=name, attr=attr, default=default).encode())
    namespace: dict = {}
    exec(compile(_generated_module(spec), "<generated>", "exec"), namespace)  # noqa: S102
    assert namespace["OPERATIONS"] == [name]
    for op in spec.ops:
        kernel: dict = {}
        exec(compile(kernel_source(spec, op, None), "<kernel>", "exec"), kernel)  # noqa: S102
        own = [v for v in kernel.values() if getattr(getattr(v, "__code__", None), "co_filename",
                                                       "") == "<kernel>"]  # fmt: skip
        assert len(own) == 1
        with pytest.raises(NotImplementedError, match="fill in the numpy kernel"):
            own[0](np.zeros(1))


def test_wait_fence_calls_abandoned_by_their_clients_do_not_starve_the_server() -> None:
    # found while fuzzing `grpc`: waitFence(timeoutMs=4e9) held a server thread for days
    # after its client's deadline; 16 of them (the worker pool) left the server deaf.
    import grpc
    from nnhal.driver.server import create_server

    from nnhal._proto.v1_3 import device_pb2 as dpb
    from nnhal._proto.v1_3 import device_pb2_grpc as dgrpc
    from nnhal._proto.v1_3 import prepared_model_pb2 as ppb
    from nnhal._proto.v1_3 import prepared_model_pb2_grpc as pgrpc

    server, address = create_server(Device(), "127.0.0.1:0", max_workers=4)
    channel = grpc.insecure_channel(address)
    try:
        fences, device = pgrpc.ISyncFenceStub(channel), dgrpc.IDeviceStub(channel)
        fence = fences.createFence(ppb.CreateFenceRequest()).fence
        waits = [
            fences.waitFence.future(
                ppb.WaitFenceRequest(fence=fence, timeoutMs=4_000_000_000), timeout=0.5
            )
            for _ in range(8)
        ]
        for call in waits:
            try:  # the server answers "still ACTIVE" at the deadline, or the deadline wins
                assert call.result().state == 0
            except grpc.RpcError as exc:
                assert exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        cancelled = [
            fences.waitFence.future(ppb.WaitFenceRequest(fence=fence, timeoutMs=4_000_000_000))
            for _ in range(8)
        ]
        for call in cancelled:
            call.cancel()
        reply = device.getVersionString(dpb.DeviceQuery(), timeout=30)
        assert reply.status == 0 and reply.version
        waiting = fences.waitFence.future(ppb.WaitFenceRequest(fence=fence, timeoutMs=60_000))
        fences.signalFence(ppb.SignalFenceRequest(fence=fence))
        assert waiting.result(timeout=30).state == 1  # SIGNALED: a signal still wakes a waiter
    finally:
        channel.close()
        server.stop(grace=None).wait()


def test_run_time_shape_checks_do_not_clash_with_constants(device) -> None:
    # found by `graphs` and `validation` (atheris): the run-time shape check of step k was
    # bound under the name of constant operand k, so the step called an array
    mb = ModelBuilder()
    x = mb.main.input(F32, [0])
    two = mb.main.constant(F32, [2.0], [1])  # operand 1, read by step 1
    act = mb.main.constant(INT32, 0)
    t = mb.main.temporary(F32, [0])
    out = mb.main.output(F32, [0])
    mb.main.operation(OperationType.ADD, [x, two, act], [t])
    mb.main.operation(OperationType.ADD, [t, two, act], [out])
    request = request_for(mb.build(), [np.array([1.0, -1.0, 0.5], np.float32)])
    prepared = device.prepareModel_1_3(mb.build())
    with MappedPools(request.pools) as mapped:
        shapes, _ = prepared.execute(request, mapped.views)
        result = np.frombuffer(mapped.views[1], np.float32, 3).copy()
    assert shapes[0].dimensions == (3,)
    assert result.tolist() == [5.0, 3.0, 4.5]


def _grouped_conv(groups: int, input_channels: int = 2):
    mb = ModelBuilder()
    g = mb.main
    x = g.input(F32, [1, 3, 3, input_channels])
    w = g.constant(F32, np.ones((2, 1, 1, 1), np.float32), [2, 1, 1, 1])
    b = g.constant(F32, np.zeros(2, np.float32), [2])
    out = g.output(F32, [1, 3, 3, 2])
    scalars = [g.constant(INT32, v) for v in (0, 0, 0, 0, 1, 1, groups, 0)]
    scalars.append(g.constant(OperandType.BOOL, False))  # NHWC
    g.operation(OperationType.GROUPED_CONV_2D, [x, w, b, *scalars], [out])
    return mb.build()


@pytest.mark.parametrize("groups", [2147483647, 1000, 0, -1])
def test_grouped_conv_with_impossible_groups_is_invalid_at_validation(device, groups) -> None:
    # found by `validation` (atheris): groups = 2147483647 passed validation and failed
    # binding the filter at prepare ("cannot bind kernel: ValueError: cannot reshape")
    with pytest.raises(InvalidArgument, match="groups"):
        device.getSupportedOperations_1_3(_grouped_conv(groups))
    assert device.getSupportedOperations_1_3(_grouped_conv(2)) == [True]


def test_quantized_add_with_extreme_scales_is_invalid_not_an_overflow(device) -> None:
    # found by `validation` (atheris): scale 3.4e38 made the rescale multiplier infinite and
    # binding the kernel raised OverflowError
    q8 = OperandType.TENSOR_QUANT8_ASYMM
    mb = ModelBuilder()
    a = mb.main.input(q8, [2], scale=3.4e38, zero_point=0)
    b = mb.main.input(q8, [2], scale=3.4e38, zero_point=0)
    out = mb.main.output(q8, [2], scale=1.0, zero_point=0)
    mb.main.operation(OperationType.ADD, [a, b, mb.main.constant(INT32, 0)], [out])
    with pytest.raises(InvalidArgument, match="rescale multiplier of inf"):
        device.prepareModel_1_3(mb.build())


@pytest.mark.parametrize(
    "op", [OperationType.RESIZE_BILINEAR, OperationType.RESIZE_NEAREST_NEIGHBOR]
)
def test_resize_by_an_infinite_scale_is_invalid(device, op) -> None:
    # found by `validation`: a FLOAT32 scale of inf passed "> 0" and the kernel raised
    # OverflowError converting the output size to an integer
    mb = ModelBuilder()
    x = mb.main.input(F32, [1, 2, 2, 1])
    out = mb.main.output(F32, [1, 0, 0, 1])
    scales = [mb.main.constant(OperandType.FLOAT32, v) for v in (float("inf"), 2.0)]
    nhwc = mb.main.constant(OperandType.BOOL, False)
    mb.main.operation(op, [x, *scales, nhwc], [out])
    with pytest.raises(
        InvalidArgument, match=r"input 1 \(width\) is inf; the output scale must be finite"
    ):
        device.getSupportedOperations_1_3(mb.build())
