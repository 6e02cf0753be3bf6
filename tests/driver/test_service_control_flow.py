"""IF and WHILE end to end: real kernels, through a real in-process gRPC server.

The executor's own tests (test_control_flow.py) use test-only operations; here
the same situations run with the registered operations over the wire, and
after every failure the server must still answer.
"""

from __future__ import annotations

import numpy as np
import pytest
from nnhal.tools.bench import STATE0, B, W, fibonacci_while_model

from nnhal.builder import ModelBuilder
from nnhal.errors import GeneralFailure, InvalidArgument, MissedDeadline
from nnhal.types import DeviceStatus, OperandType, OperationType

F32, BOOL8, INT32 = (
    OperandType.TENSOR_FLOAT32,
    OperandType.TENSOR_BOOL8,
    OperandType.INT32,
)
Op = OperationType


def _assert_serving(client_device) -> None:
    """The server still answers, and still computes."""
    assert client_device.getStatus() == DeviceStatus.AVAILABLE
    prepared = client_device.prepareModel_1_3(fibonacci_while_model())
    state, i = prepared.execute([STATE0, np.array([3], np.int32)]).outputs
    expected = STATE0
    for _ in range(3):
        expected = expected @ W.T + B
    np.testing.assert_allclose(state, expected, rtol=1e-6)
    assert i.tolist() == [3]
    prepared.release()


def _infinite_loop_model(element_type: int = F32, scale: float = 0.0, zero_point: int = 0):
    """The corpus' while_infinite_loop: cond = i >= n, body = i + 1, i = 1, n = 0."""
    mb = ModelBuilder()
    q = {"scale": scale, "zero_point": zero_point}
    cond, body = mb.subgraph(), mb.subgraph()
    ci, cn = cond.input(element_type, [1], **q), cond.input(element_type, [1], **q)
    flag = cond.output(BOOL8, [1])
    cond.operation(Op.GREATER_EQUAL, [ci, cn], [flag])
    bi, _bn = body.input(element_type, [1], **q), body.input(element_type, [1], **q)
    bo = body.output(element_type, [1], **q)
    one = 1.0 if element_type == F32 else round(1.0 / scale) + zero_point
    act = body.constant(INT32, 0)
    body.operation(Op.ADD, [bi, body.constant(element_type, [one], **q), act], [bo])
    g = mb.main
    i, n = g.input(element_type, [1], **q), g.input(element_type, [1], **q)
    out = g.output(element_type, [1], **q)
    g.operation(Op.WHILE, [g.subgraph_ref(cond), g.subgraph_ref(body), i, n], [out])
    return mb.build()


def test_fibonacci_while_matches_numpy(client_device):
    prepared = client_device.prepareModel_1_3(fibonacci_while_model())
    for n in (0, 1, 10, 500):
        state, i = prepared.execute([STATE0, np.array([n], np.int32)], measure=True).outputs
        expected = STATE0.copy()
        for _ in range(n):
            expected = expected @ W.T + B
        np.testing.assert_allclose(state, expected, rtol=1e-5)
        assert i.tolist() == [n]
    prepared.release()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("loop_timeout_ns", [1_000_000, None], ids=["1ms", "default-2s"])
