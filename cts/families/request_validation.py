"""Family "request-validation": invalid requests get INVALID_ARGUMENT on every path.

For the base model of every spec (first example), the valid request is
mutated (VTS ValidateRequest, hal13.md §4.6 and §5.5) and each mutated request
goes through every execution path the target offers (sync, async, and burst
and fenced when the target has them): the answer must be INVALID_ARGUMENT
with no output shapes and no timing. Mutations:

- ``removeInput`` / ``removeOutput`` / ``addInput``: wrong argument counts;
- ``inputPoolIndex`` / ``outputPoolIndex``: a pool index past the pools;
- ``inputOffset`` / ``outputLength``: a location past the end of its pool;
- ``inputDimensions`` (wrong rank, an axis that disagrees with the model, a 0
  axis) and ``outputRank``;
- ``noValueWithLocation``: hasNoValue with a non-zero location;
- ``noPools``: arguments naming pool 0 of a request without pools;
- ``badMemory``: a shared-memory pool with an empty name, driver-buffer
  tokens 0 and unknown (INVALID_ARGUMENT; a shared segment that does not
  exist may also be GENERAL_FAILURE, as a failed mapping is in the HAL).

After each test the unmutated request must still execute correctly.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from nnhal.cts.core import Problems, TestCase, coverage_of
from nnhal.cts.paths import check_error, check_success, execute, layout

from nnhal.errors import HalError
from nnhal.types import (
    ErrorStatus,
    Request,
    RequestArgument,
    SharedMemory,
    TokenMemory,
    is_tensor_type,
)
from nnhal.vectors import TestModel

FAMILY = "request-validation"
_INVALID = (ErrorStatus.INVALID_ARGUMENT,)
_INVALID_OR_FAILURE = (ErrorStatus.INVALID_ARGUMENT, ErrorStatus.GENERAL_FAILURE)

Mutation = tuple[str, Request, tuple[ErrorStatus, ...], bool]  # name, request, allowed, burst-able


def _with(args: tuple[RequestArgument, ...], k: int, arg: RequestArgument) -> tuple:
    return args[:k] + (arg,) + args[k + 1 :]


def _pool_size(request: Request, index: int) -> int:
    pool = request.pools[index]
    return getattr(pool, "size", 0)


def mutations(test: TestModel, request: Request) -> dict[str, list[Mutation]]:
    """Every mutation kind -> its mutated requests."""
    main = test.model.main
    ins, outs = request.inputs, request.outputs
    out: dict[str, list[Mutation]] = {}

    def add(kind: str, what: str, req: Request, allowed=_INVALID, burst: bool = True) -> None:
        out.setdefault(kind, []).append((what, req, allowed, burst))

    for k in range(len(ins)):
        add("removeInput", f"input {k} removed", replace(request, inputs=ins[:k] + ins[k + 1 :]))
    for k in range(len(outs)):
        add(
            "removeOutput",
            f"output {k} removed",
            replace(request, outputs=outs[:k] + outs[k + 1 :]),
        )
    if ins:
        add("addInput", "one input too many", replace(request, inputs=(*ins, ins[0])))
    n_pools = len(request.pools)
    for kind, args, field in (
        ("inputPoolIndex", ins, "inputs"),
        ("outputPoolIndex", outs, "outputs"),
    ):
        for k, a in enumerate(args):
            if a.hasNoValue:
                continue
            bad = replace(a, location=replace(a.location, poolIndex=n_pools))
            add(
                kind,
                f"{field[:-1]} {k} in pool {n_pools}",
                replace(request, **{field: _with(args, k, bad)}),
            )
    for k, a in enumerate(ins):
        if a.hasNoValue:
            continue
        size = _pool_size(request, a.location.poolIndex)
        bad = replace(a, location=replace(a.location, offset=size))
        add(
            "inputOffset",
            f"input {k} at offset {size} (pool size)",
            replace(request, inputs=_with(ins, k, bad)),
        )
    for k, a in enumerate(outs):
        size = _pool_size(request, a.location.poolIndex)
        bad = replace(a, location=replace(a.location, offset=0, length=size + 1))
        add(
            "outputLength",
            f"output {k} of {size + 1} bytes in a {size}-byte pool",
            replace(request, outputs=_with(outs, k, bad)),
        )
    for k, (a, index) in enumerate(zip(ins, main.inputIndexes)):
        operand = main.operands[index]
        dims = tuple(operand.dimensions)
        if a.hasNoValue or not is_tensor_type(operand.type) or not dims:
            continue
        cases = [(dims + (1,), "rank + 1")]
        if dims[0]:
            cases.append(((dims[0] + 1,) + dims[1:], "axis 0 disagrees with the model"))
        cases.append(((0,) + dims[1:], "axis 0 is 0"))
        for bad_dims, what in cases:
            bad = replace(a, dimensions=bad_dims)
            add(
                "inputDimensions",
                f"input {k} dimensions {list(bad_dims)} ({what})",
                replace(request, inputs=_with(ins, k, bad)),
            )
    for k, (a, index) in enumerate(zip(outs, main.outputIndexes)):
        operand = main.operands[index]
        if not is_tensor_type(operand.type) or not operand.dimensions:
            continue
        bad = replace(a, dimensions=tuple(operand.dimensions) + (1,))
        add(
            "outputRank",
            f"output {k} of rank {len(operand.dimensions) + 1}",
            replace(request, outputs=_with(outs, k, bad)),
        )
    for k, a in enumerate(ins):
        if a.hasNoValue:
            continue
        bad = RequestArgument(hasNoValue=True, location=a.location)
        add(
            "noValueWithLocation",
            f"input {k} has no value but a location",
            replace(request, inputs=_with(ins, k, bad)),
        )
    add("noPools", "no pools", replace(request, pools=()))
    if ins and not ins[0].hasNoValue:
        p = ins[0].location.poolIndex
        for pool, what, allowed in (
            (
                SharedMemory("", _pool_size(request, p)),
                "a shared-memory pool without a name",
                _INVALID,
            ),
            (
                SharedMemory("/nnhal-cts-no-such-segment", _pool_size(request, p)),
                "a shared-memory segment that does not exist",
                _INVALID_OR_FAILURE,
            ),
            (TokenMemory(0), "driver buffer token 0", _INVALID),
            (TokenMemory(987_654_321), "an unknown driver buffer token", _INVALID),
        ):
            pools = request.pools[:p] + (pool,) + request.pools[p + 1 :]
            add(
                "badMemory",
                f"input pool {p}: {what}",
                replace(request, pools=pools),
                allowed,
                burst=False,
            )
    return out


def _paths(target) -> list[str]:
    paths = ["sync", "async"]
    for name in ("burst", "fenced"):
        if target.capability(name).usable:
            paths.append(name)
    return paths


def _case(test: TestModel, kind: str):
    def run(target) -> str:
        target.require_supported(test.model)
        prepared = target.device.prepareModel_1_3(test.model)
        plan = layout(test, outputs="specified")
        try:
            cases = mutations(test, plan.request)[kind]
            problems = Problems()
            paths = _paths(target)
            for what, request, allowed, burstable in cases:
                for path in paths:
                    if path == "burst" and not burstable:
                        continue

                    def one(req=request, p=path, a=allowed, w=what) -> None:
                        check_error(execute(target, prepared, req, p), a, f"{p}: {w}")

                    problems.run(what, one)
            target.assert_serving()
            check_success(
                test, plan, execute(target, prepared, plan.request, "sync"), measure=False
            )
            problems.raise_if_any("invalid requests")
            return f"{problems.checked} invalid requests rejected on {', '.join(paths)}"
        finally:
            plan.close()
            try:
                prepared.release()
            except HalError:
                pass

    return run


KINDS = (
    "removeInput",
    "removeOutput",
    "addInput",
    "inputPoolIndex",
    "outputPoolIndex",
    "inputOffset",
    "outputLength",
    "inputDimensions",
    "outputRank",
    "noValueWithLocation",
    "noPools",
    "badMemory",
)


def _kinds(test: TestModel) -> Iterator[str]:
    plan = layout(test, outputs="specified")
    try:
        present = mutations(test, plan.request)
    finally:
        plan.close()
    yield from (k for k in KINDS if k in present)


def collect(library, options) -> list[TestCase]:
    cases: list[TestCase] = []
    seen: set[str] = set()
    picks = [m for m in library.validation_models() if m.origin == "nnapi"]
    for m in library.base_models() + picks:
        key = m.spec if m.origin == "library" else m.test_id
        if key in seen or m.test.expectFailure:
            continue
        seen.add(key)
        cov = coverage_of([m.test.model])
        for kind in _kinds(m.test):
            cases.append(
                TestCase(f"{FAMILY}/{key}/{kind}", FAMILY, _case(m.test, kind), coverage=cov)
            )
    return cases
