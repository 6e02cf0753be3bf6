"""Host steps (nnhal.runtime.host): extension operations a host backend runs in-process.

A toy backend (negation, its blob a label) stands in for ONNX Runtime or LiteRT, so these
tests need no optional extra: the host device takes exactly the host operations, the
partitioner gives them steps between the CPU device's, a host operation inside a WHILE body
sends the WHILE to the runtime's interpreter, and a failing host kernel is an error.
"""

from __future__ import annotations

import numpy as np
import pytest
from nnhal.runtime.api import Compilation, run_model
from nnhal.runtime.host import HOST_NAME, HostBackend, host_devices, register_backend

from nnhal.builder import ModelBuilder
from nnhal.errors import HalError
from nnhal.types import OperandType as T
from nnhal.types import OperationType as O

EXT = "org.nnhal.test.negate"


class _Negate(HostBackend):
    extension = EXT
    label = "negator"

    def describe(self, blob: bytes) -> str:
        return f"negate ({blob.decode()})"

    def kernel(self, blob: bytes):
        if blob == b"broken":
            return lambda args: (_ for _ in ()).throw(RuntimeError("the host library failed"))
        return lambda args: [-np.asarray(args[0])]


register_backend(_Negate())


def _host_op(sb, prefix: int, x, out_dims=(2,), label=b"neg", pool=False):
    code = prefix << 16
    t = sb.temporary(T.TENSOR_FLOAT32, out_dims)
    blob = sb.constant(code, label, (len(label),), reference=pool)
    sb.operation(code, [blob, x], [t])
    return t


def _add_one(sb, a, out):
    one = sb.constant(T.TENSOR_FLOAT32, np.ones(2, np.float32))
    sb.operation(O.ADD, [a, one, sb.constant(T.INT32, 0)], [out])


def _main_model(label=b"neg", pool=False):
    mb = ModelBuilder()
    prefix = mb.extension(EXT, 7)
    m = mb.main
    x = m.input(T.TENSOR_FLOAT32, (2,))
    r = m.temporary(T.TENSOR_FLOAT32, (2,))
    m.operation(O.RELU, [x], [r])
    t = _host_op(m, prefix, r, label=label, pool=pool)
    y = m.output(T.TENSOR_FLOAT32, (2,))
    _add_one(m, t, y)
    return mb.build()


@pytest.mark.parametrize("pool", [False, True], ids=["copy", "pool"])
def test_host_step_between_cpu_steps(pool):
    model = _main_model(pool=pool)  # the blob in operandValues or in a memory pool
    assert [d.name for d in host_devices(model)] == [HOST_NAME]
    out, ex = run_model(model, [np.array([1.0, -2.0], np.float32)])
    np.testing.assert_array_equal(out[0], [0.0, 1.0])  # -relu(x) + 1
    steps = [(s.device, s.operations) for s in ex.report.steps]
    assert steps == [("nnapi-reference", [0]), (HOST_NAME, [1]), ("nnapi-reference", [2])]


def test_host_device_explains_and_plan_names_the_backend():
    from nnhal.tools.cli_runtime import plan_json

    model = _main_model()
    doc = plan_json(model, [], 1)
    assert doc["devices"] == [HOST_NAME, "nnapi-reference"]
    ops = doc["operations"]
    assert [o["device"] for o in ops] == ["nnapi-reference", HOST_NAME, "nnapi-reference"]
    assert ops[1]["why"] == "negator: negate (neg)"
    assert "not a host operation" in ops[0]["unsupported"][HOST_NAME]


def test_no_host_extension_no_host_device():
    mb = ModelBuilder()
    x = mb.main.input(T.TENSOR_FLOAT32, (2,))
    y = mb.main.output(T.TENSOR_FLOAT32, (2,))
    _add_one(mb.main, x, y)
    model = mb.build()
    assert host_devices(model) == []
    c = Compilation(model)
    assert [d.name for d in c.devices] == ["nnapi-reference"]


def test_host_op_inside_a_while_body():
    mb = ModelBuilder()
    prefix = mb.extension(EXT, 7)
    cond, body = mb.subgraph(), mb.subgraph()
    ci, _cx = cond.input(T.TENSOR_INT32, (1,)), cond.input(T.TENSOR_FLOAT32, (2,))
    co = cond.output(T.TENSOR_BOOL8, (1,))
    cond.operation(O.LESS, [ci, cond.constant(T.TENSOR_INT32, np.array([3], np.int32))], [co])
    bi, bx = body.input(T.TENSOR_INT32, (1,)), body.input(T.TENSOR_FLOAT32, (2,))
    oi, ox = body.output(T.TENSOR_INT32, (1,)), body.output(T.TENSOR_FLOAT32, (2,))
    one_i = body.constant(T.TENSOR_INT32, np.array([1], np.int32))
    body.operation(O.ADD, [bi, one_i, body.constant(T.INT32, 0)], [oi])
    _add_one(body, _host_op(body, prefix, bx), ox)
    m = mb.main
    x = m.input(T.TENSOR_FLOAT32, (2,))
    zero = m.constant(T.TENSOR_INT32, np.array([0], np.int32))
    n, y = m.output(T.TENSOR_INT32, (1,)), m.output(T.TENSOR_FLOAT32, (2,))
    m.operation(O.WHILE, [m.subgraph_ref(cond), m.subgraph_ref(body), zero, x], [n, y])
    out, ex = run_model(mb.build(), [np.array([1.0, 2.0], np.float32)])
    x_ = np.array([1.0, 2.0])
    for _ in range(3):
        x_ = -x_ + 1
    np.testing.assert_array_equal(out[1], x_)
    assert out[0].tolist() == [3]
    host_runs = [s for s in ex.report.steps if s.device == HOST_NAME]
    assert len(host_runs) == 3 and all(s.source == 2 for s in host_runs)


def test_failing_host_kernel_is_a_general_failure():
    model = _main_model(label=b"broken")
    with pytest.raises(HalError, match="the host library failed") as info:
        run_model(model, [np.array([1.0, -2.0], np.float32)])
    assert info.value.status.name == "GENERAL_FAILURE"