@pytest.mark.parametrize("synchronous", [True, False], ids=["sync", "async"])
def test_infinite_loop_times_out_and_server_keeps_serving(
    client_device, loop_timeout_ns, synchronous
):
    prepared = client_device.prepareModel_1_3(_infinite_loop_model())
    with pytest.raises(MissedDeadline) as info:
        prepared.execute(
            [np.array([1.0], np.float32), np.array([0.0], np.float32)],
            loop_timeout_ns=loop_timeout_ns,
            synchronous=synchronous,
        )
    assert info.value.transient
    assert "WHILE" in info.value.message
    prepared.release()
    _assert_serving(client_device)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "element_type, scale, zero_point",
    [(OperandType.TENSOR_QUANT8_ASYMM, 1.0, 127), (OperandType.TENSOR_QUANT8_ASYMM_SIGNED, 1.0, 0)],
)
def test_quantized_infinite_loop_times_out(client_device, element_type, scale, zero_point):
    """The quant8 variants saturate at the top of the range and loop forever too."""
    prepared = client_device.prepareModel_1_3(_infinite_loop_model(element_type, scale, zero_point))
    dtype = np.uint8 if element_type == OperandType.TENSOR_QUANT8_ASYMM else np.int8
    i0, n0 = np.array([1 + zero_point], dtype), np.array([zero_point], dtype)
    with pytest.raises(MissedDeadline):
        prepared.execute([i0, n0], loop_timeout_ns=1_000_000)
    _assert_serving(client_device)


@pytest.mark.timeout(60)
def test_infinite_loop_concurrent_with_other_work(client_device):
    """A looping execution does not block other executions on the same server."""
    looping = client_device.prepareModel_1_3(_infinite_loop_model())
    future = looping.execute_async(
        [np.array([1.0], np.float32), np.array([0.0], np.float32)], loop_timeout_ns=500_000_000
    )
    _assert_serving(client_device)
    with pytest.raises(MissedDeadline):
        future.result(timeout=30)


def _if_model(condition_no_value: bool):
    """y = IF(c, x + x, x * x) on x [2]; c is a model input or NO_VALUE."""
    mb = ModelBuilder()
    then, other = mb.subgraph(), mb.subgraph()
    for sg, op in ((then, Op.ADD), (other, Op.MUL)):
        x = sg.input(F32, [2])
        y = sg.output(F32, [2])
        sg.operation(op, [x, x, sg.constant(INT32, 0)], [y])
    g = mb.main
    c = g.no_value(BOOL8, [1]) if condition_no_value else g.input(BOOL8, [1])
    x = g.input(F32, [2])
    y = g.output(F32, [2])
    g.operation(Op.IF, [c, g.subgraph_ref(then), g.subgraph_ref(other), x], [y])
    return mb.build()


def test_if_computed_branch(client_device):
    prepared = client_device.prepareModel_1_3(_if_model(False))
    x = np.array([3.0, -2.0], np.float32)
    for flag, expected in ((True, x + x), (False, x * x)):
        (y,) = prepared.execute([np.array([flag]), x]).outputs
        np.testing.assert_array_equal(y, expected)


def test_if_condition_without_value_fails_at_execution(client_device):
    """Preparing succeeds (the model is valid); executing must fail (if_no_value)."""
    prepared = client_device.prepareModel_1_3(_if_model(True))
    with pytest.raises(GeneralFailure, match="IF"):
        prepared.execute([np.array([1.0, 2.0], np.float32)])
    _assert_serving(client_device)


def test_while_with_unknown_size_operand_is_invalid(client_device):
    """HAL 1.3 drivers must reject WHILE operands of unknown size (b/132458982)."""
    mb = ModelBuilder()
    cond, body = mb.subgraph(), mb.subgraph()
    ci = cond.input(F32, [0])
    flag = cond.output(BOOL8, [1])
    cond.operation(Op.LESS, [ci, ci], [flag])
    bi = body.input(F32, [0])
    bo = body.output(F32, [0])
    body.operation(Op.ADD, [bi, bi, body.constant(INT32, 0)], [bo])
    g = mb.main
    x = g.input(F32, [2])
    y = g.output(F32, [2])
    g.operation(Op.WHILE, [g.subgraph_ref(cond), g.subgraph_ref(body), x], [y])
    model = mb.build()
    with pytest.raises(InvalidArgument, match="WHILE"):
        client_device.getSupportedOperations_1_3(model)
    with pytest.raises(InvalidArgument, match="WHILE"):
        client_device.prepareModel_1_3(model)
    _assert_serving(client_device)
