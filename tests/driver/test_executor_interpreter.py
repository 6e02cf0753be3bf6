"""The plan interpreter (driver/executor/interpreter.py) and the executor setting.

The semantic tests of control flow, errors, deadlines and limits run with both
executors (``each_executor`` in test_control_flow.py, test_executor.py and
test_limits.py); the whole vector corpus runs interpreted in-process and
generated against ``nnhal serve`` (tests/tools/test_vectors.py). Here: the
tiers, the setting, results equal to the generated code's bit for bit, and
temporaries released after their last reader.
"""

from __future__ import annotations

import logging
import threading
import weakref

import numpy as np
import pytest
from nnhal.driver.device import Device
from nnhal.driver.executor import code_cache, codegen, compile_model
from nnhal.driver.executor.model import EXECUTOR_ENV
from repo_paths import REPO_ROOT

from nnhal.builder import ModelBuilder
from nnhal.errors import GeneralFailure, HalError
from nnhal.types import OperandType as T
from nnhal.types import OperationType as O

F32 = T.TENSOR_FLOAT32
WORKLOADS = ["fibonacci", "nested", "parity", "rnn", "lstm-decode", "greedy"]


def _chain_model(length: int = 4):
    """y = x + 1 + 1 ... (``length`` ADDs through temporaries)."""
    mb = ModelBuilder()
    g = mb.main
    x = g.input(F32, [3])
    one = g.constant(F32, [1.0, 1.0, 1.0])
    for k in range(length):
        y = g.output(F32, [3]) if k == length - 1 else g.temporary(F32, [3])
        g.operation(O.ADD, [x, one, g.constant(T.INT32, 0)], [y])
        x = y
    return mb.build()


@pytest.fixture
def compiles(monkeypatch):
    """The generated texts compiled from now on (the code cache emptied first)."""
    texts: list[str] = []
    real = code_cache.compile_source

    def counting(text, filename, owner=code_cache.CURRENT):
        texts.append(text)
        return real(text, filename, owner)

    code_cache.clear()
    monkeypatch.setattr(codegen, "compile_source", counting)
    yield texts
    code_cache.clear()


def _workload(name: str):
    from nnhal.tools.bench_workloads import suite

    return suite([name])[0]


def test_tiered_interprets_the_first_execution_and_generates_from_the_second(compiles):
    x = np.array([1.0, 2.0, 3.0], np.float32)
    compiled = compile_model(_chain_model(), executor="tiered")
    assert compiles == []  # nothing generated at compile time
    np.testing.assert_array_equal(compiled.run([x])[0], x + 4)
    assert compiles == [] and compiled.executions == 1
    np.testing.assert_array_equal(compiled.run([x])[0], x + 4)
    assert len(compiles) == 1 and "def subgraph_0(" in compiles[0]
    np.testing.assert_array_equal(compiled.run([x])[0], x + 4)
    assert len(compiles) == 1  # the generated function runs from now on
    # the variant with deadline tests is generated when first asked for
    np.testing.assert_array_equal(compiled.run([x], deadline_ns=2**62)[0], x + 4)
    assert len(compiles) == 2 and "_dl[0]" in compiles[1]


def test_a_first_execution_with_a_deadline_is_interpreted_too(compiles):
    x = np.array([1.0, 2.0, 3.0], np.float32)
    compiled = compile_model(_chain_model(), executor="tiered")
    np.testing.assert_array_equal(compiled.run([x], deadline_ns=2**62)[0], x + 4)
    assert compiles == []


def test_interpreted_never_generates_and_generated_generates_at_compile_time(compiles):
    x = np.array([1.0, 2.0, 3.0], np.float32)
    interpreted = compile_model(_chain_model(), executor="interpreted")
    for deadline in (None, 2**62, None):
        np.testing.assert_array_equal(interpreted.run([x], deadline_ns=deadline)[0], x + 4)
    assert compiles == []
    compile_model(_chain_model(3), executor="generated")
    assert len(compiles) == 1


