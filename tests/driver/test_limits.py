"""Resource limits (driver/limits.py): profile parsing, model structure, nesting, tensors.

The service-level limits (pools, quotas, concurrent executions, message size)
are in tests/test_limits_service.py.
"""

from __future__ import annotations

import dataclasses
import sys

import numpy as np
import pytest
from limits_models import (
    BOOL8,
    F32,
    I32,
    INT32,
    O,
    add_model,
    device_with,
    nested_if,
    nested_while,
    serving,
)
from nnhal.driver.backends.reference import ReferenceBackend
from nnhal.driver.device import Device
from nnhal.driver.executor import compile_model
from nnhal.driver.limits import (
    DEFAULT_LIMITS,
    EXECUTOR_MAX_NESTING,
    LIMIT_KEYS,
    Limits,
    nesting_depths,
    parse_limit_options,
    with_limits,
)
from nnhal.driver.profile import PROFILES_DIR, ProfileError, load_profile, parse_profile
from nnhal.driver.support import SupportChecker

from nnhal.builder import ModelBuilder
from nnhal.errors import InvalidArgument, ResourceExhausted
from nnhal.types import ErrorStatus
from nnhal.validation import validate_model

#: every test twice: the model's code generated, and interpreted
pytestmark = pytest.mark.usefixtures("each_executor")

# ---------------------------------------------------------------------------
# Profiles and --limit
# ---------------------------------------------------------------------------


def test_defaults_are_documented_and_sane():
    limits = load_profile(None).limits
    assert limits == DEFAULT_LIMITS == Limits()
    assert limits.max_nesting_depth <= EXECUTOR_MAX_NESTING
    # every key is documented in the profile format
    text = (PROFILES_DIR / "default.toml").read_text()
    for key in LIMIT_KEYS:
        assert key in text, key


def test_limits_table_is_read(tmp_path):
    path = tmp_path / "small.toml"
    path.write_text('name = "small"\n[limits]\nmax_operands = 100\nmax_tensor_bytes = 4_096\n')
    limits = load_profile(str(path)).limits
    assert limits.max_operands == 100
    assert limits.max_tensor_bytes == 4096
    assert limits.max_operations == DEFAULT_LIMITS.max_operations


@pytest.mark.parametrize(
    "table, key, words",
    [
        ({"max_operandz": 3}, "limits.max_operandz", "unknown limit; known limits: max_operands"),
        ({"max_operands": 0}, "limits.max_operands", "positive integer, got 0"),
        ({"max_operands": -5}, "limits.max_operands", "positive integer"),
        ({"max_operands": 1.5}, "limits.max_operands", "positive integer, got 1.5"),
        ({"max_operands": True}, "limits.max_operands", "positive integer, got True"),
        ({"max_operands": "10"}, "limits.max_operands", "positive integer, got '10'"),
        ({"max_nesting_depth": 5000}, "limits.max_nesting_depth", "at most 512"),
        ({"max_message_bytes": 1 << 31}, "limits.max_message_bytes", "at most 2147483647"),
    ],
)
def test_bad_limits_table(table, key, words):
    with pytest.raises(ProfileError) as info:
        parse_profile({"name": "bad", "limits": table}, "bad.toml")
    assert f"key {key!r}" in str(info.value)
    assert words in str(info.value)
    assert "bad.toml" in str(info.value)


def test_limits_must_be_a_table():
    with pytest.raises(ProfileError, match="key 'limits': must be a table"):
        parse_profile({"name": "bad", "limits": 3})


def test_limit_options():
    assert parse_limit_options(["max_operands=10", "max_message_bytes=0x1000"]) == {
        "max_operands": 10,
        "max_message_bytes": 4096,
    }
    for bad, words in [
        ("max_operands", "expected KEY=VALUE"),
        ("max_nope=1", "unknown limit"),
        ("max_operands=ten", "positive integer, got 'ten'"),
        ("max_operands=0", "positive integer"),
        ("max_nesting_depth=513", "at most 512"),
    ]:
        with pytest.raises(ValueError, match=words):
            parse_limit_options([bad])
    profile = with_limits(load_profile(None), {"max_operands": 7})
    assert profile.limits.max_operands == 7
    assert profile.limits.max_operations == DEFAULT_LIMITS.max_operations


def test_serve_rejects_a_bad_limit(capsys):
    from nnhal.tools.cli import main

    assert main(["serve", "--address", "127.0.0.1:0", "--limit", "max_operandz=1"]) != 0
    assert "--limit max_operandz: unknown limit" in capsys.readouterr().err


