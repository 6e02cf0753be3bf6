"""Device and PreparedModel: capabilities, prepare arguments, executions."""

from __future__ import annotations

import logging
import threading
import time

import numpy as np
import pytest
from nnhal.driver.device import Device, operation_version
from nnhal.driver.prepared_model import PreparedModel
from nnhal.driver.profile import parse_profile

from nnhal.builder import ModelBuilder
from nnhal.errors import (
    GeneralFailure,
    HalError,
    InvalidArgument,
    MissedDeadline,
    OutputInsufficientSize,
)
from nnhal.types import (
    LOOP_TIMEOUT_DEFAULT_NS,
    LOOP_TIMEOUT_MAXIMUM_NS,
    NO_TIMING,
    TIME_POINT_MAX_NS,
    UINT64_MAX,
    DataLocation,
    DeviceStatus,
    DeviceType,
    ErrorStatus,
    HalVersion,
    InlineMemory,
    Model,
    Operand,
    OperandLifeTime,
    OperandType,
    Operation,
    OperationType,
    Request,
    RequestArgument,
    Subgraph,
)

F32 = OperandType.TENSOR_FLOAT32
INT32 = OperandType.INT32
Op = OperationType


@pytest.fixture(scope="module")
def device() -> Device:
    return Device()


def binary_model(
    ops=(Op.ADD,),
    type_=F32,
    dims=(2, 3),
    scale: float = 0.0,
    zero_point: int = 0,
    out_dims=None,
) -> Model:
    """main: a, b inputs; one output per operation ``op(a, b, activation NONE)``."""
    mb = ModelBuilder()
    g = mb.main
    a = g.input(type_, dims, scale, zero_point)
    b = g.input(type_, dims, scale, zero_point)
    for op in ops:
        y = g.output(type_, dims if out_dims is None else out_dims, scale, zero_point)
        g.operation(op, [a, b, g.constant(INT32, 0)], [y])
    return mb.build()


class Pools:
    """A request over two inline pools: inputs packed in pool 0, outputs in pool 1."""

    def __init__(self, inputs, output_bytes, *, output_dims=None, input_lengths=None):
        data = bytearray()
        args = []
        for i, value in enumerate(inputs):
            if value is None:
                args.append(RequestArgument(hasNoValue=True))
                continue
            raw = np.ascontiguousarray(value).tobytes()
            length = len(raw) if input_lengths is None else input_lengths[i]
            args.append(RequestArgument(location=DataLocation(0, len(data), length)))
            data += raw + bytes(max(0, length - len(raw)))
        out_args = []
        offset = 0
        for i, size in enumerate(output_bytes):
            dims = () if output_dims is None else tuple(output_dims[i])
            out_args.append(
                RequestArgument(location=DataLocation(1, offset, size), dimensions=dims)
            )
            offset += size
        self.request = Request(
            inputs=tuple(args),
            outputs=tuple(out_args),
            pools=(InlineMemory(bytes(data)), InlineMemory(bytes(max(offset, 1)))),
        )
        self.views = [memoryview(bytearray(p.data)) for p in self.request.pools]

    def output(self, index: int, dtype, shape) -> np.ndarray:
        loc = self.request.outputs[index].location
        count = int(np.prod(shape))
        return np.frombuffer(self.views[1], dtype=dtype, count=count, offset=loc.offset).reshape(
            shape
        )


def _ab(rng: np.random.Generator, shape=(2, 3)):
    return rng.standard_normal(shape).astype(np.float32), rng.standard_normal(shape).astype(
        np.float32
    )


class FakeCompiled:
    """Stands in for CompiledModel: records its arguments, returns fixed results."""

    def __init__(self, results):
        self.results = results
        self.calls: list[dict] = []

    def run(
        self, inputs, *, deadline_ns=None, loop_timeout_ns=LOOP_TIMEOUT_DEFAULT_NS, cancel=None
    ):
        self.calls.append(
            {"inputs": inputs, "deadline_ns": deadline_ns, "loop_timeout_ns": loop_timeout_ns}
        )
        return [np.array(r) for r in self.results]


# ---------------------------------------------------------------------------
# IDevice facts
# ---------------------------------------------------------------------------


