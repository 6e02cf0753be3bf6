"""Check results kept per device under a key covering the whole model (driver/analysis_cache.py)."""

from __future__ import annotations

import dataclasses
import time

import numpy as np
import pytest
from nnhal.driver import analysis_cache
from nnhal.driver import device as device_module
from nnhal.driver.analysis_cache import model_key
from nnhal.driver.backends.reference import ReferenceBackend
from nnhal.driver.device import Device
from nnhal.driver.executor import code_cache
from nnhal.driver.executor.shapes import prove_shapes
from nnhal.driver.ops import registry

from nnhal.builder import ModelBuilder
from nnhal.errors import InvalidArgument
from nnhal.types import OperandType as T
from nnhal.types import OperationType as O
from nnhal.types import Subgraph

F32 = T.TENSOR_FLOAT32


def _add_model(addend: float = 1.0, activation: int = 0):
    """y = x + [addend, addend] with the given fused activation."""
    mb = ModelBuilder()
    g = mb.main
    x = g.input(F32, [2])
    y = g.output(F32, [2])
    g.operation(O.ADD, [x, g.constant(F32, [addend, addend]), g.constant(T.INT32, activation)], [y])
    return mb.build()


@pytest.fixture
def validations(monkeypatch):
    """Counts the structural validations the device runs."""
    calls = []
    real = device_module.validate_model

    def counting(model, **kwargs):
        calls.append(model)
        return real(model, **kwargs)

    monkeypatch.setattr(device_module, "validate_model", counting)
    return calls


def _run(prepared, values):
    return prepared.compiled.run([np.array(values, np.float32)])[0]


def test_an_identical_model_is_not_checked_again_and_runs_on_its_own_constants(validations):
    device = Device()
    first = device.prepareModel_1_3(_add_model(2.0))
    again = device.prepareModel_1_3(_add_model(2.0))  # another object, the same content
    assert len(validations) == 1 and len(device.analyses) == 1
    assert again.compiled is not first.compiled
    np.testing.assert_array_equal(_run(again, [1.0, -1.0]), [3.0, 1.0])
    assert device.getSupportedOperations_1_3(_add_model(2.0)) == [True]
    assert len(validations) == 1


def test_other_constants_are_checked_again(validations):
    device = Device()
    device.prepareModel_1_3(_add_model(2.0, activation=0))
    other = device.prepareModel_1_3(_add_model(5.0, activation=0))
    assert len(validations) == 2
    np.testing.assert_array_equal(_run(other, [1.0, -1.0]), [6.0, 4.0])
    # the same structure with an invalid activation code is refused, not taken from the cache
    with pytest.raises(InvalidArgument, match="activation"):
        device.prepareModel_1_3(_add_model(5.0, activation=9))
    assert len(validations) == 3


def _sub_model():
    """y = x - [1, 1]: the outline of ``_add_model`` (counts and data sizes), not its key."""
    mb = ModelBuilder()
    g = mb.main
    x = g.input(F32, [2])
    y = g.output(F32, [2])
    g.operation(O.SUB, [x, g.constant(F32, [1.0, 1.0]), g.constant(T.INT32, 0)], [y])
    return mb.build()


@pytest.fixture
def keys_made(monkeypatch):
    """Counts the exact keys the cache makes (``model_key``)."""
    calls = []
    real = analysis_cache.model_key

    def counting(model, *args):
        calls.append(model)
        return real(model, *args)

    monkeypatch.setattr(analysis_cache, "model_key", counting)
    return calls


def test_a_model_prepared_once_makes_no_exact_key(validations, keys_made):
    device = Device()
    device.prepareModel_1_3(_add_model(2.0))
    assert keys_made == [] and len(device.analyses) == 1
    device.prepareModel_1_3(_add_model(2.0))  # an entry of its outline: both keys made
    assert len(keys_made) == 2 and len(validations) == 1
    device.prepareModel_1_3(_add_model(2.0))  # the entry's key is kept
    assert len(keys_made) == 3 and len(validations) == 1


def test_models_of_one_outline_are_told_apart_by_their_keys(validations):
    device = Device()
    add, sub = _add_model(1.0), _sub_model()
    assert analysis_cache.model_outline(add, 3) == analysis_cache.model_outline(sub, 3)
    assert model_key(add, 3) != model_key(sub, 3)
    device.prepareModel_1_3(add)
    subtracted = device.prepareModel_1_3(sub)  # not the ADD's entry
    assert len(validations) == 2 and len(device.analyses) == 2
    np.testing.assert_array_equal(_run(subtracted, [1.0, -1.0]), [0.0, -2.0])
    device.prepareModel_1_3(_add_model(1.0))
    device.prepareModel_1_3(_sub_model())
    assert len(validations) == 2
    # the same structure with other constants: checked, and it replaces the entry of its key
    device.prepareModel_1_3(_add_model(7.0))
    assert len(validations) == 3 and len(device.analyses) == 2
    device.prepareModel_1_3(_add_model(1.0))
    assert len(validations) == 4


