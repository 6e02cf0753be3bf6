"""Family "basic": the device's static answers (VTS BasicTests, hal13.md §5.2).

getStatus is AVAILABLE; getCapabilities_1_3 has positive performance numbers,
operandPerformance sorted by type without SUBGRAPH; getVersionString is not
empty; getType is one DeviceType; extension names follow the naming rule;
getNumberOfCacheFilesNeeded is at most 32 each; a model with a cycle
(CycleTest) and an empty model are INVALID_ARGUMENT from both
getSupportedOperations_1_3 and prepareModel_1_3. ``release``: a released
prepared model, driver buffer and fenced callback are unknown afterwards
(INVALID_ARGUMENT); ``release-cycles``: 10,000 prepare/release cycles leave
the target able to prepare and execute (release frees).
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
from nnhal.cts.core import Problems, TestCase, check, fail
from nnhal.cts.paths import execute

from nnhal._client_io import IoPlan
from nnhal.builder import ModelBuilder
from nnhal.client import Buffer, FencedExecutionCallback, PreparedModel
from nnhal.errors import HalError
from nnhal.types import (
    MAX_NUMBER_OF_CACHE_FILES,
    BufferDesc,
    BufferRole,
    DeviceStatus,
    DeviceType,
    ErrorStatus,
    InlineMemory,
    Model,
    OperandType,
    OperationType,
)

FAMILY = "basic"
_EXTENSION_NAME = re.compile(r"^[a-z0-9_.]+$")


def _status(target) -> None:
    status = target.device.getStatus()
    check(status == DeviceStatus.AVAILABLE, f"getStatus is {status.name}, expected AVAILABLE")


def _capabilities(target) -> None:
    caps = target.device.getCapabilities_1_3()
    for name in (
        "relaxedFloat32toFloat16PerformanceScalar",
        "relaxedFloat32toFloat16PerformanceTensor",
        "ifPerformance",
        "whilePerformance",
    ):
        info = getattr(caps, name)
        check(info.execTime > 0 and info.powerUsage > 0, f"{name} is {info}; both must be > 0")
    types = [p.type for p in caps.operandPerformance]
    check(types == sorted(types), f"operandPerformance is not sorted by type: {types}")
    check(len(set(types)) == len(types), f"operandPerformance lists a type twice: {types}")
    check(OperandType.SUBGRAPH not in types, "operandPerformance has a SUBGRAPH entry")
    for p in caps.operandPerformance:
        check(
            p.info.execTime > 0 and p.info.powerUsage > 0,
            f"operandPerformance for type {p.type} is {p.info}; both must be > 0",
        )


def _version(target) -> None:
    version = target.device.getVersionString()
    check(len(version) > 0, "getVersionString is empty")


def _type(target) -> None:
    t = target.device.getType()
    check(t in tuple(DeviceType), f"getType is {t}, not one DeviceType")


def _extensions(target) -> None:
    for e in target.device.getSupportedExtensions():
        check(
            e.name and _EXTENSION_NAME.match(e.name) and "." in e.name,
            f"extension name {e.name!r}: must be lowercase letters, digits, '_' and '.', "
            "with at least one '.'",
        )


def _cache_files(target) -> None:
    num_model, num_data = target.device.getNumberOfCacheFilesNeeded()
    check(
        num_model <= MAX_NUMBER_OF_CACHE_FILES and num_data <= MAX_NUMBER_OF_CACHE_FILES,
        f"getNumberOfCacheFilesNeeded is ({num_model}, {num_data}); each must be <= 32",
    )


def cycle_model() -> Model:
    """VTS CycleTest: 3 = ADD(0, 4, 2); 4 = ADD(1, 3, 2); 5 = ADD(4, 0, 2)."""
    mb = ModelBuilder()
    g = mb.main
    f32 = OperandType.TENSOR_FLOAT32
    a, b = g.input(f32, [1]), g.input(f32, [1])
    act = g.input(OperandType.INT32)
    t3, t4 = g.temporary(f32, [1]), g.temporary(f32, [1])
    out = g.output(f32, [1])
    g.operation(OperationType.ADD, [a, t4, act], [t3])
    g.operation(OperationType.ADD, [b, t3, act], [t4])
    g.operation(OperationType.ADD, [t4, a, act], [out])
    return mb.build()


def expect_invalid(target, model: Model, what: str) -> None:
    """INVALID_ARGUMENT from getSupportedOperations_1_3 and from prepareModel_1_3."""
    for name, call in (
        ("getSupportedOperations_1_3", target.device.getSupportedOperations_1_3),
        ("prepareModel_1_3", target.device.prepareModel_1_3),
    ):
        try:
            result = call(model)
        except HalError as e:
            check(
                e.status == ErrorStatus.INVALID_ARGUMENT,
                f"{what}: {name} returned {e}, expected INVALID_ARGUMENT",
            )
            continue
        if name == "prepareModel_1_3":
            try:
                result.release()
            except HalError:
                pass
        fail(f"{what}: {name} returned NONE, expected INVALID_ARGUMENT")


def _cycle(target) -> None:
    expect_invalid(target, cycle_model(), "a model whose operations form a cycle")
    target.assert_serving()


def _empty(target) -> None:
    model = cycle_model()
    empty = replace(
        model,
        main=replace(model.main, operations=(), operands=(), inputIndexes=(), outputIndexes=()),
    )
    expect_invalid(target, empty, "a model whose main subgraph is empty")
    target.assert_serving()


def _release(target) -> str:
    """A released prepared model, buffer and fenced callback are unknown afterwards."""
    probe = target.require_probe()
    problems = Problems()
    prepared = target.device.prepareModel_1_3(probe.model)
    stale = PreparedModel(target.device, prepared.id, probe.model)
    prepared.release()
    plan = IoPlan(probe.model, [probe.x(), probe.y()], None, "inline")
    try:

        def run_released() -> None:
            result = execute(target, stale, plan.request, "sync")
            check(result.status == ErrorStatus.INVALID_ARGUMENT,
                  f"executing a released prepared model: {result.describe()}, expected "
                  "INVALID_ARGUMENT")  # fmt: skip

        problems.run("prepared model", run_released)
        if target.capability("memory_domains").usable:
            p2 = target.device.prepareModel_1_3(probe.model)
            try:
                buffer = target.device.allocate(BufferDesc(), [p2], [BufferRole(0, 0, 1.0)], [])
                old = Buffer(target.device, buffer.id, buffer.token)
                buffer.release()

                def copy_released() -> None:
                    try:
                        old.copyFrom(InlineMemory(probe.x().tobytes()))
                    except HalError as e:
                        check(e.status == ErrorStatus.INVALID_ARGUMENT,
                              f"copyFrom into a released buffer: {e}, expected INVALID_ARGUMENT")  # fmt: skip
                        return
                    fail("copyFrom into a released buffer returned NONE")

                problems.run("buffer", copy_released)
            finally:
                p2.release()
        if target.capability("fenced").usable:
            p3 = target.device.prepareModel_1_3(probe.model)
            try:
                _, fenced = p3.execute_fenced([probe.x(), probe.y()])
                callback = FencedExecutionCallback(target.device, fenced.callback.id)
                fenced.callback.release()

                def info_released() -> None:
                    try:
                        status, _, _ = callback.getExecutionInfo()
                    except HalError as e:
                        check(e.status == ErrorStatus.INVALID_ARGUMENT,
                              f"getExecutionInfo of a released callback: {e}")  # fmt: skip
                        return
                    fail(f"getExecutionInfo of a released callback answered {status.name}, "
                         "expected INVALID_ARGUMENT (unknown callback)")  # fmt: skip

                problems.run("fenced callback", info_released)
            finally:
                p3.release()
    finally:
        plan.close()
    problems.raise_if_any("released objects")
    return f"{problems.checked} released objects unknown afterwards"


#: prepare/release cycles of ``basic/release-cycles``: far beyond any sane per-client quota
RELEASE_CYCLES = 10_000


def _release_cycles(target) -> str:
    """Release must free: after many prepare/release cycles the target still prepares."""
    probe = target.require_probe()
    for k in range(RELEASE_CYCLES):
        try:
            prepared = target.device.prepareModel_1_3(probe.model)
        except HalError as e:
            fail(f"prepare/release cycle {k + 1} of {RELEASE_CYCLES}: prepareModel_1_3: {e} "
                 "(released prepared models are not freed?)")  # fmt: skip
        prepared.release()
    with target.device.prepareModel_1_3(probe.model) as prepared:
        out = prepared.execute([probe.x(), probe.y()]).outputs[0]
    check(np.array_equal(out, probe.expected()), f"after the cycles: output {out.tolist()}")
    return f"{RELEASE_CYCLES} prepare/release cycles, then a correct execution"


def collect(library, options) -> list[TestCase]:
    cases = [
        ("getStatus", _status),
        ("getCapabilities_1_3", _capabilities),
        ("getVersionString", _version),
        ("getType", _type),
        ("getSupportedExtensions", _extensions),
        ("getNumberOfCacheFilesNeeded", _cache_files),
        ("cycle", _cycle),
        ("empty-model", _empty),
        ("release", _release),
    ]
    out = [TestCase(f"{FAMILY}/{name}", FAMILY, fn) for name, fn in cases]
    out.append(
        TestCase(f"{FAMILY}/release-cycles", FAMILY, _release_cycles, timeout=600.0, slow=True)
    )
    return out