# ---------------------------------------------------------------------------
# Structural limits: INVALID_ARGUMENT
# ---------------------------------------------------------------------------

# add_model(n_adds=3): 1 input + 3 constants + 2 temporaries + 1 output = 7 operands,
# 3 operations, 1 subgraph
STRUCTURE = [
    (
        {"max_operands": 6},
        "model has 7 operands; this device accepts at most 6 (limit max_operands)",
    ),
    (
        {"max_operations": 2},
        "model has 3 operations; this device accepts at most 2 (limit max_operations)",
    ),
]


@pytest.mark.parametrize("limits, message", STRUCTURE)
def test_structural_limits_in_process(limits, message):
    device = device_with(**limits)
    model = add_model(n_adds=3)
    for call in (device.getSupportedOperations_1_3, device.prepareModel_1_3):
        with pytest.raises(InvalidArgument) as info:
            call(model)
        assert info.value.message == message
    # one below the limit passes
    assert device.getSupportedOperations_1_3(add_model(n_adds=2)) == [True, True]


def test_subgraph_limit():
    device = device_with(max_subgraphs=3)
    with pytest.raises(
        InvalidArgument, match=r"model has 4 subgraphs; .* at most 3 \(limit max_sub"
    ):
        device.prepareModel_1_3(nested_if(3))
    assert device.getSupportedOperations_1_3(nested_if(2)) == [True]


@pytest.mark.parametrize("limits, message", STRUCTURE)
def test_structural_limits_over_grpc(limits, message):
    with serving(device_with(**limits)) as (client, _):
        for call in (client.getSupportedOperations_1_3, client.prepareModel_1_3):
            with pytest.raises(InvalidArgument) as info:
                call(add_model(n_adds=3))
            assert info.value.message == message
        assert client.getSupportedOperations_1_3(add_model(n_adds=2)) == [True, True]


def test_structural_limit_on_a_legacy_message():
    # the wire check reads 1.0-1.2 Model messages too (one subgraph, no "main")
    from nnhal import convert_legacy as legacy
    from nnhal._proto.v1_3 import device_pb2 as dpb

    with serving(device_with(max_operations=2)) as (client, _):
        message = dpb.GetSupportedOperationsRequest(
            model=legacy.model_to_v1_0_pb(add_model(n_adds=3))
        )
        reply = client.stub.getSupportedOperations(message)
    assert reply.status == ErrorStatus.INVALID_ARGUMENT
    assert "(limit max_operations)" in reply.message


# ---------------------------------------------------------------------------
# Nesting: validation and support at 10 000 deep, prepare refuses, the limit runs
# ---------------------------------------------------------------------------


def test_nesting_depths():
    assert nesting_depths(add_model(n_adds=2)) == [0, 0]
    assert nesting_depths(nested_if(4)) == [4]
    assert nesting_depths(nested_while(3)) == [3]


@pytest.mark.parametrize("make", [nested_if, nested_while], ids=["if", "while"])
def test_ten_thousand_deep_validation_and_support(make):
    model = make(10_000)
    limit = sys.getrecursionlimit()
    validate_model(model)
    assert nesting_depths(model) == [10_000]
    supported, reasons = SupportChecker(model, ReferenceBackend()).check()
    assert supported == [True]
    device = Device()
    supported, reasons = device.explainSupportedOperations(model)
    assert supported == [False]
    assert reasons[0].endswith(
        "IF/WHILE nested 10000 deep; this device runs at most 256 nested levels "
        "(limit max_nesting_depth)"
    )
    with pytest.raises(InvalidArgument) as info:
        device.prepareModel_1_3(model)
    assert info.value.message == (
        f"{'IF' if make is nested_if else 'WHILE'} (subgraph 0, operation 0): IF/WHILE nested "
        "10000 deep; this device runs at most 256 nested levels (limit max_nesting_depth)"
    )
    assert sys.getrecursionlimit() == limit  # nobody raised it


@pytest.mark.parametrize("make", [nested_if, nested_while], ids=["if", "while"])
def test_nesting_at_and_one_past_the_limit(make):
    # at most ``limit`` referenced subgraphs cannot nest deeper (no walk then: the IF
    # chain of 3), more are walked (the WHILE chain of 3 has its conditions too)
    device = Device()
    device.limits = dataclasses.replace(device.limits, max_nesting_depth=3)
    assert len(make(4).referenced) > 3
    assert device.explainSupportedOperations(make(3))[0] == [True]
    device.prepareModel_1_3(make(3))
    supported, reasons = device.explainSupportedOperations(make(4))
    assert supported == [False] and reasons[0].endswith(
        "IF/WHILE nested 4 deep; this device runs at most 3 nested levels (limit max_nesting_depth)"
    )
    with pytest.raises(InvalidArgument, match="nested 4 deep"):
        device.prepareModel_1_3(make(4))


