"""Generated functions delete an operand after the last step that mentions it
(``executor.release``): the same results, outputs and loop values kept, freed
arrays really freed."""

from __future__ import annotations

import re
import weakref
from dataclasses import replace

import numpy as np
import pytest
from nnhal.driver.executor import codegen, compile_model
from nnhal.driver.executor.model import CompiledModel
from nnhal.driver.executor.release import release_dead
from test_codegen_chunks import _dag_model

from nnhal.builder import ModelBuilder
from nnhal.types import OperandType, OperationType

T = OperandType
O = OperationType
F32 = T.TENSOR_FLOAT32


def _chain(n: int):
    """x -> n ADDs of a constant -> output: each intermediate read by the next step only."""
    mb = ModelBuilder()
    g = mb.main
    cur = g.input(F32, [4])
    for k in range(n):
        out = g.output(F32, [4]) if k == n - 1 else g.temporary(F32, [4])
        g.operation(
            O.ADD, [cur, g.constant(F32, np.full(4, k, np.float32)), g.constant(T.INT32, 0)], [out]
        )
        cur = out
    return mb.build()


def test_each_intermediate_is_deleted_after_its_last_reader():
    compiled = compile_model(_chain(4))
    lines = [line.strip() for line in compiled.source(0).splitlines()]
    # three intermediates; the input is the caller's and the output is returned
    deleted = [line for line in lines if line.startswith("del ")]
    assert len(deleted) == 3
    for line in deleted:
        name = line.split()[1]
        later = "\n".join(lines[lines.index(line) + 1 :])
        assert re.search(rf"\b{name}\b", later) is None
    out = compiled.run([np.zeros(4, np.float32)])[0]
    np.testing.assert_array_equal(out, np.full(4, 6, np.float32))


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("chunk", [None, 3])
def test_random_graphs_compute_the_same_with_outputs_read_late(seed, chunk, monkeypatch):
    """Values read again much later and outputs computed early survive their deletion
    points, in one function and in chunks."""
    model = _dag_model(seed, 40)
    rng = np.random.default_rng(seed + 10)
    xs = [rng.uniform(-1, 1, 3).astype(np.float32) for _ in range(3)]
    monkeypatch.setattr(codegen, "release_dead", lambda *a: None)
    kept = compile_model(model).run([x.copy() for x in xs])
    monkeypatch.undo()
    if chunk is not None:
        monkeypatch.setattr(codegen, "CHUNK_STEPS", chunk)
    compiled = compile_model(model)
    assert "del " in compiled.source(0)
    got = compiled.run([x.copy() for x in xs])
    assert len(got) == len(kept)
    for a, b in zip(got, kept):
        np.testing.assert_array_equal(a, b)


def test_only_top_level_assignments_are_released():
    """A name assigned in a loop or branch may be unbound; an output is returned."""
    lines = [
        "v1 = k(v0)",
        "while c(v1):",
        "    v2 = k(v1)",
        "v3 = k(v1)",
        "v4 = k(v3)",
    ]
    locations = ["a", "b", "b", "c", "d"]
    release_dead(lines, locations, [0, 1, 3, 4], {"v4"})
    assert lines == [
        "v1 = k(v0)",
        "while c(v1):",
        "    v2 = k(v1)",
        "v3 = k(v1)",
        "del v1",
        "v4 = k(v3)",
        "del v3",
    ]
    assert locations == ["a", "b", "b", "c", "c", "d", "d"]


def test_a_dead_intermediate_is_freed_before_the_run_ends():
    """The second step's input is gone (no reference left) while the third runs."""
    seen: list[bool] = []
    model = _chain(3)
    compiled = compile_model(model, specialize=False)
    plan = compiled.plans[0]
    first, _, third = plan.steps
    refs = []

    def record_first(*args, _k=first.kernel):
        out = _k(*args)
        refs.append(weakref.ref(out))
        return out

    def check_third(*args, _k=third.kernel):
        seen.append(refs[0]() is None)
        return _k(*args)

    steps = [replace(first, kernel=record_first), plan.steps[1], replace(third, kernel=check_third)]
    timed = CompiledModel(compiled.model, {0: replace(plan, steps=steps)}, specialize=False)
    timed.run([np.zeros(4, np.float32)])
    assert seen == [True]
