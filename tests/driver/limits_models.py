"""Models and servers shared by the resource-limit tests (tests/test_limits*.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from nnhal.builder import ModelBuilder
from nnhal.types import Model, OperandType, OperationType

T = OperandType
O = OperationType
F32, I32, BOOL8, INT32 = T.TENSOR_FLOAT32, T.TENSOR_INT32, T.TENSOR_BOOL8, T.INT32


def device_with(**limits: int) -> Any:
    """A default-profile driver Device with some limits changed."""
    from nnhal.driver.device import Device
    from nnhal.driver.profile import load_profile

    profile = load_profile(None)
    return Device(replace(profile, limits=replace(profile.limits, **limits)))


@contextlib.contextmanager
def serving(device: Any) -> Iterator[tuple[Any, str]]:
    """A gRPC server for ``device`` and a client connected to it."""
    from nnhal.driver.service import create_server

    from nnhal.client import connect

    server, address = create_server(device, "127.0.0.1:0")
    client = connect(address, timeout=10.0)
    try:
        yield client, address
    finally:
        client.close()
        server.stop(grace=None).wait()


def add_model(dims: list[int] | tuple[int, ...] = (2,), n_adds: int = 1) -> Model:
    """y = x + x (+ x ...): ``n_adds`` ADD operations in a chain."""
    mb = ModelBuilder()
    g = mb.main
    x = g.input(F32, list(dims))
    value = x
    for k in range(n_adds):
        out = g.output(F32, list(dims)) if k == n_adds - 1 else g.temporary(F32, list(dims))
        g.operation(O.ADD, [value, x, g.constant(INT32, 0)], [out])
        value = out
    return mb.build()


def nested_if(depth: int) -> Model:
    """main: IF over subgraph 1; subgraph k: IF over subgraph k+1; the last one: y = x + x.

    ``depth`` IFs nested in each other (``nesting_depths`` of main's operation 0);
    every level runs once, so the output is 2 * x.
    """
    mb = ModelBuilder()
    levels = [mb.main, *(mb.subgraph() for _ in range(depth))]
    for level, g in enumerate(levels):
        c = g.input(BOOL8, [1])
        x = g.input(F32, [2])
        y = g.output(F32, [2])
        if level < depth:
            nxt = g.subgraph_ref(levels[level + 1])
            g.operation(O.IF, [c, nxt, nxt, c, x], [y])
        else:
            g.operation(O.ADD, [x, x, g.constant(INT32, 0)], [y])
    return mb.build()


def nested_while(depth: int) -> Model:
    """``depth`` WHILE loops nested in each other's bodies (a reference chain of bodies).

    Every loop runs while x < 1: the outer one calls body 1 with x = 0, which runs
    its own loop over body 2 with x = 0 ... the innermost body adds 1; each loop
    then stops after one iteration, so main's output is 1.
    """
    mb = ModelBuilder()
    cond = mb.subgraph()
    cx = cond.input(F32, [1])
    cy = cond.output(BOOL8, [1])
    cond.operation(O.LESS, [cx, cond.constant(F32, [1.0])], [cy])
    bodies = [mb.subgraph() for _ in range(depth)]
    for level, body in enumerate(bodies):
        x = body.input(F32, [1])
        y = body.output(F32, [1])
        if level + 1 < depth:
            body.operation(
                O.WHILE, [body.subgraph_ref(cond), body.subgraph_ref(bodies[level + 1]), x], [y]
            )
        else:
            body.operation(O.ADD, [x, body.constant(F32, [1.0]), body.constant(INT32, 0)], [y])
    g = mb.main
    x = g.input(F32, [1])
    y = g.output(F32, [1])
    g.operation(O.WHILE, [g.subgraph_ref(cond), g.subgraph_ref(bodies[0]), x], [y])
    return mb.build()