def test_capabilities_follow_the_vts_rules(device: Device):
    caps = device.getCapabilities_1_3()
    types = [p.type for p in caps.operandPerformance]
    assert types == sorted(types)
    assert OperandType.SUBGRAPH not in types
    expected = sorted(t for t in OperandType if t != OperandType.SUBGRAPH)
    assert types == expected  # every fundamental type, OEM 10000 and 10001 included
    assert 10000 in types and 10001 in types
    for perf in (
        *(p.info for p in caps.operandPerformance),
        caps.relaxedFloat32toFloat16PerformanceScalar,
        caps.relaxedFloat32toFloat16PerformanceTensor,
        caps.ifPerformance,
        caps.whilePerformance,
    ):
        assert perf.execTime > 0 and perf.powerUsage > 0


def test_capabilities_come_from_the_profile():
    profile = parse_profile(
        {
            "name": "fast",
            "type": "ACCELERATOR",
            "versionString": "fast-1",
            "capabilities": {
                "ifPerformance": {"execTime": 2.5, "powerUsage": 3.5},
                "whilePerformance": {"execTime": 4.5, "powerUsage": 5.5},
            },
        }
    )
    dev = Device(profile)
    caps = dev.getCapabilities_1_3()
    assert (caps.ifPerformance.execTime, caps.ifPerformance.powerUsage) == (2.5, 3.5)
    assert (caps.whilePerformance.execTime, caps.whilePerformance.powerUsage) == (4.5, 5.5)
    assert dev.getType() == DeviceType.ACCELERATOR
    assert dev.getVersionString() == "fast-1"
    assert dev.name == "fast"


def test_static_facts(device: Device):
    assert device.getVersionString()
    assert device.getType() in set(DeviceType)
    assert device.getStatus() == DeviceStatus.AVAILABLE
    assert device.getSupportedExtensions() == ()
    assert device.getNumberOfCacheFilesNeeded() == (1, 1)  # tests/test_cache.py


def test_caching_and_allocate_need_their_arguments(device: Device):
    # caching and memory domains work (tests/test_cache.py, tests/test_buffers.py)
    with pytest.raises(InvalidArgument, match="no cache handles") as info:
        device.prepareModelFromCache_1_3(None, (), (), bytes(32))
    assert info.value.status == ErrorStatus.INVALID_ARGUMENT
    with pytest.raises(InvalidArgument, match="allocate"):
        device.allocate()


def test_operation_version_ranges():
    assert operation_version(Op.TANH) == HalVersion.V1_0
    assert operation_version(Op.BATCH_TO_SPACE_ND) == HalVersion.V1_1
    assert operation_version(Op.TRANSPOSE) == HalVersion.V1_1
    assert operation_version(Op.ABS) == HalVersion.V1_2
    assert operation_version(Op.RESIZE_NEAREST_NEIGHBOR) == HalVersion.V1_2
    assert operation_version(Op.QUANTIZED_LSTM) == HalVersion.V1_3
    assert operation_version(Op.OEM_OPERATION) == HalVersion.V1_0


# ---------------------------------------------------------------------------
# Models and prepare
# ---------------------------------------------------------------------------


def vts_cycle_model() -> Model:
    """VTS CycleTest: 3=ADD(0,4,2); 4=ADD(1,3,2); 5=ADD(4,0,2)."""
    t = lambda lifetime, consumers: Operand(F32, (1,), consumers, lifetime=lifetime)
    operands = (
        t(OperandLifeTime.SUBGRAPH_INPUT, 2),
        t(OperandLifeTime.SUBGRAPH_INPUT, 1),
        Operand(INT32, (), 3, lifetime=OperandLifeTime.SUBGRAPH_INPUT),
        t(OperandLifeTime.TEMPORARY_VARIABLE, 1),
        t(OperandLifeTime.TEMPORARY_VARIABLE, 2),
        t(OperandLifeTime.SUBGRAPH_OUTPUT, 0),
    )
    operations = (
        Operation(Op.ADD, (0, 4, 2), (3,)),
        Operation(Op.ADD, (1, 3, 2), (4,)),
        Operation(Op.ADD, (4, 0, 2), (5,)),
    )
    return Model(main=Subgraph(operands, operations, (0, 1, 2), (5,)))


def test_invalid_model_is_invalid_argument(device: Device):
    model = vts_cycle_model()
    with pytest.raises(InvalidArgument):
        device.getSupportedOperations_1_3(model)
    with pytest.raises(InvalidArgument):
        device.prepareModel_1_3(model)


def test_supported_operations_of_a_simple_model(device: Device):
    model = binary_model((Op.ADD, Op.MUL, Op.SUB))
    assert device.getSupportedOperations_1_3(model) == [True, True, True]
    assert device.explainSupportedOperations(model) == ([True, True, True], {})