def test_ten_thousand_deep_excluded_operation_is_found():
    # the support rule walks all the way down (no recursion) to the excluded ADD
    from dataclasses import replace

    profile = replace(load_profile(None), name="no-add", exclude_operations=frozenset({O.ADD}))
    supported, reasons = Device(profile).explainSupportedOperations(nested_if(10_000))
    assert supported == [False]
    reason = reasons[0]
    assert reason.endswith("subgraph 10000, operation 0 (ADD): excluded by profile 'no-add'")
    # the path's two ends, not 10 000 hops (linear time and memory)
    assert reason.startswith("operation 0 (IF) -> then subgraph 1, operation 0 (IF) -> then")
    assert " -> ... (9936 more nested levels) -> " in reason
    assert len(reason) < 5000


def test_ten_thousand_deep_over_grpc(client_device):
    supported, reasons = client_device.explainSupportedOperations(nested_while(10_000))
    assert supported == [False]
    assert "(limit max_nesting_depth)" in reasons[0]
    with pytest.raises(InvalidArgument, match="nested 10000 deep"):
        client_device.prepareModel_1_3(nested_while(10_000))


def test_default_nesting_limit_runs_over_grpc(client_device):
    depth = DEFAULT_LIMITS.max_nesting_depth
    assert Device().getSupportedOperations_1_3(nested_if(depth + 1)) == [False]
    x = np.array([1.0, 2.0], np.float32)
    prepared = client_device.prepareModel_1_3(nested_if(depth))
    try:
        for deadline in (None, 2**62):  # the unchecked and the deadline-checked code
            for c in (True, False):
                out = prepared.execute([np.array([c]), x], deadline_ns=deadline).outputs
                np.testing.assert_array_equal(out[0], 2 * x)
    finally:
        prepared.release()
    prepared = client_device.prepareModel_1_3(nested_while(depth))
    try:
        out = prepared.execute([np.array([0.0], np.float32)]).outputs
        np.testing.assert_array_equal(out[0], [1.0])
    finally:
        prepared.release()


def test_executor_ceiling_runs_over_grpc():
    # the highest limit a profile may set is one the executor really runs
    with serving(device_with(max_nesting_depth=EXECUTOR_MAX_NESTING)) as (client, _):
        prepared = client.prepareModel_1_3(nested_while(EXECUTOR_MAX_NESTING))
        out = prepared.execute([np.array([0.0], np.float32)], deadline_ns=2**62).outputs
        np.testing.assert_array_equal(out[0], [1.0])


# ---------------------------------------------------------------------------
# Tensor bytes: declared, proven at compile time, computed at run time
# ---------------------------------------------------------------------------


def test_declared_tensor_too_big():
    device = device_with(max_tensor_bytes=1000)
    model = add_model(dims=(16, 16))  # 1024 bytes each
    supported, reasons = device.explainSupportedOperations(model)
    assert supported == [False]
    assert reasons[0] == (
        "operation 0 (ADD): input 0 (TENSOR_FLOAT32 [16, 16]) needs 1024 bytes; this device's "
        "tensors hold at most 1000 bytes (limit max_tensor_bytes)"
    )
    with pytest.raises(ResourceExhausted) as info:
        device.prepareModel_1_3(model)
    assert not info.value.transient
    assert info.value.status == ErrorStatus.RESOURCE_EXHAUSTED_PERSISTENT
    assert info.value.message.startswith("subgraph 0, operand 0 (TENSOR_FLOAT32 [16, 16]) needs")
    assert device.getSupportedOperations_1_3(add_model(dims=(15, 16))) == [True]


def test_preparation_refuses_by_declared_size_before_support():
    # preparation checks the declared sizes first, then asks support without the size
    # rule (it could refuse nothing then): the model that fails the rule never gets there
    device = device_with(max_tensor_bytes=1000)
    with pytest.raises(ResourceExhausted):
        device.prepareModel_1_3(add_model(dims=(16, 16)))
    # a fresh device: prepare first, so the kept support answer is the one prepare made
    device = device_with(max_tensor_bytes=1024)
    model = add_model(dims=(16, 16))  # exactly at the limit
    device.prepareModel_1_3(model)
    assert device.getSupportedOperations_1_3(model) == [True]
    fresh = device_with(max_tensor_bytes=1024)
    assert fresh.explainSupportedOperations(model) == device.explainSupportedOperations(model)