def test_an_entry_replaced_by_its_key_leaves_the_new_one_found_and_dropped_cleanly(
    validations, monkeypatch
):
    # other constants under the same key replace the only entry of their outline; the new
    # entry must then be found, and dropped without a trace when the cache is full
    device = Device()
    device.prepareModel_1_3(_add_model(1.0))
    device.prepareModel_1_3(_add_model(2.0))  # replaces the entry of 1.0
    device.prepareModel_1_3(_add_model(2.0))  # found
    assert len(validations) == 2 and len(device.analyses) == 1
    monkeypatch.setattr(analysis_cache, "MAX_ENTRIES", 2)
    for addend in (3.0, 4.0, 5.0, 3.0, 6.0):  # each replaces or evicts the one before
        device.prepareModel_1_3(_sub_model())
        device.prepareModel_1_3(_add_model(addend))
    assert len(device.analyses) == 2
    cache = device.analyses
    assert sorted(n for numbers in cache._outlines.values() for n in numbers) == sorted(
        cache._entries
    )
    assert cache.drop_owner(None) == 2 and len(cache) == 0 and not cache._outlines


def test_a_refused_model_is_not_kept(validations):
    device = Device()
    for _ in range(2):
        with pytest.raises(InvalidArgument):
            device.prepareModel_1_3(_add_model(1.0, activation=9))
    assert len(validations) == 2 and len(device.analyses) == 0


def _with_operand(model, index: int, **changes):
    main = model.main
    operands = list(main.operands)
    operands[index] = dataclasses.replace(operands[index], **changes)
    return dataclasses.replace(model, main=dataclasses.replace(main, operands=tuple(operands)))


def test_fields_that_only_compare_equal_give_another_key_or_none():
    model = _add_model()
    key = model_key(model, 3)
    assert key is not None and key == model_key(_add_model(), 3)
    assert model_key(model, 2) != key  # the HAL version the model was given as
    assert model_key(_with_operand(model, 0, scale=-0.0), 3) != key  # -0.0 == 0.0
    assert model_key(_with_operand(model, 0, zeroPoint=False), 3) != key  # False == 0
    assert model_key(_with_operand(model, 0, zeroPoint=np.int32(0)), 3) != key
    assert model_key(_with_operand(model, 0, zeroPoint=np.int32(0)), 3) != model_key(
        _with_operand(model, 0, zeroPoint=np.float32(0)), 3
    )
    assert model_key(_with_operand(model, 0, lifetime=0), 3) is None  # not the enum
    first = model.main.operations[0]
    moved = dataclasses.replace(first, inputs=(0.0, *first.inputs[1:]))
    odd = dataclasses.replace(model, main=dataclasses.replace(model.main, operations=(moved,)))
    assert model_key(odd, 3) != key  # 0.0 == 0, but validation refuses a float index


def test_operands_of_one_subgraph_are_not_confused_with_the_next():
    model = _add_model()
    empty = Subgraph(operands=(), operations=(), inputIndexes=(), outputIndexes=())
    assert model_key(dataclasses.replace(model, referenced=(empty,)), 3) != model_key(model, 3)


def test_an_entry_whose_definition_left_the_registry_is_dropped(validations, monkeypatch):
    device = Device()
    device.prepareModel_1_3(_add_model())
    add = registry.lookup(O.ADD)
    monkeypatch.setitem(registry._REGISTRY, O.ADD, dataclasses.replace(add))
    device.prepareModel_1_3(_add_model())
    assert len(validations) == 2


def test_kept_shape_proofs_are_the_ones_proven(monkeypatch):
    device = Device()
    first = device.prepareModel_1_3(_add_model())
    again = device.prepareModel_1_3(_add_model())
    fresh = prove_shapes(again.compiled.plans, device.limits.max_tensor_bytes)
    assert again.compiled.proofs is first.compiled.proofs and fresh == first.compiled.proofs
    monkeypatch.setenv("NNHAL_STRICT_SHAPES", "1")  # another key: proven again, nothing
    strict = device.prepareModel_1_3(_add_model())
    assert strict.compiled.proofs == {}
    assert all(not s.proven for p in strict.compiled.plans.values() for s in p.steps)


def test_only_the_builtin_configuration_keeps_results(monkeypatch):
    class Backend(ReferenceBackend):
        pass

    assert Device(backend=Backend()).analyses is None
    monkeypatch.setattr(analysis_cache, "MAX_MODEL_BYTES", 4)
    device = Device()
    device.prepareModel_1_3(_add_model())  # 8 bytes of constants
    assert len(device.analyses) == 0