def test_operation_validation_errors_are_invalid_argument(device: Device):
    # ADD with mismatched input types: the registry's type check, through validate_model.
    mb = ModelBuilder()
    g = mb.main
    a = g.input(F32, [2])
    b = g.input(OperandType.TENSOR_INT32, [2])
    y = g.output(F32, [2])
    g.operation(Op.ADD, [a, b, g.constant(INT32, 0)], [y])
    with pytest.raises(InvalidArgument, match=r"ADD \(subgraph 0, operation 0\)"):
        device.getSupportedOperations_1_3(mb.build())


@pytest.mark.parametrize("preference", [-1, 3, 99])
def test_prepare_rejects_a_bad_preference(device: Device, preference: int):
    with pytest.raises(InvalidArgument):
        device.prepareModel_1_3(binary_model(), preference=preference)


@pytest.mark.parametrize("priority", [-1, 3, 110])
def test_prepare_rejects_a_bad_priority(device: Device, priority: int):
    with pytest.raises(InvalidArgument):
        device.prepareModel_1_3(binary_model(), priority=priority)


def test_prepare_with_a_past_deadline_is_missed_deadline_persistent(device: Device):
    with pytest.raises(MissedDeadline) as info:
        device.prepareModel_1_3(binary_model(), deadline_ns=time.monotonic_ns() - 1_000_000)
    assert info.value.transient is False
    assert info.value.status == ErrorStatus.MISSED_DEADLINE_PERSISTENT


def test_prepare_with_an_unlimited_deadline_succeeds(device: Device):
    prepared = device.prepareModel_1_3(binary_model(), deadline_ns=TIME_POINT_MAX_NS)
    assert isinstance(prepared, PreparedModel)


def test_invalid_model_wins_over_a_past_deadline(device: Device):
    with pytest.raises(InvalidArgument):
        device.prepareModel_1_3(vts_cycle_model(), deadline_ns=time.monotonic_ns() - 1)


def test_version_limit_for_operand_types(device: Device):
    model = binary_model(type_=OperandType.TENSOR_QUANT8_ASYMM_SIGNED, scale=0.5, zero_point=1)
    assert device.getSupportedOperations_1_3(model, version=HalVersion.V1_3) == [True]
    for call in (
        lambda: device.getSupportedOperations_1_3(model, version=HalVersion.V1_2),
        lambda: device.prepareModel_1_3(model, version=HalVersion.V1_2),
    ):
        with pytest.raises(InvalidArgument, match="TENSOR_QUANT8_ASYMM_SIGNED needs HAL 1.3"):
            call()


def test_version_limit_for_operations(device: Device):
    # DIV appeared in HAL 1.1; ADD on TENSOR_INT32 (a 1.0 type) in 1.3.
    div = binary_model((Op.DIV,))
    assert device.getSupportedOperations_1_3(div, version=HalVersion.V1_1) == [True]
    with pytest.raises(InvalidArgument, match=r"DIV .*needs HAL 1.1.*HAL 1.0"):
        device.getSupportedOperations_1_3(div, version=HalVersion.V1_0)
    add_int = binary_model(type_=OperandType.TENSOR_INT32)
    assert device.getSupportedOperations_1_3(add_int) == [True]
    with pytest.raises(InvalidArgument, match=r"ADD .*needs HAL 1.3"):
        device.getSupportedOperations_1_3(add_int, version=HalVersion.V1_2)


def test_extension_operations_the_device_lacks_are_unsupported(device: Device):
    """As in Android: a declared extension the device lacks is a valid model whose
    extension operations are unsupported (and prepare refuses them)."""
    mb = ModelBuilder()
    prefix = mb.extension("com.example.fibonacci", 7)
    g = mb.main
    x = g.input(F32, [1])
    y = g.output(F32, [1])
    g.operation((prefix << 16) | 0, [x], [y])
    supported, reasons = device.explainSupportedOperations(mb.build())
    assert supported == [False]
    assert "extension prefix 7: this device supports no vendor extensions" in reasons[0]
    with pytest.raises(InvalidArgument, match="does not support"):
        device.prepareModel_1_3(mb.build())


# ---------------------------------------------------------------------------
# Executions
# ---------------------------------------------------------------------------


