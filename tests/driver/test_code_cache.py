"""The process-wide cache of compiled generated code (driver/executor/code_cache.py)."""

from __future__ import annotations

import numpy as np
import pytest
from nnhal.driver.executor import code_cache, compile_model

from nnhal.builder import ModelBuilder
from nnhal.types import OperandType as T
from nnhal.types import OperationType as O

F32 = T.TENSOR_FLOAT32

pytestmark = pytest.mark.usefixtures("generated_executor")  # compiled at compile time


def _scale_model(factor: float, op: O = O.MUL, times: int = 1):
    """y = x OP [factor, factor], ``times`` over: the same text for every factor and op."""
    mb = ModelBuilder()
    g = mb.main
    x = g.input(F32, [2])
    for k in range(times):
        y = g.output(F32, [2]) if k == times - 1 else g.temporary(F32, [2])
        g.operation(op, [x, g.constant(F32, [factor, factor]), g.constant(T.INT32, 0)], [y])
        x = y
    return mb.build()


@pytest.fixture
def compiles(monkeypatch):
    """Counts the real compilations the cache makes, starting from an empty cache."""
    calls = []
    real = compile

    def counting(text, filename, mode):
        calls.append(text)
        return real(text, filename, mode)

    code_cache.clear()
    monkeypatch.setattr(code_cache, "compile", counting, raising=False)
    yield calls
    code_cache.clear()


def test_the_same_text_compiles_once_and_binds_its_own_values(compiles):
    x = np.array([1.0, -2.0], np.float32)
    twice, thrice = compile_model(_scale_model(2.0)), compile_model(_scale_model(3.0))
    assert len(compiles) == 1 and code_cache.cached(twice.source())
    assert twice.source() == thrice.source()
    np.testing.assert_array_equal(twice.run([x])[0], [2.0, -4.0])
    np.testing.assert_array_equal(thrice.run([x])[0], [3.0, -6.0])


def test_another_text_is_compiled_not_taken_from_the_cache(compiles):
    x = np.array([1.0, -2.0], np.float32)
    total = compile_model(_scale_model(2.0, O.ADD))  # the kernel is bound, not in the text
    np.testing.assert_array_equal(total.run([x])[0], [3.0, 0.0])
    assert len(compiles) == 1
    twice = compile_model(_scale_model(2.0, O.ADD, times=2))
    assert len(compiles) == 2 and twice.source() != total.source()
    np.testing.assert_array_equal(twice.run([x])[0], [5.0, 2.0])


def test_long_texts_are_not_kept_and_the_bounds_evict_the_oldest(compiles, monkeypatch):
    monkeypatch.setattr(code_cache, "MAX_TEXT", 10)
    compile_model(_scale_model(2.0))
    compile_model(_scale_model(2.0))
    assert len(compiles) == 2  # each compiled: too long to keep
    monkeypatch.setattr(code_cache, "MAX_TEXT", 10**6)
    monkeypatch.setattr(code_cache, "MAX_ENTRIES", 1)
    first = code_cache.compile_source("a = 1", "<a>")
    code_cache.compile_source("b = 2", "<b>")
    assert not code_cache.cached("a = 1") and code_cache.cached("b = 2")
    assert code_cache.compile_source("a = 1", "<a>") is not first


def test_each_owner_has_entries_of_its_own(compiles):
    """A text another client compiled is compiled again for this one (no timing tells a
    client what others prepared); the same client finds its own entry."""
    mine = code_cache.set_owner("session:a")
    try:
        code = code_cache.compile_source("a = 1", "<a>")
        assert code_cache.compile_source("a = 1", "<a>") is code
    finally:
        code_cache.reset_owner(mine)
    assert len(compiles) == 1 and not code_cache.cached("a = 1")
    theirs = code_cache.set_owner("session:b")
    try:
        assert code_cache.owner() == "session:b"
        assert code_cache.compile_source("a = 1", "<a>") is not code
        assert len(compiles) == 2 and code_cache.cached("a = 1")
    finally:
        code_cache.reset_owner(theirs)
    assert code_cache.owner() is None
