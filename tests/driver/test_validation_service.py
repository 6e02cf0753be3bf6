"""Every VTS model mutation (nnhal.cts.mutations) is INVALID_ARGUMENT, on the device and over gRPC.

As VTS ValidateModel does (hal13.md §5.4): for each mutated model,
``getSupportedOperations_1_3`` and ``prepareModel_1_3`` must both fail with
INVALID_ARGUMENT; the invalid preference / priority values only go to
``prepareModel_1_3``. Here the device's registry-based operation validator
is in play, so the mutations that stay structurally valid (an operand switched
to another valid type, an operation input removed or added) are caught too.
Fixtures from tests/conftest.py: ``driver_device`` (in-process), and
``server_address`` / ``client_device`` (through the gRPC service; the tests
check that the server still answers afterwards).
"""

from __future__ import annotations

import pytest
from nnhal.cts.mutations import model_mutations, preference_mutations, priority_mutations
from validation_models import add_model, if_model, while_model

from nnhal.errors import HalError, InvalidArgument
from nnhal.types import DeviceStatus, ExecutionPreference, Model, Priority

MODELS = {"add": add_model, "while": while_model, "if": if_model}


def _expect_rejected(description: str, method, *args) -> None:
    try:
        method(*args)
    except InvalidArgument:
        return
    except HalError as error:
        pytest.fail(f"{description}: expected INVALID_ARGUMENT, got {error}")
    pytest.fail(f"{description}: accepted")


def _check_all_mutations(device, model: Model) -> int:
    count = 0
    for description, mutated in model_mutations(model):
        _expect_rejected(description, device.getSupportedOperations_1_3, mutated)
        _expect_rejected(description, device.prepareModel_1_3, mutated)
        count += 1
    medium, fast = Priority.MEDIUM, ExecutionPreference.FAST_SINGLE_ANSWER
    for description, preference in preference_mutations:
        _expect_rejected(description, device.prepareModel_1_3, model, preference, medium)
    for description, priority in priority_mutations:
        _expect_rejected(description, device.prepareModel_1_3, model, fast, priority)
    return count


@pytest.mark.parametrize("name", MODELS)
def test_valid_models_are_fully_supported(driver_device, name):
    model = MODELS[name]()
    supported = driver_device.getSupportedOperations_1_3(model)
    assert supported == [True] * len(model.main.operations)


@pytest.mark.parametrize("name", MODELS)
def test_every_mutation_rejected_by_the_device(driver_device, name):
    assert _check_all_mutations(driver_device, MODELS[name]()) > 100


@pytest.mark.parametrize("name", MODELS)
def test_every_mutation_rejected_over_grpc(client_device, name):
    model = MODELS[name]()
    assert _check_all_mutations(client_device, model) > 100
    # the server survived all of that and still answers
    assert client_device.getStatus() == DeviceStatus.AVAILABLE
    assert client_device.getSupportedOperations_1_3(model) == [True] * len(model.main.operations)


def test_server_address_fixture_is_usable(server_address, client_device):
    # the VTS CycleTest model through the wire: INVALID_ARGUMENT, not a transport error
    from validation_models import with_operation

    bad = with_operation(add_model(), 0, 0, inputs=(0, 3, 2))  # reads its own output
    with pytest.raises(InvalidArgument, match="before any operation writes it"):
        client_device.getSupportedOperations_1_3(bad)
    assert ":" in server_address
    assert client_device.getVersionString()


def _concatenation_model() -> Model:
    """y = CONCATENATION(a, b, c, axis 0): dropping a tensor input leaves a legal operation."""
    from nnhal.builder import ModelBuilder
    from nnhal.types import OperandType, OperationType

    mb = ModelBuilder()
    g = mb.main
    parts = [g.input(OperandType.TENSOR_FLOAT32, [2]) for _ in range(3)]
    y = g.output(OperandType.TENSOR_FLOAT32, [6])
    g.operation(OperationType.CONCATENATION, [*parts, g.constant(OperandType.INT32, 0)], [y])
    return mb.build()


def test_every_mutation_of_a_variadic_operation_is_invalid(driver_device):
    """removeOperand / removeOperationInput skip inputs whose shorter form is legal."""
    model = _concatenation_model()
    assert driver_device.getSupportedOperations_1_3(model) == [True]
    descriptions = [d for d, _ in model_mutations(model)]
    assert not any(d.startswith("removeOperandTest: operand 0") for d in descriptions)
    assert _check_all_mutations(driver_device, model) > 50