def test_execute_writes_the_outputs(device: Device):
    rng = np.random.default_rng(1)
    a, b = _ab(rng)
    prepared = device.prepareModel_1_3(binary_model((Op.ADD, Op.MUL)))
    pools = Pools([a, b], [a.nbytes, a.nbytes])
    shapes, timing = prepared.execute(pools.request, pools.views)
    assert [(s.dimensions, s.isSufficient) for s in shapes] == [((2, 3), True), ((2, 3), True)]
    assert timing == NO_TIMING
    np.testing.assert_allclose(pools.output(0, np.float32, (2, 3)), a + b, rtol=1e-6)
    np.testing.assert_allclose(pools.output(1, np.float32, (2, 3)), a * b, rtol=1e-6)
    # the driver must not modify input memory
    assert bytes(pools.views[0]) == pools.request.pools[0].data


def test_execute_output_insufficient_size_reports_every_shape(device: Device):
    rng = np.random.default_rng(2)
    a, b = _ab(rng)
    prepared = device.prepareModel_1_3(binary_model((Op.ADD, Op.MUL)))
    pools = Pools([a, b], [a.nbytes - 4, a.nbytes])
    with pytest.raises(OutputInsufficientSize) as info:
        prepared.execute(pools.request, pools.views)
    shapes = info.value.shapes
    assert [(s.dimensions, s.isSufficient) for s in shapes] == [((2, 3), False), ((2, 3), True)]
    assert "output 0" in str(info.value)


def test_execute_dynamic_output_shape_too_small(device: Device):
    # Output dims unknown in the model: the request buffer decides.
    rng = np.random.default_rng(3)
    a, b = _ab(rng)
    prepared = device.prepareModel_1_3(binary_model(out_dims=(0, 0)))
    pools = Pools([a, b], [8])
    with pytest.raises(OutputInsufficientSize) as info:
        prepared.execute(pools.request, pools.views)
    assert [(s.dimensions, s.isSufficient) for s in info.value.shapes] == [((2, 3), False)]
    pools = Pools([a, b], [a.nbytes])
    shapes, _ = prepared.execute(pools.request, pools.views)
    assert shapes[0].dimensions == (2, 3) and shapes[0].isSufficient


def test_execute_input_length_mismatch_names_the_input(device: Device):
    rng = np.random.default_rng(4)
    a, b = _ab(rng)
    prepared = device.prepareModel_1_3(binary_model())
    pools = Pools([a, b], [a.nbytes], input_lengths=[a.nbytes, a.nbytes - 4])
    with pytest.raises(InvalidArgument, match=r"input 1 \(operand 1, TENSOR_FLOAT32\)"):
        prepared.execute(pools.request, pools.views)


def test_execute_invalid_request(device: Device):
    rng = np.random.default_rng(5)
    a, _ = _ab(rng)
    prepared = device.prepareModel_1_3(binary_model())
    pools = Pools([a], [a.nbytes])  # one input missing
    with pytest.raises(InvalidArgument):
        prepared.execute(pools.request, pools.views)


def test_execute_past_deadline_is_persistent(device: Device):
    rng = np.random.default_rng(6)
    a, b = _ab(rng)
    prepared = device.prepareModel_1_3(binary_model())
    pools = Pools([a, b], [a.nbytes])
    with pytest.raises(MissedDeadline) as info:
        prepared.execute(pools.request, pools.views, deadline_ns=time.monotonic_ns() - 1)
    assert info.value.status == ErrorStatus.MISSED_DEADLINE_PERSISTENT
    shapes, _ = prepared.execute(pools.request, pools.views, deadline_ns=TIME_POINT_MAX_NS)
    assert shapes[0].isSufficient


def test_timing_is_reported_only_when_measured(device: Device):
    rng = np.random.default_rng(7)
    a, b = _ab(rng)
    prepared = device.prepareModel_1_3(binary_model())
    pools = Pools([a, b], [a.nbytes])
    _, timing = prepared.execute(pools.request, pools.views, measure=False)
    assert timing.timeOnDevice == UINT64_MAX and timing.timeInDriver == UINT64_MAX
    _, timing = prepared.execute(pools.request, pools.views, measure=True)
    assert timing.timeOnDevice < UINT64_MAX and timing.timeInDriver < UINT64_MAX
    assert 0 <= timing.timeOnDevice <= timing.timeInDriver