def test_the_environment_sets_the_executor_and_a_bad_value_is_refused(monkeypatch, compiles):
    monkeypatch.setenv(EXECUTOR_ENV, "interpreted")
    assert compile_model(_chain_model()).executor == "interpreted"
    monkeypatch.setenv(EXECUTOR_ENV, "tiered")
    assert compile_model(_chain_model()).executor == "tiered"
    monkeypatch.setenv(EXECUTOR_ENV, "jit")
    with pytest.raises(GeneralFailure, match=r"NNHAL_EXECUTOR\), got 'jit'"):
        compile_model(_chain_model())
    with pytest.raises(GeneralFailure, match="executor must be one of tiered, generated"):
        Device().prepareModel_1_3(_chain_model())
    with pytest.raises(GeneralFailure, match="got 'fast'"):
        compile_model(_chain_model(), executor="fast")


def test_serve_refuses_a_bad_executor_setting(monkeypatch, capsys):
    from nnhal.tools.cli import main

    monkeypatch.setenv(EXECUTOR_ENV, "jit")
    assert main(["serve", "--address", "127.0.0.1:0"]) == 1
    err = capsys.readouterr().err
    assert "executor must be one of tiered, generated, interpreted" in err and "'jit'" in err


def test_code_that_fails_to_generate_leaves_the_model_interpreted(monkeypatch, caplog):
    x = np.array([1.0, 2.0, 3.0], np.float32)
    compiled = compile_model(_chain_model(), executor="tiered")
    np.testing.assert_array_equal(compiled.run([x])[0], x + 4)

    def broken(self, number):
        raise RuntimeError("generator bug")

    monkeypatch.setattr(codegen.Generator, "function", broken)
    with caplog.at_level(logging.WARNING):
        np.testing.assert_array_equal(compiled.run([x])[0], x + 4)
    assert compiled.executor == "interpreted"
    assert "cannot generate code" in caplog.text and "generator bug" in caplog.text
    caplog.clear()
    np.testing.assert_array_equal(compiled.run([x], deadline_ns=2**62)[0], x + 4)
    assert "cannot generate code" not in caplog.text  # warned once, not per execution
    # generated at compile time, the same failure fails the compilation (as before)
    with pytest.raises(GeneralFailure, match="cannot generate code: RuntimeError"):
        compile_model(_chain_model(), executor="generated")


@pytest.mark.parametrize("name", WORKLOADS)
def test_bench_workloads_interpreted_equal_the_generic_generated_code(name):
    """Bit for bit against the generated code without ``specialize`` (the same kernels in
    the same order), with and without deadline tests, and near numpy's reference."""
    workload = _workload(name)
    for trips in workload.trips[:2]:
        inputs = workload.inputs(trips)
        generic = compile_model(workload.model, specialize=False, executor="generated")
        interpreted = compile_model(workload.model, executor="interpreted")
        for deadline in (None, 2**62):
            want = generic.run(inputs, deadline_ns=deadline)
            got = interpreted.run(inputs, deadline_ns=deadline)
            assert len(got) == len(want)
            for a, b in zip(got, want):
                assert a.dtype == b.dtype and a.shape == b.shape
                np.testing.assert_array_equal(a, b)
        for a, b in zip(got, workload.numpy(inputs)):
            np.testing.assert_allclose(a, b, rtol=workload.rtol, atol=workload.atol)


def _vector_sample(every: int) -> list:
    """Every ``every``-th model of the shared corpus (none when it is not there)."""
    from nnhal.vectors import find_vector_files, load_vectors

    root = REPO_ROOT.parent / "shared" / "nnapi-vectors"
    if not root.is_dir():
        return []
    tests = [test for path in find_vector_files([root]) for test in load_vectors(path)]
    return tests[::every]


