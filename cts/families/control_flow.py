"""Family "control-flow": loop timeouts, deadlines in loops, the recursive support rule.

Loop timeouts (hal13.md §3.5; VTS InfiniteLoopTimeoutTest, TestControlFlow)
on while_infinite_loop (cond i >= n, body i + 1, i = 1, n = 0):

- ``loop-timeout/1ms/<type>/<path>``: loopTimeoutDuration 1 ms, for float32,
  relaxed, float16, quant8 and quant8 signed, through sync, async and fenced
  (when the target has it): MISSED_DEADLINE_* within 1 s (a target that
  ignores the value takes its 2 s default);
- ``loop-timeout/default``: no loopTimeoutDuration: MISSED_DEADLINE_* after
  2 s (not before 1.9 s, not after 4.5 s);
- ``loop-timeout/3s``: 3 s is honoured (between 2.9 s and 5.5 s), so the
  value given really replaces the default;
- ``loop-timeout/above-maximum``: 30 s is above the 15 s maximum: either
  INVALID_ARGUMENT, or MISSED_DEADLINE_* within 15 s + 2.5 s (the runtime
  clamps to 15 s; a driver that waits 30 s fails). Slow (15 s);
- ``loop-timeout/burst``: a burst cannot carry a loop timeout, the default
  applies: an error (GENERAL_FAILURE, as V1_0 statuses carry no
  MISSED_DEADLINE) after about 2 s;
- ``deadline-in-loop`` (local targets): an execution deadline 300 ms away
  with a 15 s loop timeout must end the loop with MISSED_DEADLINE_*; the
  note says whether the deadline (the reference checks it before every
  operation) or only the loop timeout ended it.

The recursive support rule (hal13.md §3.4): ``support-rule/<structure>``
puts an operation the target reports unsupported on its own (found by
probing single-operation models: ABS, FLOOR, RELU, ..., the foundation
operations, and last an operation of a made-up vendor extension the model
declares, which no target supports, so every target gets these tests) deep inside IF/WHILE structures (then, else, condition, body,
WHILE in IF, IF in WHILE, WHILE in WHILE, IF in WHILE in IF) and checks that
getSupportedOperations_1_3 reports that IF/WHILE unsupported.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

import numpy as np
from nnhal.cts.core import TestCase, check, fail, skip
from nnhal.cts.paths import MISSED_DEADLINE, execute

from nnhal._client_io import IoPlan
from nnhal.builder import ModelBuilder, SubgraphBuilder
from nnhal.errors import HalError
from nnhal.types import (
    LOOP_TIMEOUT_MAXIMUM_NS,
    ErrorStatus,
    ExtensionNameAndPrefix,
    Model,
    OperandType,
    OperationType,
)

FAMILY = "control-flow"
_T, _O = OperandType, OperationType
_F32, _BOOL8, _I32S, _I32 = _T.TENSOR_FLOAT32, _T.TENSOR_BOOL8, _T.INT32, _T.TENSOR_INT32
MS = 1_000_000
SLACK = 2.5  # seconds allowed on top of a loop timeout (RPC, a loaded CI machine)

#: type name -> (operand type, scale, zero point, relaxed, i0, n)
LOOP_TYPES = {
    "float32": (_F32, 0.0, 0, False, 1.0, 0.0),
    "relaxed": (_F32, 0.0, 0, True, 1.0, 0.0),
    "float16": (_T.TENSOR_FLOAT16, 0.0, 0, False, 1.0, 0.0),
    "quant8_asymm": (_T.TENSOR_QUANT8_ASYMM, 1.0, 127, False, 128, 127),
    "quant8_signed": (_T.TENSOR_QUANT8_ASYMM_SIGNED, 1.0, 0, False, 1, 0),
}


def infinite_loop(kind: str = "float32") -> tuple[Model, list[np.ndarray]]:
    """while_infinite_loop: cond = i >= n, body = i + 1; i = 1, n = 0 never ends."""
    t, scale, zp, relaxed, i0, n0 = LOOP_TYPES[kind]
    q = {"scale": scale, "zero_point": zp}
    mb = ModelBuilder(relaxed=relaxed)
    cond, body = mb.subgraph(), mb.subgraph()
    ci, cn = cond.input(t, [1], **q), cond.input(t, [1], **q)
    flag = cond.output(_BOOL8, [1])
    cond.operation(_O.GREATER_EQUAL, [ci, cn], [flag])
    bi, _ = body.input(t, [1], **q), body.input(t, [1], **q)
    bo = body.output(t, [1], **q)
    one = 1.0 if scale == 0.0 else round(1.0 / scale) + zp
    body.operation(_O.ADD, [bi, body.constant(t, [one], **q), body.constant(_I32S, 0)], [bo])
    g = mb.main
    i, n = g.input(t, [1], **q), g.input(t, [1], **q)
    out = g.output(t, [1], **q)
    g.operation(_O.WHILE, [g.subgraph_ref(cond), g.subgraph_ref(body), i, n], [out])
    dtype = {_F32: np.float32, _T.TENSOR_FLOAT16: np.float16}.get(t)
    dtype = dtype or (np.uint8 if t == _T.TENSOR_QUANT8_ASYMM else np.int8)
    return mb.build(), [np.array([i0], dtype), np.array([n0], dtype)]


def _run_loop(target, kind: str, path: str, **kwargs):
    model, inputs = infinite_loop(kind)
    target.require_supported(model)
    prepared = target.device.prepareModel_1_3(model)
    plan = IoPlan(model, inputs, None, "inline")
    try:
        return execute(target, prepared, plan.request, path, **kwargs)
    finally:
        plan.close()
        try:
            prepared.release()
        except HalError:
            pass


def _missed(result, what: str) -> None:
    status = result.status
    if result.path == "fenced" and status == ErrorStatus.NONE and result.fenced is not None:
        info = result.fenced[2]
        status = info[0] if info is not None else status  # the error reported by the callback
    check(status in MISSED_DEADLINE, f"{what}: expected MISSED_DEADLINE_*, got {result.describe()}")


def _one_ms(kind: str, path: str):
    def run(target) -> str:
        if path == "fenced":
            target.require("fenced")
        result = _run_loop(target, kind, path, loop_timeout_ns=MS)
        _missed(result, "infinite loop, loopTimeoutDuration 1 ms")
        check(
            result.elapsed < 1.0,
            f"loopTimeoutDuration 1 ms: the loop ended after "
            f"{result.elapsed:.2f} s (the value was not honoured)",
        )
        return f"ended after {result.elapsed * 1000:.0f} ms"

    return run


def _bounded(timeout_ns: int | None, low: float, high: float):
    def run(target) -> str:
        result = _run_loop(target, "float32", "sync", loop_timeout_ns=timeout_ns)
        given = "no loopTimeoutDuration" if timeout_ns is None else f"{timeout_ns / 1e9:g} s"
        above = timeout_ns is not None and timeout_ns > LOOP_TIMEOUT_MAXIMUM_NS
        if above and result.status == ErrorStatus.INVALID_ARGUMENT:
            return "rejected with INVALID_ARGUMENT (allowed: above the maximum)"
        _missed(result, f"infinite loop, {given}")
        check(
            low <= result.elapsed <= high,
            f"infinite loop, {given}: ended after "
            f"{result.elapsed:.2f} s, expected between {low:g} s and {high:g} s",
        )
        return f"ended after {result.elapsed:.2f} s"

    return run


def _burst(target) -> str:
    target.require("burst")
    result = _run_loop(target, "float32", "burst")
    check(result.status != ErrorStatus.NONE, "an infinite loop in a burst returned NONE")
    check(
        result.elapsed <= 2.0 + SLACK,
        f"an infinite loop in a burst (default 2 s timeout) ended after {result.elapsed:.2f} s",
    )
    return f"{result.status.name} after {result.elapsed:.2f} s"


def _deadline_in_loop(target) -> str:
    if not target.is_local:
        skip(f"steady-clock deadlines need the target on this host ({target.address})")
    deadline = time.monotonic_ns() + 300 * MS
    result = _run_loop(
        target, "float32", "sync", deadline_ns=deadline, loop_timeout_ns=LOOP_TIMEOUT_MAXIMUM_NS
    )
    _missed(result, "infinite loop with a deadline 300 ms away")
    if result.elapsed > 5.0:
        return (
            f"ended after {result.elapsed:.1f} s: only the loop timeout ended it (the "
            "deadline is not checked inside loops; allowed, the HAL says 'may')"
        )
    return f"the deadline ended the loop after {result.elapsed * 1000:.0f} ms"


# ---------------------------------------------------------------------------
# The recursive support rule
# ---------------------------------------------------------------------------

#: operations probed one at a time, each as y = OP(x) on float32 [2] tensors
_UNARY = (
    "ABS",
    "EXP",
    "FLOOR",
    "LOG",
    "LOGISTIC",
    "NEG",
    "RELU",
    "RELU1",
    "RELU6",
    "RSQRT",
    "SIN",
    "SQRT",
    "TANH",
    "HARD_SWISH",
)


def _emit(op: str, g: SubgraphBuilder, x: int, y: int) -> None:
    if op in _UNARY:
        g.operation(_O[op], [x], [y])
    elif op in ("ADD", "SUB", "MUL", "DIV"):
        g.operation(_O[op], [x, x, g.constant(_I32S, 0)], [y])
    elif op == "RESHAPE":
        g.operation(_O.RESHAPE, [x, g.constant(_I32, [2], [1])], [y])
    elif op == "CONCATENATION":
        g.operation(_O.CONCATENATION, [x, g.constant(_I32S, 0)], [y])
    elif op == "SLICE":
        g.operation(_O.SLICE, [x, g.constant(_I32, [0], [1]), g.constant(_I32, [2], [1])], [y])
    elif op == EXTENSION:
        g.operation((1 << 16) | 0, [x], [y])
    else:
        raise ValueError(op)


#: an operation of a made-up vendor extension no target supports (declared in the model)
EXTENSION = "EXTENSION"
_EXTENSION_NAME = "com.example.nnhal_cts_support_rule"

PROBE_OPERATIONS = (
    "SUB", "MUL", "DIV", "RESHAPE", "CONCATENATION", "SLICE", "ADD", *_UNARY, EXTENSION
)  # fmt: skip


def _declare(model: Model, op: str) -> Model:
    if op != EXTENSION:
        return model
    return replace(model, extensionNameToPrefix=(ExtensionNameAndPrefix(_EXTENSION_NAME, 1),))


def _leaf(op: str) -> Callable[[SubgraphBuilder, int, int], None]:
    return lambda g, x, y: _emit(op, g, x, y)


def _single(op: str) -> Model:
    mb = ModelBuilder()
    g = mb.main
    x, y = g.input(_F32, [2]), g.output(_F32, [2])
    _emit(op, g, x, y)
    return _declare(mb.build(), op)


def _unsupported_operation(target) -> str | None:
    def probe() -> str | None:
        for op in PROBE_OPERATIONS:
            try:
                flags = target.device.getSupportedOperations_1_3(_single(op))
            except HalError:
                continue  # a target that rejects the probe itself says nothing here
            if flags and not flags[0]:
                return op
        return None

    return target.cached("control-flow/unsupported-probe", probe)


Inner = Callable[[ModelBuilder, SubgraphBuilder, int, int], None]


def _via_if(inner_then: Inner | None, inner_else: Inner | None) -> Inner:
    """y = IF(true, then(x), else(x)) with the given bodies (None = ADD)."""

    def build(mb: ModelBuilder, g: SubgraphBuilder, x: int, y: int) -> None:
        branches = []
        for inner in (inner_then, inner_else):
            b = mb.subgraph()
            bx, by = b.input(_F32, [2]), b.output(_F32, [2])
            (inner or _nested(_leaf("ADD")))(mb, b, bx, by)
            branches.append(b)
        c = g.constant(_BOOL8, [True], [1])
        g.operation(_O.IF, [c, g.subgraph_ref(branches[0]), g.subgraph_ref(branches[1]), x], [y])

    return build


def _via_while(in_cond: Inner | None, in_body: Inner | None) -> Inner:
    """y = WHILE(i < 1) { x = body(x) } with an extra dead computation in cond if given."""

    def build(mb: ModelBuilder, g: SubgraphBuilder, x: int, y: int) -> None:
        cond, body = mb.subgraph(), mb.subgraph()
        ci, cx = cond.input(_I32, [1]), cond.input(_F32, [2])
        flag = cond.output(_BOOL8, [1])
        cond.operation(_O.LESS, [ci, cond.constant(_I32, [1], [1])], [flag])
        if in_cond is not None:
            in_cond(mb, cond, cx, cond.temporary(_F32, [2]))
        bi, bx = body.input(_I32, [1]), body.input(_F32, [2])
        bi2, bx2 = body.output(_I32, [1]), body.output(_F32, [2])
        body.operation(_O.ADD, [bi, body.constant(_I32, [1], [1]), body.constant(_I32S, 0)], [bi2])
        (in_body or _nested(_leaf("ADD")))(mb, body, bx, bx2)
        i0, i_end = g.constant(_I32, [0], [1]), g.temporary(_I32, [1])
        g.operation(_O.WHILE, [g.subgraph_ref(cond), g.subgraph_ref(body), i0, x], [i_end, y])

    return build


def _nested(leaf: Callable[[SubgraphBuilder, int, int], None]) -> Inner:
    return lambda mb, g, x, y: leaf(g, x, y)


def _structures(op: str) -> dict[str, Inner]:
    x_op = _nested(_leaf(op))
    return {
        "if-then": _via_if(x_op, None),
        "if-else": _via_if(None, x_op),
        "while-condition": _via_while(x_op, None),
        "while-body": _via_while(None, x_op),
        "while-in-if": _via_if(_via_while(None, x_op), None),
        "if-in-while-body": _via_while(None, _via_if(None, x_op)),
        "while-in-while-body": _via_while(None, _via_while(None, x_op)),
        "if-in-while-in-if": _via_if(None, _via_while(None, _via_if(x_op, None))),
    }


STRUCTURES = tuple(_structures("ABS"))


def support_model(structure: str, op: str) -> Model:
    """main: y = <structure around op>(x), then z = ADD(y, y) (a plain operation beside it)."""
    mb = ModelBuilder()
    g = mb.main
    x, y, z = g.input(_F32, [2]), g.temporary(_F32, [2]), g.output(_F32, [2])
    _structures(op)[structure](mb, g, x, y)
    g.operation(_O.ADD, [y, y, g.constant(_I32S, 0)], [z])
    return _declare(mb.build(), op)


def _support_rule(structure: str):
    def run(target) -> str:
        op = _unsupported_operation(target)
        if op is None:
            skip(
                "the target supports every probe operation, even one of a made-up extension "
                "(or rejects that model as invalid): no unsupported operation to nest"
            )
        model = support_model(structure, op)
        try:
            flags = target.device.getSupportedOperations_1_3(model)
        except HalError as e:
            fail(f"getSupportedOperations_1_3 of a valid model: {e}")
        check(len(flags) == 2, f"{len(flags)} flags for 2 main operations")
        kind = _O(model.main.operations[0].type).name
        check(
            not flags[0],
            f"{kind} reported supported although {op}, which the target reports "
            f"unsupported on its own, sits inside it ({structure})",
        )
        return f"{kind} with {op} inside ({structure}) reported unsupported"

    return run


def collect(library, options) -> list[TestCase]:
    cases = [
        TestCase(
            f"{FAMILY}/loop-timeout/1ms/{kind}/{path}", FAMILY, _one_ms(kind, path), timeout=20.0
        )
        for kind in LOOP_TYPES
        for path in ("sync", "async", "fenced")
    ]
    cases += [
        TestCase(
            f"{FAMILY}/loop-timeout/default",
            FAMILY,
            _bounded(None, 1.9, 2.0 + SLACK),
            timeout=30.0,
            slow=True,
        ),
        TestCase(
            f"{FAMILY}/loop-timeout/3s",
            FAMILY,
            _bounded(3000 * MS, 2.9, 3.0 + SLACK),
            timeout=30.0,
            slow=True,
        ),
        TestCase(
            f"{FAMILY}/loop-timeout/above-maximum",
            FAMILY,
            _bounded(2 * LOOP_TIMEOUT_MAXIMUM_NS, 0.0, 15.0 + SLACK),
            timeout=45.0,
            slow=True,
        ),
        TestCase(f"{FAMILY}/loop-timeout/burst", FAMILY, _burst, timeout=30.0, slow=True),
        TestCase(f"{FAMILY}/deadline-in-loop", FAMILY, _deadline_in_loop, timeout=45.0),
    ]
    cases += [TestCase(f"{FAMILY}/support-rule/{s}", FAMILY, _support_rule(s)) for s in STRUCTURES]
    return cases