def test_loop_timeout_default_and_clamp(caplog: pytest.LogCaptureFixture):
    model = binary_model()
    fake = FakeCompiled([np.zeros((2, 3), np.float32)])
    prepared = PreparedModel(model, fake)
    rng = np.random.default_rng(8)
    a, b = _ab(rng)
    pools = Pools([a, b], [a.nbytes])

    prepared.execute(pools.request, pools.views)
    assert fake.calls[-1]["loop_timeout_ns"] == LOOP_TIMEOUT_DEFAULT_NS

    prepared.execute(pools.request, pools.views, loop_timeout_ns=5_000_000)
    assert fake.calls[-1]["loop_timeout_ns"] == 5_000_000
    assert not [r for r in caplog.records if r.name == "nnhal.driver"]

    with caplog.at_level(logging.WARNING, logger="nnhal.driver"):
        prepared.execute(pools.request, pools.views, loop_timeout_ns=20_000_000_000)
    assert fake.calls[-1]["loop_timeout_ns"] == LOOP_TIMEOUT_MAXIMUM_NS
    warnings = [r for r in caplog.records if r.name == "nnhal.driver"]
    assert len(warnings) == 1 and warnings[0].levelno == logging.WARNING
    assert "loopTimeoutDuration" in warnings[0].getMessage()

    with pytest.raises(InvalidArgument):
        prepared.execute(pools.request, pools.views, loop_timeout_ns=-1)


def test_inputs_reach_the_executor_read_only_with_the_operand_dtype():
    model = binary_model()
    fake = FakeCompiled([np.zeros((2, 3), np.float32)])
    rng = np.random.default_rng(9)
    a, b = _ab(rng)
    pools = Pools([a, b], [a.nbytes])
    PreparedModel(model, fake).execute(pools.request, pools.views, deadline_ns=TIME_POINT_MAX_NS)
    call = fake.calls[-1]
    assert call["deadline_ns"] is None  # "unlimited" travels as no deadline
    for got, want in zip(call["inputs"], (a, b)):
        assert got.dtype == np.float32 and got.shape == (2, 3)
        assert not got.flags.writeable
        np.testing.assert_array_equal(got, want)


def test_result_incompatible_with_request_dims_is_general_failure():
    model = binary_model(out_dims=(0, 0))
    rng = np.random.default_rng(10)
    a, b = _ab(rng)
    prepared = PreparedModel(model, FakeCompiled([np.zeros((3, 2), np.float32)]))
    pools = Pools([a, b], [a.nbytes], output_dims=[(2, 3)])
    with pytest.raises(GeneralFailure, match=r"\[3, 2\].*request's dimensions \[2, 3\]"):
        prepared.execute(pools.request, pools.views)


def test_result_of_the_wrong_dtype_is_general_failure():
    model = binary_model()
    rng = np.random.default_rng(11)
    a, b = _ab(rng)
    prepared = PreparedModel(model, FakeCompiled([np.zeros((2, 3), np.float64)]))
    pools = Pools([a, b], [48])
    with pytest.raises(GeneralFailure, match="float64"):
        prepared.execute(pools.request, pools.views)


def test_concurrent_executions_on_one_prepared_model(device: Device):
    prepared = device.prepareModel_1_3(binary_model((Op.ADD,)))
    errors: list[BaseException] = []

    def worker(seed: int) -> None:
        try:
            rng = np.random.default_rng(seed)
            for _ in range(20):
                a, b = _ab(rng)
                pools = Pools([a, b], [a.nbytes])
                prepared.execute(pools.request, pools.views, measure=True)
                np.testing.assert_allclose(pools.output(0, np.float32, (2, 3)), a + b, rtol=1e-6)
        except (AssertionError, HalError) as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_while_with_nested_if_end_to_end(device: Device):
    from test_support import nested_model  # tests/ is on sys.path (pytest rootdir mode)

    model = nested_model()
    prepared = device.prepareModel_1_3(model)
    x = np.array([[1.5, -2.0]], np.float32)
    i0 = np.array([0.0], np.float32)
    # outputs: io [1] then y [1, 2]
    pools = Pools([x, i0], [4, 8])
    shapes, timing = prepared.execute(pools.request, pools.views, measure=True)
    assert [s.dimensions for s in shapes] == [(1,), (1, 2)]
    # the loop in Python: i < 3; the body doubles x when i <= 0 (else branch x + x)
    # and applies the identity FULLY_CONNECTED otherwise
    xs, i = x.copy(), i0.copy()
    while i[0] < 3.0:
        xs = xs if i[0] > 0 else xs + xs
        i = i + 1.0
    np.testing.assert_allclose(pools.output(0, np.float32, (1,)), i)
    np.testing.assert_allclose(pools.output(1, np.float32, (1, 2)), xs + x)
    assert timing.timeOnDevice <= timing.timeInDriver