def test_corpus_sample_interpreted_equals_the_generic_generated_code():
    """A tenth of the shared corpus (it has no IF or WHILE: those are above and in the
    control-flow tests): the interpreter's outputs, or its error message, are the
    generic generated code's, bit for bit."""
    tests = _vector_sample(10)
    if not tests:
        pytest.skip("shared NNAPI vectors not found")
    device = Device()
    compared = failed = 0
    for test in tests:
        try:
            device.prepareModel_1_3(test.model)
        except HalError:  # refused models (unsupported, meant to fail): not this test's
            continue
        generic = compile_model(test.model, specialize=False, executor="generated")
        interpreted = compile_model(test.model, executor="interpreted")
        try:
            want = generic.run(test.inputs)
        except HalError as exc:
            with pytest.raises(type(exc)) as info:
                interpreted.run(test.inputs)
            assert info.value.message == exc.message, test.name
            failed += 1
            continue
        got = interpreted.run(test.inputs)
        assert len(got) == len(want), test.name
        for a, b in zip(got, want):
            assert a.dtype == b.dtype, test.name
            np.testing.assert_array_equal(a, b, err_msg=test.name)
        compared += 1
    assert compared >= 500, (compared, failed)


def test_temporaries_are_released_after_their_last_reader():
    """As the generated code's ``del`` lines: an intermediate result is gone once the
    steps reading it have run, while the output stays."""
    compiled = compile_model(_chain_model(4), executor="interpreted")
    results: list[weakref.ref] = []
    alive_at: list[list[bool]] = []
    for step in compiled.plans[0].steps:
        kernel = step.kernel

        def recording(*args, _kernel=kernel):
            alive_at.append([r() is not None for r in results])
            out = _kernel(*args)
            results.append(weakref.ref(out))
            return out

        step.kernel = recording
    x = np.array([1.0, 2.0, 3.0], np.float32)
    (y,) = compiled.run([x])
    np.testing.assert_array_equal(y, x + 4)
    # step k reads result k-1 (alive); result k-2 was released after step k-1 read it
    assert alive_at == [[], [True], [False, True], [False, False, True]]


def test_concurrent_first_executions_of_a_tiered_model():
    """Threads racing through the first executions (some interpreted, one generating
    the code, the others running it) all get the right results."""
    workload = _workload("rnn")
    inputs = workload.inputs(workload.trips[0])
    want = workload.numpy(inputs)
    compiled = compile_model(workload.model, executor="tiered")
    failures: list[BaseException] = []
    barrier = threading.Barrier(6)

    def worker() -> None:
        try:
            barrier.wait(timeout=60)
            for _ in range(5):
                for a, b in zip(compiled.run(inputs), want):
                    np.testing.assert_allclose(a, b, rtol=workload.rtol, atol=workload.atol)
        except BaseException as exc:  # noqa: BLE001  (reported below)
            failures.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not failures, failures[0]
    assert compiled.executions >= 2


def test_code_generated_during_executions_is_kept_for_the_preparing_client():
    """An execution's context names no client: the main function generated at the
    second execution, the deadline variant and a counter loop's generic loop (both
    generated when first needed) are all kept for the client that prepared the model,
    never shared with another (``code_cache``)."""
    from nnhal.driver.executor.code_cache import reset_owner, set_owner

    workload = _workload("fibonacci")
    inputs = workload.inputs(workload.trips[0])
    code_cache.clear()
    try:
        token = set_owner("session:a")
        try:
            compiled = compile_model(workload.model, executor="tiered")
        finally:
            reset_owner(token)
        for deadline in (None, None, 2**62):
            compiled.run(inputs, deadline_ns=deadline)
        generic = [inputs[0], np.asarray(inputs[1], np.int64)]  # not an int32 counter
        compiled.run(generic)
        texts = [text for _, text in code_cache._codes]
        assert any("_dl[0]" in t for t in texts) and any("_generic" in t for t in texts)
        assert {owner for owner, _ in code_cache._codes} == {"session:a"}
    finally:
        code_cache.clear()
