"""Family "model-validation": invalid models get INVALID_ARGUMENT (VTS ValidateModel).

For the base model of every spec, one test per mutation family of
``nnhal.cts.mutations`` (hal13.md §5.4, items 1-19); for each data-type variation
the families whose mutations depend on operand types (2-5, and 10 for specs
without subgraphs); graph variations add nothing, as in VTS. Every mutated model
must get INVALID_ARGUMENT from getSupportedOperations_1_3 and from
prepareModel_1_3; items 20-21 (invalid preference, priority) from
prepareModel_1_3. After each test the target must still answer getStatus
with AVAILABLE.

Subgraph mutations, for models with referenced subgraphs (base variation):
the mutation families (but 10) applied to each referenced subgraph
(``subgraph<k>/<family>``), and ``subgraphReferences``: a SUBGRAPH operand
naming a subgraph that does not exist, or its own subgraph (a reference
cycle). ``model-validation/control-flow/*`` are hand-made invalid IF/WHILE
models (hal13.md §3.2): unknown-size WHILE operands, a condition that is not
BOOL8 [1], branch arity and type mismatches.

Mutations that only the per-operation signature table catches (operand
types of an operation, added or removed inputs and outputs) are skipped for
a model whose operations the target reports unsupported: a target need not
know the signature of an operation it cannot run. A model the target already
rejects unmutated makes its tests skip (they would prove nothing).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

import grpc
from nnhal.cts.core import Problems, TestCase, check, coverage_of, skip
from nnhal.cts.mutations import (
    MUTATION_FAMILIES,
    preference_mutations,
    priority_mutations,
)

from nnhal import convert as cv
from nnhal._proto.v1_3 import device_pb2 as dpb
from nnhal.builder import ModelBuilder
from nnhal.client import PreparedModel
from nnhal.errors import DeviceUnavailable, HalError
from nnhal.types import (
    DataLocation,
    ErrorStatus,
    ExecutionPreference,
    Model,
    OperandLifeTime,
    OperandType,
    OperationType,
    Priority,
)

FAMILY = "model-validation"
_INVALID = ErrorStatus.INVALID_ARGUMENT
#: families whose mutated models depend on the operand types (run on every data-type
#: variation; the structural ones only on the base model)
TYPE_FAMILIES = frozenset(
    {
        "mutateOperandTypeTest",
        "mutateOperandRankTest",
        "mutateOperandScaleTest",
        "mutateOperandZeroPointTest",
        "mutateOperationOperandTypeTest",
    }
)
_PER_OPERATION = "mutateOperationOperandTypeTest"
#: families caught only by an operation's signature (arity, operand types)
SIGNATURE_FAMILIES = frozenset(
    {
        "mutateOperationOperandTypeTest",
        "removeOperationInputTest",
        "removeOperationOutputTest",
        "addOperationInputTest",
        "addOperationOutputTest",
    }
)


def expect_invalid(target, model: Model, what: str, *, preference=None, priority=None) -> None:
    """INVALID_ARGUMENT from getSupportedOperations_1_3 (unless the prepare arguments
    are what is invalid) and from prepareModel_1_3.

    Calls the stubs directly so the model is converted to protobuf once for both.
    """
    stub = target.device.stub
    model_pb = cv.model_to_pb(model)
    if preference is None and priority is None:
        reply = _call(
            stub.getSupportedOperations_1_3, dpb.GetSupportedOperationsRequest_1_3(model=model_pb)
        )
        check(
            reply.status == _INVALID,
            lambda: f"getSupportedOperations_1_3 returned {_status_text(reply)} for {what}",
        )
    message = dpb.PrepareModelRequest_1_3(
        model=model_pb,
        preference=ExecutionPreference.FAST_SINGLE_ANSWER if preference is None else preference,
        priority=Priority.MEDIUM if priority is None else priority,
    )
    reply = _call(stub.prepareModel_1_3, message)
    if reply.status == ErrorStatus.NONE and reply.preparedModel:
        PreparedModel(target.device, reply.preparedModel, None).release()
    check(
        reply.status == _INVALID,
        lambda: f"prepareModel_1_3 returned {_status_text(reply)} for {what}",
    )


def _status_text(reply) -> str:
    name = ErrorStatus(reply.status).name
    return f"{name} ({reply.message})" if reply.message else name


def _call(method, message):
    try:
        return method(message)
    except grpc.RpcError as e:
        raise DeviceUnavailable(f"gRPC transport error {e.code()}: {e.details()}") from e


def _base_state(target, model: Model) -> bool:
    """Whether every operation is supported; skip when the model is rejected unmutated."""
    try:
        flags = target.device.getSupportedOperations_1_3(model)
    except HalError as e:
        skip(f"the unmutated model is already rejected ({e}); its mutations prove nothing")
    return all(flags)


def _mutation_test(model: Model, family: str, generator: Callable[[Model], Iterator]):
    def run(target) -> str:
        supported = _base_state(target, model)
        if family in SIGNATURE_FAMILIES and not supported:
            skip(f"{family} needs the signatures of operations the target reports unsupported")
        problems = Problems()
        for description, mutated in generator(model):
            problems.run(description, lambda m=mutated, d=description: expect_invalid(target, m, d))
        target.assert_serving()
        if not problems.checked:
            skip(f"no {family} mutation applies to this model")
        problems.raise_if_any("mutated models")
        return f"{problems.checked} mutated models rejected"

    return run


def _argument_test(model: Model, kind: str):
    mutations = preference_mutations if kind == "preference" else priority_mutations

    def run(target) -> str:
        _base_state(target, model)
        problems = Problems()
        for description, value in mutations:
            kwargs = {kind: value}
            problems.run(description, lambda k=kwargs: expect_invalid(target, model, "", **k))
        target.assert_serving()
        problems.raise_if_any("invalid arguments")
        return f"{problems.checked} invalid {kind} values rejected"

    return run


def in_referenced(k: int, generator: Callable[[Model], Iterator]) -> Callable[[Model], Iterator]:
    """A main-subgraph mutation family applied to ``referenced[k]`` instead."""

    def mutations(model: Model) -> Iterator[tuple[str, Model]]:
        proxy = replace(model, main=model.referenced[k])
        for description, mutated in generator(proxy):
            referenced = list(model.referenced)
            referenced[k] = mutated.main
            yield (
                f"subgraph {k + 1}: {description}",
                replace(mutated, main=model.main, referenced=tuple(referenced)),
            )

    return mutations


def subgraph_reference_mutations(model: Model) -> Iterator[tuple[str, Model]]:
    """SUBGRAPH operands naming a missing subgraph, or the subgraph they are in (a cycle)."""
    subgraphs = (model.main, *model.referenced)
    for s, sg in enumerate(subgraphs):
        for i, o in enumerate(sg.operands):
            if o.lifetime != OperandLifeTime.SUBGRAPH:
                continue
            targets = [(len(model.referenced), "a subgraph that does not exist")]
            if s > 0:
                targets.append((s - 1, "its own subgraph (a reference cycle)"))
            for offset, what in targets:
                operands = list(sg.operands)
                operands[i] = replace(o, location=DataLocation(0, offset, 0))
                new = replace(sg, operands=tuple(operands))
                all_sg = list(subgraphs)
                all_sg[s] = new
                yield (
                    f"subgraph {s} operand {i} names {what}",
                    replace(model, main=all_sg[0], referenced=tuple(all_sg[1:])),
                )


# ---------------------------------------------------------------------------
# Hand-made invalid control-flow models (hal13.md §3.2)
# ---------------------------------------------------------------------------

_F32, _BOOL8, _I32 = OperandType.TENSOR_FLOAT32, OperandType.TENSOR_BOOL8, OperandType.INT32


def _while_model(state_dims=(2,), flag_type=_BOOL8, flag_dims=(1,), body_out_type=_F32) -> Model:
    mb = ModelBuilder()
    cond, body = mb.subgraph(), mb.subgraph()
    cx = cond.input(_F32, state_dims)
    flag = cond.output(flag_type, flag_dims)
    cond.operation(OperationType.LESS, [cx, cx], [flag])
    bx = body.input(_F32, state_dims)
    by = body.output(body_out_type, state_dims)
    body.operation(OperationType.ADD, [bx, bx, body.constant(_I32, 0)], [by])
    g = mb.main
    x, y = g.input(_F32, (2,)), g.output(_F32, (2,))
    g.operation(OperationType.WHILE, [g.subgraph_ref(cond), g.subgraph_ref(body), x], [y])
    return mb.build()


def _if_model(cond_type=_BOOL8, cond_dims=(1,), else_inputs=1, else_type=_F32) -> Model:
    mb = ModelBuilder()
    then, other = mb.subgraph(), mb.subgraph()
    tx = then.input(_F32, (2,))
    ty = then.output(_F32, (2,))
    then.operation(OperationType.ADD, [tx, tx, then.constant(_I32, 0)], [ty])
    ex = [other.input(else_type, (2,)) for _ in range(else_inputs)]
    ey = other.output(else_type, (2,))
    other.operation(OperationType.ADD, [ex[0], ex[-1], other.constant(_I32, 0)], [ey])
    g = mb.main
    c, x = g.input(cond_type, cond_dims), g.input(_F32, (2,))
    y = g.output(_F32, (2,))
    g.operation(OperationType.IF, [c, g.subgraph_ref(then), g.subgraph_ref(other), x], [y])
    return mb.build()


CONTROL_FLOW_CASES: dict[str, tuple[Callable[[], Model], str]] = {
    "while-unknown-size": (
        lambda: _while_model(state_dims=(0,)),
        "WHILE operands of unknown size (drivers must reject them, b/132458982)",
    ),
    "while-condition-not-bool8": (
        lambda: _while_model(flag_type=OperandType.TENSOR_INT32),
        "a WHILE condition output that is not TENSOR_BOOL8",
    ),
    "while-condition-rank": (
        lambda: _while_model(flag_dims=(2,)),
        "a WHILE condition output of dimensions [2] (must be [1])",
    ),
    "while-body-output-type": (
        lambda: _while_model(body_out_type=OperandType.TENSOR_FLOAT16),
        "a WHILE body output whose type differs from the WHILE output",
    ),
    "if-condition-not-bool8": (
        lambda: _if_model(cond_type=OperandType.TENSOR_INT32),
        "an IF condition that is not TENSOR_BOOL8",
    ),
    "if-condition-dims": (
        lambda: _if_model(cond_dims=(2,)),
        "an IF condition of dimensions [2] (must be [1])",
    ),
    "if-branch-arity": (
        lambda: _if_model(else_inputs=2),
        "an IF whose else branch has more inputs than the IF passes",
    ),
    "if-branch-type": (
        lambda: _if_model(else_type=OperandType.TENSOR_FLOAT16),
        "an IF whose else branch takes another operand type",
    ),
}


def _control_flow_case(build: Callable[[], Model], what: str):
    def run(target) -> None:
        expect_invalid(target, build(), what)
        target.assert_serving()

    return run


def _applies(mutations: Callable[[Model], Iterator], model: Model) -> bool:
    """Whether the family yields at least one mutated model (no test otherwise)."""
    return next(iter(mutations(model)), None) is not None


def _full(m) -> bool:
    """Every mutation family applies: a spec's base model, or a corpus pick."""
    return m.variation == "base" or m.origin == "nnapi"