def test_analysis_reads_constants_without_copies_and_like_the_executor():
    from nnhal.driver.device import ModelAnalysis
    from nnhal.driver.executor.operands import decode_constant, map_model_pools

    mb = ModelBuilder()
    g = mb.main
    x = g.input(F32, [1, 3])
    weights = np.arange(6, dtype=np.float32).reshape(2, 3)
    w = g.constant(F32, weights, reference=True)  # model pool
    b = g.constant(F32, np.array([0.5, -0.5], np.float32))  # operandValues
    act = g.constant(INT32, 1)
    y = g.output(F32, [1, 2])
    g.operation(Op.FULLY_CONNECTED, [x, w, b, act], [y])
    flag = g.constant(OperandType.TENSOR_BOOL8, np.array([True, False]))  # unused by ops
    model = mb.build()

    analysis = ModelAnalysis(model)
    views = map_model_pools(model)
    for index in (w, b, act, flag):
        value = analysis.operand_info(0, index).value
        expected = decode_constant(model, model.main.operands[index], views)
        assert value.dtype == expected.dtype and value.shape == expected.shape
        np.testing.assert_array_equal(value, expected)
        assert not value.flags.writeable
    # the float constants are views of the model's own bytes, not copies
    assert not analysis.operand_info(0, w).value.flags.owndata
    assert Device().getSupportedOperations_1_3(model) == [True]


def _add_model(activation: int):
    mb = ModelBuilder()
    g = mb.main
    a, b = g.input(OperandType.TENSOR_FLOAT32, [2]), g.input(OperandType.TENSOR_FLOAT32, [2])
    g.operation(
        OperationType.ADD,
        [a, b, g.constant(OperandType.INT32, activation)],
        [g.output(OperandType.TENSOR_FLOAT32, [2])],
    )
    return mb.build()


def test_prepare_checks_each_operation_once(monkeypatch):
    """The compiler trusts the analysis' pass of the same definition on the same model."""
    from nnhal.driver.executor import compiler

    again = []
    real = compiler.validate_operation
    monkeypatch.setattr(compiler, "validate_operation", lambda ctx: again.append(ctx) or real(ctx))
    prepared = Device().prepareModel_1_3(_add_model(0))
    assert again == []
    one = np.ones(2, np.float32)
    np.testing.assert_array_equal(prepared.compiled.run([one, one])[0], [2.0, 2.0])


def test_compiler_checks_operations_the_analysis_did_not_pass_with_its_definition():
    """A pass recorded for another definition (a package overriding the operation) does
    not stand: the compiler runs the checks itself and refuses the bad operation."""
    from nnhal.driver.executor import compile_model
    from nnhal.driver.executor.compiler import Checked

    with pytest.raises(InvalidArgument, match=r"ADD \(subgraph 0, operation 0\)"):
        compile_model(_add_model(7), checked=Checked({(0, 0): object()}))
    with pytest.raises(InvalidArgument, match=r"ADD \(subgraph 0, operation 0\)"):
        compile_model(_add_model(7))


def test_compiler_reuses_the_analysis_descriptions_of_operands_but_not_of_constants():
    """Descriptions of inputs and results come from the analysis; a constant's never does
    (it carries the compiler's own copy of the value), and each is made once per plan."""
    from dataclasses import replace

    from nnhal.driver.executor import compile_model
    from nnhal.driver.executor.compiler import Checked
    from nnhal.driver.executor.operands import operand_info

    model = _add_model(0)
    given = operand_info(model, model.main, 0, [])
    marked = replace(given, scale=0.25)  # told apart from a freshly made one
    stale = operand_info(model, model.main, 2, [], value=np.array(3, np.int32))
    compiled = compile_model(model, checked=Checked({}, {(0, 0): marked, (0, 2): stale}))
    ctx = compiled.plans[0].steps[0].context
    assert ctx.inputs[0] is marked and ctx.inputs[1] is not marked
    assert int(ctx.inputs[2].value) == 0  # the model's activation, not the stale value
    one = np.ones(2, np.float32)
    np.testing.assert_array_equal(compiled.run([one, one])[0], [2.0, 2.0])