def _bound_ids(function) -> set[int]:
    """The objects a generated function's names are bound to (in its own namespace)."""
    names = set(function.__code__.co_names)
    return {id(value) for name, value in function.__globals__.items() if name in names}


@pytest.mark.parametrize("name", ["greedy", "parity"])
def test_generated_functions_are_rebuilt_with_the_new_models_own_values(name):
    from nnhal.tools.bench_workloads import suite

    workload = suite([name])[0]
    device = Device()
    first = device.prepareModel_1_3(workload.model)
    again = device.prepareModel_1_3(suite([name])[0].model)  # decoded anew: other objects
    assert len(device.analyses) == 1
    for checked in (False, True):  # the deadline variant is generated on demand
        assert again.compiled.source(checked=checked) == first.compiled.source(checked=checked)
    cells = _bound_ids(again.compiled._generated(False))
    own = {id(v) for p in again.compiled.plans.values() for v in p.constants.values()}
    theirs = {id(v) for p in first.compiled.plans.values() for v in p.constants.values()}
    assert cells & own and not cells & theirs
    inputs = workload.inputs(workload.trips[0])
    expected = workload.numpy(inputs)
    for deadline in (None, 2**62):
        outputs = again.compiled.run(inputs, deadline_ns=deadline)
        for got, want in zip(outputs, expected):
            np.testing.assert_allclose(got, want, rtol=workload.rtol, atol=workload.atol)


@pytest.mark.usefixtures("generated_executor")
def test_a_recipe_naming_an_unknown_value_is_generated_again(validations):
    device = Device()
    device.prepareModel_1_3(_add_model())
    (kept,) = device.analyses._entries.values()
    (recipes,) = kept.recipes.values()
    (variant,) = recipes.values()
    text, names, locations = variant[0]
    variant[0] = (text.replace("try:", "try:\n        zz9", 1), ("zz9", *names), locations)
    same = device.prepareModel_1_3(_add_model())  # a hit, but the recipe is not usable
    assert len(validations) == 1
    np.testing.assert_array_equal(_run(same, [1.0, 2.0]), [2.0, 3.0])
    assert "zz9" not in same.compiled.source()
    assert "zz9" not in variant[0][0]  # replaced by the one generated again


def test_a_device_given_other_limits_checks_again(validations):
    device = Device()
    device.prepareModel_1_3(_add_model())
    device.limits = dataclasses.replace(device.limits)
    device.prepareModel_1_3(_add_model())
    assert len(validations) == 2


def test_an_entry_is_dropped_when_the_registry_gains_a_definition(validations, monkeypatch):
    device = Device()
    device.prepareModel_1_3(_add_model())
    (kept,) = device.analyses._entries.values()
    assert kept.definitions == {O.ADD: registry.lookup(O.ADD)}
    kept.definitions[O.OEM_OPERATION] = None  # as if the model also had one
    monkeypatch.setitem(registry._REGISTRY, O.OEM_OPERATION, registry.lookup(O.ADD))
    device.prepareModel_1_3(_add_model())
    assert len(validations) == 2


@pytest.mark.usefixtures("generated_executor")
def test_entries_serve_only_the_client_that_made_them(validations):
    """Over gRPC each client has entries of its own: another client's identical model is
    checked afresh (its preparation time tells nothing of what others prepared)."""
    from nnhal.driver.service import create_server

    from nnhal.client import connect

    device = Device()
    server, address = create_server(device, "127.0.0.1:0")
    first, second = connect(address, timeout=10.0), connect(address, timeout=10.0)
    try:
        first.prepareModel_1_3(_add_model(2.0)).release()
        first.prepareModel_1_3(_add_model(2.0)).release()
        assert len(validations) == 1 and len(device.analyses) == 1
        prepared = second.prepareModel_1_3(_add_model(2.0))
        assert len(validations) == 2 and len(device.analyses) == 2
        out = prepared.execute([np.array([1.0, -1.0], np.float32)])
        np.testing.assert_array_equal(out.outputs[0], [3.0, 1.0])
        prepared.release()
        # support questions are answered from the asking client's own entry too
        assert second.getSupportedOperations_1_3(_add_model(2.0)) == [True]
        assert len(validations) == 2
        # a client's end (its session released) takes its entries and compiled code along
        owner = f"session:{first.session.id}"
        texts = [key for key in code_cache._codes if key[0] == owner]
        assert texts
        first.close()
        deadline = time.monotonic() + 60
        while len(device.analyses) != 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(device.analyses) == 1
        assert not [key for key in code_cache._codes if key[0] == owner]
    finally:
        first.close()
        second.close()
        server.stop(None).wait()