def test_declared_tensor_too_big_over_grpc():
    with serving(device_with(max_tensor_bytes=1000)) as (client, _):
        with pytest.raises(ResourceExhausted) as info:
            client.prepareModel_1_3(add_model(dims=(16, 16)))
        assert info.value.status == ErrorStatus.RESOURCE_EXHAUSTED_PERSISTENT
        assert "(limit max_tensor_bytes)" in info.value.message
        # the V1_0-typed reply downgrades it
        from nnhal import convert_legacy as legacy
        from nnhal._proto.v1_3 import device_pb2 as dpb

        reply = client.stub.prepareModel(
            dpb.PrepareModelRequest(model=legacy.model_to_v1_0_pb(add_model(dims=(16, 16))))
        )
        assert reply.status == ErrorStatus.GENERAL_FAILURE
        assert "RESOURCE_EXHAUSTED_PERSISTENT reported as GENERAL_FAILURE" in reply.message


def tile_model(multiples_constant=None):
    """y = TILE(x, multiples); multiples a constant, or a model input (run time)."""
    mb = ModelBuilder()
    g = mb.main
    x = g.input(F32, [2, 2])
    if multiples_constant is None:
        m = g.input(I32, [2])
    else:
        m = g.constant(I32, multiples_constant)
    y = g.output(F32, [0, 0])
    g.operation(O.TILE, [x, m], [y])
    return mb.build()


def test_proven_result_too_big_fails_prepare():
    device = device_with(max_tensor_bytes=4096)
    with pytest.raises(ResourceExhausted) as info:
        device.prepareModel_1_3(tile_model([64, 8]))  # 128 x 16 floats = 8192 bytes
    assert not info.value.transient
    assert info.value.message == (
        "TILE (subgraph 0, operation 0): output 0 (operand 2) (TENSOR_FLOAT32 [128, 16]) needs "
        "8192 bytes; this device's tensors hold at most 4096 bytes (limit max_tensor_bytes)"
    )
    device.prepareModel_1_3(tile_model([32, 8]))  # 4096 bytes: fits


def test_runtime_tile_is_stopped_before_the_kernel(client_device):
    # default limits: 2x2 floats tiled 10^5 x 10^5 times would be 160 GB
    prepared = client_device.prepareModel_1_3(tile_model())
    try:
        x = np.ones((2, 2), np.float32)
        huge = np.array([100_000, 100_000], np.int32)
        with pytest.raises(ResourceExhausted) as info:
            prepared.execute([x, huge], output_shapes=[[2, 2]])
        # PERSISTENT with the limit's name: the guard, not a MemoryError (TRANSIENT)
        assert info.value.status == ErrorStatus.RESOURCE_EXHAUSTED_PERSISTENT
        assert info.value.message.startswith("TILE (subgraph 0, operation 0): output 0")
        assert "[200000, 200000]" in info.value.message
        assert "(limit max_tensor_bytes)" in info.value.message
        out = prepared.execute([x, np.array([2, 3], np.int32)], output_shapes=[[4, 6]])
        np.testing.assert_array_equal(out.outputs[0], np.ones((4, 6), np.float32))
        # the guard remembers safe parameters, never unsafe ones: same shapes, new values
        with pytest.raises(ResourceExhausted, match=r"\[200000, 200000\]"):
            prepared.execute([x, huge], output_shapes=[[2, 2]])
    finally:
        prepared.release()


def broadcast_model():
    """y = a + b with shapes only known at run time ([N, 1] + [1, N] is N x N)."""
    mb = ModelBuilder()
    g = mb.main
    a = g.input(F32, [0, 0])
    b = g.input(F32, [0, 0])
    y = g.output(F32, [0, 0])
    g.operation(O.ADD, [a, b, g.constant(INT32, 0)], [y])
    return mb.build()


def pad_model():
    mb = ModelBuilder()
    g = mb.main
    x = g.input(F32, [2])
    p = g.input(I32, [1, 2])
    y = g.output(F32, [0])
    g.operation(O.PAD, [x, p], [y])
    return mb.build()


def resize_model():
    mb = ModelBuilder()
    g = mb.main
    x = g.input(F32, [1, 2, 2, 1])
    w = g.input(INT32)
    h = g.input(INT32)
    y = g.output(F32, [0, 0, 0, 0])
    g.operation(O.RESIZE_BILINEAR, [x, w, h], [y])
    return mb.build()


