"""Family "memory-domain": IDevice::allocate and IBuffer (hal13.md §1.5, §4.7, §5.10).

Always run (VTS MemoryDomainAllocateTest): invalid allocations must answer
INVALID_ARGUMENT or GENERAL_FAILURE (never a buffer): no roles, a null or
unknown prepared model, a model index or io index out of range, a frequency
of 10, 0 or -0.5, the same role twice, a descriptor whose rank conflicts
with the role's operand.

When ``allocate`` gives a buffer for a valid input role (probed once;
otherwise skipped with the answer it gave):

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
from nnhal.cts.core import Problems, TestCase, check
from nnhal.cts.paths import execute
from nnhal.cts.target import add_model

from nnhal._client_io import IoPlan
from nnhal.client import PreparedModel
from nnhal.errors import HalError
from nnhal.types import (
    BufferDesc,
    BufferRole,
    DataLocation,
    ErrorStatus,
    InlineMemory,
    RequestArgument,
    TokenMemory,
)

FAMILY = "memory-domain"
_REJECTED = (ErrorStatus.INVALID_ARGUMENT, ErrorStatus.GENERAL_FAILURE)
_X = np.array([1.5, -2.0], np.float32)
_Y = np.array([0.5, 4.0], np.float32)


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
    model = add_model()
    target.require_supported(model)  # a device that cannot run the model is a skip
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
    model = add_model()
    target.require_supported(model)
    prepared = target.device.prepareModel_1_3(model)
    return model, prepared


def _copy(target) -> None:
    _, prepared = _setup(target)
    try:
        buffer = target.device.allocate(
            BufferDesc(), [prepared], [BufferRole(0, 0, 1.0)], [BufferRole(0, 0, 1.0)]
        )
        try:
            try:
                buffer.copyTo(InlineMemory(bytes(_X.nbytes)))
                check(False, "copyTo of an uninitialized buffer returned NONE")
            except HalError as e:
                check(
                    e.status == ErrorStatus.GENERAL_FAILURE,
                    f"copyTo of an uninitialized buffer: {e}, expected GENERAL_FAILURE",
                )
            for size in (_X.nbytes // 2, _X.nbytes * 2):
                try:
                    buffer.copyFrom(InlineMemory(bytes(size)))
                    check(False, f"copyFrom of {size} bytes into {_X.nbytes} returned NONE")
                except HalError as e:
                    check(
                        e.status == ErrorStatus.INVALID_ARGUMENT,
                        f"copyFrom of {size} bytes: {e}, expected INVALID_ARGUMENT",
                    )
            buffer.copyFrom(InlineMemory(_X.tobytes()))
            back = buffer.copyTo(InlineMemory(bytes(_X.nbytes)))
            check(back == _X.tobytes(), f"copyTo returned {back!r}, copyFrom gave {_X.tobytes()!r}")
        finally:
            buffer.release()
    finally:
        prepared.release()


def _device_request(model, token_in: int | None, token_out: int | None):
    """x (input 0) and the output from/into device buffers (token pools appended)."""
    plan = IoPlan(model, [_X, _Y], None, "inline")
    request = plan.request
    pools = list(request.pools)
    inputs, outputs = list(request.inputs), list(request.outputs)
    if token_in is not None:
        pools.append(TokenMemory(token_in))
        inputs[0] = RequestArgument(location=DataLocation(len(pools) - 1, 0, 0))
    if token_out is not None:
        pools.append(TokenMemory(token_out))
        outputs[0] = RequestArgument(location=DataLocation(len(pools) - 1, 0, 0))
    plan.close()
    return replace(request, inputs=tuple(inputs), outputs=tuple(outputs), pools=tuple(pools))


def _execute(target) -> str:
    model, prepared = _setup(target)
    paths = ["sync", "async"] + (["fenced"] if target.capability("fenced").present else [])
    try:
        src = target.device.allocate(BufferDesc(), [prepared], [BufferRole(0, 0, 1.0)], [])
        dst = target.device.allocate(BufferDesc(), [prepared], [], [BufferRole(0, 0, 1.0)])
        try:
            src.copyFrom(InlineMemory(_X.tobytes()))
            for path in paths:
                result = execute(
                    target, prepared, _device_request(model, src.token, dst.token), path
                )
                check(result.status == ErrorStatus.NONE, f"{result.describe()}")
                out = np.frombuffer(dst.copyTo(InlineMemory(bytes(_X.nbytes))), np.float32)
                check(np.array_equal(out, _X + _Y), f"{path}: output {out}, expected {_X + _Y}")
        finally:
            src.release()
            dst.release()
    finally:
        prepared.release()
    return f"device buffers as input and output on {', '.join(paths)}"


def _uninitialized(target) -> None:
    model, prepared = _setup(target)
    try:
        src = target.device.allocate(BufferDesc(), [prepared], [BufferRole(0, 0, 1.0)], [])
        try:
            result = execute(target, prepared, _device_request(model, src.token, None), "sync")
            check(
                result.status == ErrorStatus.GENERAL_FAILURE,
                f"an uninitialized buffer as input: {result.describe()}, expected GENERAL_FAILURE",
            )
        finally:
            src.release()
    finally:
        prepared.release()


def _wrong_model(target) -> None:
    model, prepared = _setup(target)
    other = target.device.prepareModel_1_3(model)
    try:
        src = target.device.allocate(BufferDesc(), [prepared], [BufferRole(0, 0, 1.0)], [])
        try:
            src.copyFrom(InlineMemory(_X.tobytes()))
            result = execute(target, other, _device_request(model, src.token, None), "sync")
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
        TestCase(f"{FAMILY}/copy", FAMILY, _copy),
        TestCase(f"{FAMILY}/execute", FAMILY, _execute),
        TestCase(f"{FAMILY}/uninitialized-input", FAMILY, _uninitialized),
        TestCase(f"{FAMILY}/wrong-model", FAMILY, _wrong_model),
    ]
