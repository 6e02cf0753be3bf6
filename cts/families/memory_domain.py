"""Family "memory-domain": IDevice::allocate and IBuffer (hal13.md §1.5, §4.7, §5.10).

Always run (VTS MemoryDomainAllocateTest): invalid allocations must answer
INVALID_ARGUMENT or GENERAL_FAILURE (never a buffer): no roles, a null or
unknown prepared model, a model index or io index out of range, a frequency
of 10, 0 or -0.5, the same role twice, a descriptor whose rank conflicts
with the role's operand.

When ``allocate`` gives a buffer for a valid input role of the probe model
(ADD in the first of float32, float16, quant8 asymm and signed the target
supports; probed once). A GENERAL_FAILURE there means "no memory domains"
and the tests are skipped with it; any other error fails them:

- ``allocate-conflicts``: roles whose operand type, scale, zero point, rank
  or dimensions differ (between two models' roles, as input/input,
  input/output and output/output pairs, or against the descriptor), and
  dimensions for a scalar role: INVALID_ARGUMENT or GENERAL_FAILURE;
- ``copy-dimensions``: copyFrom with a wrong rank, wrong or zero dimensions
  is INVALID_ARGUMENT, with none or the full ones NONE; copyTo into half or
  double the size is INVALID_ARGUMENT;
- ``io-misuse``: a buffer used at another input index, an input-role buffer
  as an output, an output-role buffer as an input, one buffer as an input and
  an output of the same request: INVALID_ARGUMENT; one buffer as two inputs:
  NONE (every path);
- ``copy``: copyTo of an uninitialized buffer is GENERAL_FAILURE; copyFrom of
  half or double the size is INVALID_ARGUMENT; copyFrom then copyTo returns
  the same bytes;
- ``execute``: input 0 from a device buffer and output 0 into one, on sync,
  async and fenced (when available): the golden values;
- ``uninitialized-input``: a buffer never written used as an input is
  GENERAL_FAILURE;
- ``wrong-model``: a buffer allocated for model A used with model B is
  INVALID_ARGUMENT.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from nnhal.cts.core import Problems, Skip, TestCase, check, fail
from nnhal.cts.paths import check_error, execute

from nnhal._client_io import IoPlan
from nnhal.builder import ModelBuilder
from nnhal.client import PreparedModel
from nnhal.errors import HalError
from nnhal.types import (
    BufferDesc,
    BufferRole,
    DataLocation,
    ErrorStatus,
    InlineMemory,
    OperandType,
    OperationType,
    RequestArgument,
    TokenMemory,
)

FAMILY = "memory-domain"
_REJECTED = (ErrorStatus.INVALID_ARGUMENT, ErrorStatus.GENERAL_FAILURE)
_QUANT8 = (OperandType.TENSOR_QUANT8_ASYMM, OperandType.TENSOR_QUANT8_ASYMM_SIGNED)


def _allocate_cases(device, prepared) -> dict[str, dict]:
    null, unknown = PreparedModel(device, 0, None), PreparedModel(device, 987_654_321, None)
    role = BufferRole(0, 0, 1.0)
    return {
        "no-roles": {"preparedModels": [prepared]},
        "no-prepared-models": {"inputRoles": [role]},
        "null-prepared-model": {"preparedModels": [null], "inputRoles": [role]},
        "unknown-prepared-model": {"preparedModels": [unknown], "inputRoles": [role]},
        "model-index": {"preparedModels": [prepared], "inputRoles": [BufferRole(1, 0, 1.0)]},
        "io-index": {"preparedModels": [prepared], "inputRoles": [BufferRole(0, 5, 1.0)]},
        "output-io-index": {"preparedModels": [prepared], "outputRoles": [BufferRole(0, 1, 1.0)]},
        "frequency-10": {"preparedModels": [prepared], "inputRoles": [BufferRole(0, 0, 10.0)]},
        "frequency-0": {"preparedModels": [prepared], "inputRoles": [BufferRole(0, 0, 0.0)]},
        "frequency-negative": {
            "preparedModels": [prepared],
            "inputRoles": [BufferRole(0, 0, -0.5)],
        },
        "same-role-twice": {"preparedModels": [prepared], "inputRoles": [role, role]},
        "desc-rank-conflict": {
            "desc": BufferDesc((1, 2, 3)),
            "preparedModels": [prepared],
            "inputRoles": [role],
        },
    }


def _allocate_invalid(target) -> str:
    model = target.require_probe().model
    prepared = target.device.prepareModel_1_3(model)
    problems = Problems()
    try:
        for name, kwargs in _allocate_cases(target.device, prepared).items():

            def one(kwargs=kwargs) -> None:
                try:
                    buffer = target.device.allocate(**kwargs)
                except HalError as e:
                    check(
                        e.status in _REJECTED,
                        f"expected INVALID_ARGUMENT or GENERAL_FAILURE, got {e}",
                    )
                    return
                buffer.release()
                check(False, f"allocate returned a buffer (token {buffer.token})")

            problems.run(name, one)
    finally:
        prepared.release()
    target.assert_serving()
    problems.raise_if_any("invalid allocations")
    return f"{problems.checked} invalid allocations rejected"


def _setup(target):
    target.require("memory_domains")
    probe = target.require_probe()
    prepared = target.device.prepareModel_1_3(probe.model)
    return probe, prepared


def _copy(target) -> None:
    probe, prepared = _setup(target)
    x = probe.x()
    try:
        buffer = target.device.allocate(
            BufferDesc(), [prepared], [BufferRole(0, 0, 1.0)], [BufferRole(0, 0, 1.0)]
        )
        try:
            try:
                buffer.copyTo(InlineMemory(bytes(x.nbytes)))
                check(False, "copyTo of an uninitialized buffer returned NONE")
            except HalError as e:
                check(
                    e.status == ErrorStatus.GENERAL_FAILURE,
                    f"copyTo of an uninitialized buffer: {e}, expected GENERAL_FAILURE",
                )
            for size in (x.nbytes // 2, x.nbytes * 2):
                try:
                    buffer.copyFrom(InlineMemory(bytes(size)))
                    check(False, f"copyFrom of {size} bytes into {x.nbytes} returned NONE")
                except HalError as e:
                    check(
                        e.status == ErrorStatus.INVALID_ARGUMENT,
                        f"copyFrom of {size} bytes: {e}, expected INVALID_ARGUMENT",
                    )
            buffer.copyFrom(InlineMemory(x.tobytes()))
            back = buffer.copyTo(InlineMemory(bytes(x.nbytes)))
            check(back == x.tobytes(), f"copyTo returned {back!r}, copyFrom gave {x.tobytes()!r}")
        finally:
            buffer.release()
    finally:
        prepared.release()


def _expect_status(what: str, call, allowed: tuple[ErrorStatus, ...]) -> None:
    """``call()`` must raise a HalError with a status in ``allowed`` (NONE allowed if listed)."""
    names = "/".join(s.name for s in allowed)
    try:
        call()
    except HalError as e:
        check(e.status in allowed, f"{what}: {e}, expected {names}")
        return
    check(ErrorStatus.NONE in allowed, f"{what}: returned NONE, expected {names}")


def _copy_dimensions(target) -> str:
    """VTS CopyFrom_InvalidDimensions and CopyTo_InvalidMemorySize on the [2] probe tensor."""
    probe, prepared = _setup(target)
    x = probe.x()
    invalid = (ErrorStatus.INVALID_ARGUMENT,)
    problems = Problems()
    try:
        buffer = target.device.allocate(
            BufferDesc(), [prepared], [BufferRole(0, 0, 1.0)], [BufferRole(0, 0, 1.0)]
        )
        data = InlineMemory(x.tobytes())
        try:
            for label, dims, allowed in (
                ("copyFrom with rank 2 dimensions [2, 1]", (2, 1), invalid),
                ("copyFrom with dimensions [1]", (1,), invalid),
                ("copyFrom with dimensions [4]", (4,), invalid),
                ("copyFrom with dimensions [0]", (0,), invalid),
                ("copyFrom with no dimensions", (), (ErrorStatus.NONE,)),
                ("copyFrom with the full dimensions [2]", (2,), (ErrorStatus.NONE,)),
            ):
                problems.run(
                    label,
                    lambda d=dims, a=allowed, w=label: _expect_status(
                        w, lambda: buffer.copyFrom(data, d), a
                    ),
                )
            for size in (x.nbytes // 2, x.nbytes * 2):
                problems.run(
                    f"copyTo into {size} bytes",
                    lambda n=size: _expect_status(
                        f"copyTo into {n} bytes of a {x.nbytes}-byte buffer",
                        lambda: buffer.copyTo(InlineMemory(bytes(n))),
                        invalid,
                    ),
                )

            def exact() -> None:
                back = buffer.copyTo(InlineMemory(bytes(x.nbytes)))
                check(back == x.tobytes(), f"copyTo returned {back!r}, expected {x.tobytes()!r}")

            problems.run("copyTo of the exact size", exact)
        finally:
            buffer.release()
    finally:
        prepared.release()
    problems.raise_if_any("copies")
    return f"{problems.checked} copies"


def _typed_add(element_type: int, dims, scale: float = 0.0, zero_point: int = 0):
    """out = a + b with the activation as a model input (VTS memory-domain ADD model)."""
    mb = ModelBuilder()
    g = mb.main
    a = g.input(element_type, dims, scale, zero_point)
    b = g.input(element_type, dims, scale, zero_point)
    act = g.input(OperandType.INT32)
    out = g.output(element_type, dims, scale, zero_point)
    g.operation(OperationType.ADD, [a, b, act], [out])
    return mb.build()


def _quant(t: int) -> tuple[float, int]:
    return (0.5, 0) if t in _QUANT8 else (0.0, 0)


def _conflicts(probe) -> dict[str, tuple]:
    """name -> (model A, model B, desc): roles of A and B must not combine (VTS Conflict*)."""
    t = probe.element_type
    scale, zp = _quant(t)
    other_type = {
        OperandType.TENSOR_FLOAT32: OperandType.TENSOR_FLOAT16,
        OperandType.TENSOR_FLOAT16: OperandType.TENSOR_FLOAT32,
        OperandType.TENSOR_QUANT8_ASYMM: OperandType.TENSOR_QUANT8_ASYMM_SIGNED,
        OperandType.TENSOR_QUANT8_ASYMM_SIGNED: OperandType.TENSOR_QUANT8_ASYMM,
    }[t]
    base = _typed_add(t, (1, 2, 2, 2), scale, zp)
    cases = {
        "operand-type": (base, _typed_add(other_type, (1, 2, 2, 2), scale, zp), BufferDesc()),
        "rank-between-roles": (base, _typed_add(t, (1, 2, 2), scale, zp), BufferDesc()),
        "dimensions-between-roles": (base, _typed_add(t, (4, 2, 2, 2), scale, zp), BufferDesc()),
        "rank-role-and-desc": (base, None, BufferDesc((1, 2, 2))),
        "dimensions-role-and-desc": (base, None, BufferDesc((4, 2, 2, 2))),
    }
    if t in _QUANT8:
        cases["scale"] = (base, _typed_add(t, (1, 2, 2, 2), 1.0, zp), BufferDesc())
        cases["zero-point"] = (base, _typed_add(t, (1, 2, 2, 2), scale, 10), BufferDesc())
    return cases


def _allocate_conflicts(target) -> str:
    """Roles that do not describe one buffer: INVALID_ARGUMENT or GENERAL_FAILURE, no buffer."""
    probe = target.require_probe()
    problems = Problems()
    prepared_models = []

    def prepare(model):
        target.require_supported(model)
        p = target.device.prepareModel_1_3(model)
        prepared_models.append(p)
        return p

    try:
        for name, (model_a, model_b, desc) in _conflicts(probe).items():
            a = prepare(model_a)
            if model_b is None:
                pairs = [([BufferRole(0, 0, 1.0)], []), ([], [BufferRole(0, 0, 1.0)])]
                models = [a]
            else:
                try:
                    b = prepare(model_b)
                except (Skip, HalError):
                    continue  # the other type is unsupported: no second role to conflict with
                models = [a, b]
                both = [BufferRole(0, 0, 1.0), BufferRole(1, 0, 1.0)]
                pairs = [
                    (both, []),
                    ([BufferRole(0, 0, 1.0)], [BufferRole(1, 0, 1.0)]),
                    ([], both),
                ]
            for inputs, outputs in pairs:
                kind = f"{len(inputs)} input and {len(outputs)} output roles"

                def one(inputs=inputs, outputs=outputs, models=models, desc=desc) -> None:
                    try:
                        buffer = target.device.allocate(desc, models, inputs, outputs)
                    except HalError as e:
                        check(e.status in _REJECTED, f"expected INVALID_ARGUMENT or "
                              f"GENERAL_FAILURE, got {e}")  # fmt: skip
                        return
                    buffer.release()
                    fail(f"allocate returned a buffer (token {buffer.token})")

                problems.run(f"{name}, {kind}", one)
        scalar_model = prepare(_typed_add(probe.element_type, (2,), *_quant(probe.element_type)))

        def scalar_role() -> None:
            try:
                buffer = target.device.allocate(
                    BufferDesc((1,)), [scalar_model], [BufferRole(0, 2, 1.0)], []
                )
            except HalError as e:
                check(e.status in _REJECTED, f"expected INVALID_ARGUMENT or GENERAL_FAILURE, "
                      f"got {e}")  # fmt: skip
                return
            buffer.release()
            fail(f"allocate returned a buffer (token {buffer.token})")

        problems.run("dimensions [1] for the INT32 scalar role", scalar_role)
    finally:
        for p in prepared_models:
            try:
                p.release()
            except HalError:
                pass
    target.assert_serving()
    problems.raise_if_any("conflicting allocations")
    return f"{problems.checked} conflicting allocations rejected"


def _device_request(probe, token_in: int | None, token_out: int | None, *, in_index: int = 0,
                    out_index: int = 0):  # fmt: skip
    """x (input ``in_index``) and output ``out_index`` from/into device buffers."""
    plan = IoPlan(probe.model, [probe.x(), probe.y()], None, "inline")
    request = plan.request
    pools = list(request.pools)
    inputs, outputs = list(request.inputs), list(request.outputs)
    if token_in is not None:
        pools.append(TokenMemory(token_in))
        inputs[in_index] = RequestArgument(location=DataLocation(len(pools) - 1, 0, 0))
    if token_out is not None:
        if token_out != token_in:
            pools.append(TokenMemory(token_out))
        outputs[out_index] = RequestArgument(location=DataLocation(len(pools) - 1, 0, 0))
    plan.close()
    return replace(request, inputs=tuple(inputs), outputs=tuple(outputs), pools=tuple(pools))


def _paths(target) -> list[str]:
    return ["sync", "async"] + (["fenced"] if target.capability("fenced").usable else [])


def _execute(target) -> str:
    probe, prepared = _setup(target)
    paths = _paths(target)
    x, want = probe.x(), probe.expected()
    try:
        src = target.device.allocate(BufferDesc(), [prepared], [BufferRole(0, 0, 1.0)], [])
        dst = target.device.allocate(BufferDesc(), [prepared], [], [BufferRole(0, 0, 1.0)])
        try:
            src.copyFrom(InlineMemory(x.tobytes()))
            for path in paths:
                result = execute(
                    target, prepared, _device_request(probe, src.token, dst.token), path
                )
                check(result.status == ErrorStatus.NONE, f"{result.describe()}")
                out = np.frombuffer(dst.copyTo(InlineMemory(bytes(x.nbytes))), probe.dtype)
                check(np.array_equal(out, want), f"{path}: output {out}, expected {want}")
        finally:
            src.release()
            dst.release()
    finally:
        prepared.release()
    return f"device buffers as input and output on {', '.join(paths)}"


def _misuse(target) -> str:
    """VTS InvalidIOIndex, InvalidIOType and SameRequestMultipleRoles, on every path."""
    probe, prepared = _setup(target)
    x = probe.x()
    problems = Problems()
    role_in0, role_out0 = BufferRole(0, 0, 1.0), BufferRole(0, 0, 1.0)
    try:
        in0 = target.device.allocate(BufferDesc(), [prepared], [role_in0], [])
        out0 = target.device.allocate(BufferDesc(), [prepared], [], [role_out0])
        both = target.device.allocate(
            BufferDesc(), [prepared], [BufferRole(0, 0, 1.0), BufferRole(0, 1, 1.0)], [role_out0]
        )
        try:
            in0.copyFrom(InlineMemory(x.tobytes()))
            both.copyFrom(InlineMemory(x.tobytes()))
            invalid = (ErrorStatus.INVALID_ARGUMENT,)
            cases = [
                ("an input-0 buffer as input 1", _device_request(probe, in0.token, None,
                                                                 in_index=1), invalid),
                ("an input-role buffer as the output", _device_request(probe, None, in0.token),
                 invalid),
                ("an output-role buffer as input 0", _device_request(probe, out0.token, None),
                 invalid),
                ("one buffer as input 0 and the output", _device_request(
                    probe, both.token, both.token), invalid),
            ]  # fmt: skip
            # the same buffer as both inputs is allowed: x + x
            twice = _device_request(probe, both.token, None)
            pools = twice.pools
            inputs = (twice.inputs[0], RequestArgument(location=DataLocation(len(pools) - 1, 0, 0)))
            twice = replace(twice, inputs=inputs)
            for path in _paths(target):
                for what, request, allowed in cases:
                    problems.run(
                        f"{path}: {what}",
                        lambda r=request, a=allowed, w=what, p=path: check_error(
                            execute(target, prepared, r, p), a, w
                        ),
                    )

                def same_twice(p=path) -> None:
                    result = execute(target, prepared, twice, p)
                    check(result.status == ErrorStatus.NONE,
                          f"one buffer as both inputs: {result.describe()}, expected NONE")  # fmt: skip

                problems.run(f"{path}: one buffer as both inputs", same_twice)
        finally:
            for b in (in0, out0, both):
                b.release()
    finally:
        prepared.release()
    problems.raise_if_any("executions")
    return f"{problems.checked} executions"


def _uninitialized(target) -> None:
    probe, prepared = _setup(target)
    try:
        src = target.device.allocate(BufferDesc(), [prepared], [BufferRole(0, 0, 1.0)], [])
        try:
            result = execute(target, prepared, _device_request(probe, src.token, None), "sync")
            check(
                result.status == ErrorStatus.GENERAL_FAILURE,
                f"an uninitialized buffer as input: {result.describe()}, expected GENERAL_FAILURE",
            )
        finally:
            src.release()
    finally:
        prepared.release()


def _wrong_model(target) -> None:
    probe, prepared = _setup(target)
    other = target.device.prepareModel_1_3(probe.model)
    try:
        src = target.device.allocate(BufferDesc(), [prepared], [BufferRole(0, 0, 1.0)], [])
        try:
            src.copyFrom(InlineMemory(probe.x().tobytes()))
            result = execute(target, other, _device_request(probe, src.token, None), "sync")
            check(
                result.status == ErrorStatus.INVALID_ARGUMENT,
                f"a buffer of another prepared model: {result.describe()}, expected "
                "INVALID_ARGUMENT",
            )
        finally:
            src.release()
    finally:
        prepared.release()
        other.release()


def collect(library, options) -> list[TestCase]:
    return [
        TestCase(f"{FAMILY}/allocate-invalid", FAMILY, _allocate_invalid),
        TestCase(f"{FAMILY}/allocate-conflicts", FAMILY, _allocate_conflicts),
        TestCase(f"{FAMILY}/copy", FAMILY, _copy),
        TestCase(f"{FAMILY}/copy-dimensions", FAMILY, _copy_dimensions),
        TestCase(f"{FAMILY}/io-misuse", FAMILY, _misuse),
        TestCase(f"{FAMILY}/execute", FAMILY, _execute),
        TestCase(f"{FAMILY}/uninitialized-input", FAMILY, _uninitialized),
        TestCase(f"{FAMILY}/wrong-model", FAMILY, _wrong_model),
    ]