def test_runtime_broadcast_pad_resize_are_stopped():
    device = device_with(max_tensor_bytes=1 << 20)
    with serving(device) as (client, _):
        cases = [
            (
                broadcast_model(),
                [np.ones((1024, 1), np.float32), np.ones((1, 1024), np.float32)],
                "ADD (subgraph 0, operation 0): output 0 (operand 2) (TENSOR_FLOAT32 [1024, 1024])",
                [1, 1],
            ),
            (
                pad_model(),
                [np.ones(2, np.float32), np.array([[0, 1 << 20]], np.int32)],
                "PAD (subgraph 0, operation 0): output 0 (operand 2) (TENSOR_FLOAT32 [1048578])",
                [1],
            ),
            (
                resize_model(),
                [np.ones((1, 2, 2, 1), np.float32), np.int32(1024), np.int32(1024)],
                (
                    "RESIZE_BILINEAR (subgraph 0, operation 0): output 0 (operand 3) "
                    "(TENSOR_FLOAT32 [1, 1024, 1024, 1])"
                ),
                [1, 1, 1, 1],
            ),
        ]
        for model, inputs, start, shape in cases:
            prepared = client.prepareModel_1_3(model)
            with pytest.raises(ResourceExhausted) as info:
                prepared.execute(inputs, output_shapes=[shape])
            assert info.value.status == ErrorStatus.RESOURCE_EXHAUSTED_PERSISTENT
            assert info.value.message.startswith(start), info.value.message
            assert info.value.message.endswith("(limit max_tensor_bytes)")
            prepared.release()


def test_request_input_too_big():
    mb = ModelBuilder()
    g = mb.main
    x = g.input(F32, [0])
    y = g.output(F32, [0])
    g.operation(O.ADD, [x, x, g.constant(INT32, 0)], [y])
    with serving(device_with(max_tensor_bytes=400)) as (client, _):
        prepared = client.prepareModel_1_3(mb.build())
        out = prepared.execute([np.ones(100, np.float32)], output_shapes=[[100]])
        np.testing.assert_array_equal(out.outputs[0], np.full(100, 2, np.float32))
        with pytest.raises(ResourceExhausted) as info:
            prepared.execute([np.ones(101, np.float32)], output_shapes=[[101]])
        assert info.value.status == ErrorStatus.RESOURCE_EXHAUSTED_PERSISTENT
        assert info.value.message == (
            "input 0 (operand 0, TENSOR_FLOAT32) (TENSOR_FLOAT32 [101]) needs 404 bytes; this "
            "device's tensors hold at most 400 bytes (limit max_tensor_bytes)"
        )


def test_memory_error_is_transient(monkeypatch):
    """A kernel that runs out of memory: RESOURCE_EXHAUSTED_TRANSIENT, not a crash."""
    from nnhal.driver.executor import compiler

    real = compiler.lookup(O.ADD)

    def kernel(a, b):
        raise MemoryError("cannot allocate 8 GiB")

    oom = dataclasses.replace(real, execute=lambda ctx: kernel)
    monkeypatch.setattr(compiler, "lookup", lambda code: oom if code == O.ADD else real)
    compiled = compile_model(add_model(), max_tensor_bytes=1 << 20)
    with pytest.raises(ResourceExhausted) as info:
        compiled.run([np.ones(2, np.float32)])
    assert info.value.transient
    assert (
        info.value.message == "ADD (subgraph 0, operation 0): out of memory: cannot allocate 8 GiB"
    )


def test_no_limit_means_no_guard_code():
    # the executor used directly (no device) generates no size checks at all
    assert "_nb(" not in compile_model(tile_model()).source()
    assert "_nb(" in compile_model(tile_model(), max_tensor_bytes=1 << 20).source()
    # proven steps carry no run-time check even with a limit
    assert "_nb(" not in compile_model(tile_model([2, 2]), max_tensor_bytes=1 << 20).source()


def test_bool_and_int_inputs_are_fine_for_the_guard():
    # a guarded step whose inputs include a BOOL8 tensor and scalars must still run
    mb = ModelBuilder()
    g = mb.main
    c = g.input(BOOL8, [0])
    a = g.input(F32, [0])
    b = g.input(F32, [0])
    y = g.output(F32, [0])
    g.operation(O.SELECT, [c, a, b], [y])
    compiled = compile_model(mb.build(), max_tensor_bytes=64)
    out = compiled.run([np.array([True, False]), np.ones(2, np.float32), np.zeros(2, np.float32)])
    np.testing.assert_array_equal(out[0], [1.0, 0.0])
    with pytest.raises(ResourceExhausted, match="SELECT .* needs 68 bytes"):
        compiled.run([np.ones(17, bool), np.ones(17, np.float32), np.zeros(17, np.float32)])