def collect(library, options) -> list[TestCase]:
    cases: list[TestCase] = []
    seen: set[str] = set()
    for m in library.validation_models():
        key = f"{m.spec}/{m.variation}" if m.origin == "library" else m.test_id
        if key in seen:  # examples share the model
            continue
        seen.add(key)
        model = m.test.model
        cov = coverage_of([model])
        base = f"{FAMILY}/{key}"
        for family, generator in MUTATION_FAMILIES.items():
            if not _full(m) and (
                family not in TYPE_FAMILIES or (model.referenced and family == _PER_OPERATION)
            ):
                continue
            if _applies(generator, model):
                run = _mutation_test(model, family, generator)
                cases.append(TestCase(f"{base}/{family}", FAMILY, run, coverage=cov))
        for kind, name in (
            ("preference", "mutateExecutionPreferenceTest"),
            ("priority", "mutateExecutionPriorityTest"),
        ):
            cases.append(
                TestCase(f"{base}/{name}", FAMILY, _argument_test(model, kind), coverage=cov)
            )
        if not model.referenced or not _full(m):
            continue
        for k in range(len(model.referenced)):
            for family, generator in MUTATION_FAMILIES.items():
                if family == _PER_OPERATION:
                    continue  # the signature table is exercised in main already
                mutations = in_referenced(k, generator)
                if not _applies(mutations, model):
                    continue
                run = _mutation_test(model, family, mutations)
                cases.append(
                    TestCase(f"{base}/subgraph{k + 1}/{family}", FAMILY, run, coverage=cov)
                )
        run = _mutation_test(model, "subgraphReferences", subgraph_reference_mutations)
        cases.append(TestCase(f"{base}/subgraphReferences", FAMILY, run, coverage=cov))
    for name, (build, what) in CONTROL_FLOW_CASES.items():
        cases.append(
            TestCase(f"{FAMILY}/control-flow/{name}", FAMILY, _control_flow_case(build, what))
        )
    return cases
