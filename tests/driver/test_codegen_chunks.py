"""Long plans are generated as a chain of chunk functions (codegen.CHUNK_STEPS): the same
results, the same error locations, deadlines still checked before every operation."""

from __future__ import annotations

import time

import numpy as np
import pytest
from nnhal.driver.executor import codegen, compile_model

from nnhal.builder import ModelBuilder
from nnhal.errors import GeneralFailure, MissedDeadline
from nnhal.types import OperandType, OperationType

T = OperandType
O = OperationType
F32 = T.TENSOR_FLOAT32


def _dag_model(seed: int, n_ops: int):
    """Random ADD/MUL/SUB/MAXIMUM DAG reading any earlier value; three outputs, among
    them a value computed early (and possibly read again much later)."""
    rng = np.random.default_rng(seed)
    mb = ModelBuilder()
    g = mb.main
    inputs = [g.input(F32, [3]) for _ in range(3)]
    values = list(inputs)
    ops = []
    for k in range(n_ops):
        a, b = (values[int(i)] for i in rng.integers(0, len(values), 2))
        out = g.temporary(F32, [3])
        op = [O.ADD, O.MUL, O.SUB, O.MAXIMUM][k % 4]
        extra = [g.constant(T.INT32, 0)] if op in (O.ADD, O.MUL, O.SUB) else []
        ops.append((op, [a, b, *extra], out))
        values.append(out)
    outs = [values[4], values[-1], values[len(values) // 2]]
    final = []
    for op, args, out in ops:
        if out in outs:
            new = g.output(F32, [3])
            final.append((out, new))
    rename = dict(final)
    for op, args, out in ops:
        g.operation(op, [rename.get(a, a) for a in args], [rename.get(out, out)])
    return mb.build()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_chunked_functions_compute_what_one_function_computes(seed, monkeypatch):
    model = _dag_model(seed, 40)
    rng = np.random.default_rng(seed + 10)
    xs = [rng.uniform(-1, 1, 3).astype(np.float32) for _ in range(3)]
    whole = compile_model(model).run(xs)
    monkeypatch.setattr(codegen, "CHUNK_STEPS", 3)
    chunked = compile_model(model)
    assert "part" in chunked.source(0) and "part" in chunked.source(0, checked=True)
    for deadline in (None, time.monotonic_ns() + 10**11):
        got = chunked.run(xs, deadline_ns=deadline)
        assert len(got) == len(whole)
        for a, b in zip(got, whole):
            np.testing.assert_array_equal(a, b)


def test_a_failure_in_a_later_chunk_names_its_operation(monkeypatch):
    monkeypatch.setattr(codegen, "CHUNK_STEPS", 2)
    mb = ModelBuilder()
    g = mb.main
    x = g.input(F32, [0])
    y = g.input(F32, [0])
    cur = x
    for _ in range(6):
        nxt = g.temporary(F32, [0])
        g.operation(O.ADD, [cur, x, g.constant(T.INT32, 0)], [nxt])
        cur = nxt
    out = g.output(F32, [0])
    g.operation(O.ADD, [cur, y, g.constant(T.INT32, 0)], [out])
    compiled = compile_model(mb.build())
    ok = compiled.run([np.ones(2, np.float32), np.ones(2, np.float32)])
    np.testing.assert_array_equal(ok[0], np.full(2, 8, np.float32))
    for deadline in (None, time.monotonic_ns() + 10**11):
        with pytest.raises(GeneralFailure, match=r"ADD \(subgraph 0, operation 6\)"):
            compiled.run([np.ones(2, np.float32), np.ones(3, np.float32)], deadline_ns=deadline)


def test_a_passed_deadline_stops_a_chunked_plan(monkeypatch):
    monkeypatch.setattr(codegen, "CHUNK_STEPS", 2)
    compiled = compile_model(_dag_model(5, 10))
    xs = [np.ones(3, np.float32)] * 3
    with pytest.raises(MissedDeadline):
        compiled.run(xs, deadline_ns=time.monotonic_ns() - 1)
