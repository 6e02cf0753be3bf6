"""The fuzz targets: one function of ``bytes`` each, and the invariant they check.

The invariant: only documented errors come out. In process that is a
``nnhal.errors.HalError`` with a status the call may return and a message
that is not an internal exception in disguise (``kernel failed: KeyError``,
``internal error: ...``, a traceback); for the op-package loaders it is
``ConfigError`` with a message. Anything else -- another exception type, a
wrong status, an internal error wrapped as GENERAL_FAILURE, a result that
differs from the reference -- raises ``FuzzFailure``.

Targets (``TARGETS``):

- ``proto``: byte 0 picks a message kind (``MESSAGE_KINDS``); a request kind
  is followed by two bytes naming the seed model it is for; the rest is the
  serialized message. Decode (a protobuf DecodeError is the transport's
  documented rejection), convert, validate with ``nnhal.validation`` and with
  the driver (they must agree on structural errors), ask for the supported
  operations, prepare what is fully supported; a request is validated against
  its seed model and executed on it.
- ``validation``: a seed model (``nnhal.tools.fuzz.corpus``) semantically mutated
  (``nnhal.tools.fuzz.models``), then the same model pipeline, then an execution with the
  seed's inputs adapted to it.
- ``loaders``: byte 0 picks XML / JSON / INI, the rest is the file; a loaded
  spec must round-trip through ``to_dict`` / ``from_dict``, resolve for each
  of its backends and generate Python source that compiles.
- ``graphs``: ``nnhal.tools.fuzz.graphs.nasty_case`` prepared and executed in process;
  an intact case must give exactly the reference outputs (or
  MISSED_DEADLINE_* for an infinite loop), a spoiled one a documented error.
- ``grpc``: malformed bytes to a live server (``nnhal.tools.fuzz.live``).
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable, Iterable

import numpy as np
from google.protobuf.message import DecodeError
from nnhal.tools.fuzz.data import Draw

from nnhal import convert as cv
from nnhal import convert_legacy as legacy
from nnhal._proto.v1_3 import types_legacy_pb2 as legacy_pb
from nnhal._proto.v1_3 import types_pb2 as pb
from nnhal.errors import HalError
from nnhal.types import (
    LOOP_TIMEOUT_MAXIMUM_NS,
    ErrorStatus,
    HalVersion,
    InlineMemory,
    Model,
    Request,
    SharedMemory,
)
from nnhal.validation import validate_model, validate_request

S = ErrorStatus
INVALID = frozenset({S.INVALID_ARGUMENT})
PREPARE = frozenset({S.INVALID_ARGUMENT, S.GENERAL_FAILURE, S.RESOURCE_EXHAUSTED_TRANSIENT,
                     S.RESOURCE_EXHAUSTED_PERSISTENT, S.MISSED_DEADLINE_PERSISTENT,
                     S.MISSED_DEADLINE_TRANSIENT})  # fmt: skip
EXECUTE = PREPARE | {S.OUTPUT_INSUFFICIENT_SIZE}
#: loop timeout for executions of fuzzed models (a mutated WHILE may never end)
FUZZ_LOOP_TIMEOUT_NS = 50_000_000

MESSAGE_KINDS = ("model_1_3", "model_1_2", "model_1_1", "model_1_0", "request_1_3", "request_1_0")
_MODEL_DECODERS: dict[str, tuple[type, Callable[[object], Model], HalVersion]] = {
    "model_1_3": (pb.Model, cv.model_from_pb, HalVersion.V1_3),
    "model_1_2": (legacy_pb.V1_2.Model, legacy.model_from_v1_2_pb, HalVersion.V1_2),
    "model_1_1": (legacy_pb.V1_1.Model, legacy.model_from_v1_1_pb, HalVersion.V1_1),
    "model_1_0": (legacy_pb.V1_0.Model, legacy.model_from_v1_0_pb, HalVersion.V1_0),
}

#: an internal exception reported as a status: "<where>: kernel failed: KeyError: ..."
_INTERNAL = re.compile(
    r"(?:failed|internal error|cannot compile model|cannot generate code|cannot bind kernel"
    r"|cannot convert the result to \S+): [A-Za-z_][\w.]*(?:Error|Exception)\b"
    r"|Traceback \(most recent call last\)"
)


#: an allocation too large for the machine: needs a configured limit
_RESOURCE = re.compile(r"MemoryError|array is too big|Unable to allocate")


class FuzzFailure(AssertionError):
    """The invariant does not hold; ``kind`` says how (crash, internal, status, wrong, hang).

    ``resource``: an allocation too large for the machine surfaced as an internal
    error; it needs the configurable limits (RESOURCE_EXHAUSTED), so the long runs
    count these apart and keep going."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"[{kind}] {message}")
        self.kind = kind


def internal_text(message: str) -> bool:
    """True when a status message carries an internal exception (a bug, not a diagnosis)."""
    return _INTERNAL.search(message) is not None


def check_error(exc: BaseException, allowed: Iterable[ErrorStatus], what: str) -> HalError:
    """``exc`` must be a HalError with an allowed status and a real message."""
    if isinstance(exc, FuzzFailure):
        raise exc
    if isinstance(exc, MemoryError):
        raise FuzzFailure("resource", f"{what}: MemoryError (needs a limit)") from exc
    if not isinstance(exc, HalError):
        raise FuzzFailure("crash", f"{what}: {type(exc).__name__}: {exc}") from exc
    if exc.status not in frozenset(allowed):
        raise FuzzFailure("status", f"{what}: status {exc.status.name}: {exc.message}") from exc
    if not exc.message:
        raise FuzzFailure("status", f"{what}: {exc.status.name} without a message") from exc
    if internal_text(exc.message):
        kind = "resource" if _RESOURCE.search(exc.message) else "internal"
        raise FuzzFailure(kind, f"{what}: {exc.status.name}: {exc.message}") from exc
    return exc


def attempt(fn: Callable[[], object], allowed: Iterable[ErrorStatus], what: str):
    """(result, None) or (None, the documented HalError); anything else is a FuzzFailure."""
    try:
        return fn(), None
    except Exception as exc:  # noqa: BLE001 - classified by check_error
        return None, check_error(exc, allowed, what)


@functools.lru_cache(maxsize=1)
def device():
    """One in-process driver Device (the default profile) for every in-process target."""
    from nnhal.driver.device import Device

    return Device()


def uses_shared_memory(value: Model | Request) -> bool:
    """Fuzzed shared-memory names could attach to another process's segment: not executed."""
    return any(isinstance(p, SharedMemory) for p in value.pools)


# ---------------------------------------------------------------------------
# The model pipeline (proto and validation targets)
# ---------------------------------------------------------------------------


def model_pipeline(model: Model, version: HalVersion = HalVersion.V1_3):
    """Validate (nnhal and driver must agree), support, prepare; the prepared model or None."""
    _, structural = attempt(lambda: validate_model(model), INVALID, "validate_model")
    dev = device()
    result, error = attempt(
        lambda: dev.explainSupportedOperations(model, version=version), INVALID, "explain"
    )
    if structural is not None and error is None:
        raise FuzzFailure(
            "wrong", f"the driver accepted a model nnhal.validation rejects: {structural.message}"
        )
    if error is not None:
        return None
    supported, reasons = result
    main_ops = len(model.main.operations)
    if len(supported) != main_ops or set(reasons) != {
        i for i, ok in enumerate(supported) if not ok
    }:
        raise FuzzFailure("wrong", f"support answer {supported} / reasons {sorted(reasons)}")
    if not all(supported) or uses_shared_memory(model):
        return None
    prepared, _ = attempt(
        lambda: dev.prepareModel_1_3(model, version=version), PREPARE, "prepareModel_1_3"
    )
    return prepared


def execute_request(prepared, request: Request, *, loop_timeout_ns: int | None = None,
                    deadline_ns: int | None = None):  # fmt: skip
    """Map the request's pools and execute; (shapes, output views) or the documented error."""
    from nnhal.driver.memory import MappedPools

    if uses_shared_memory(request):
        return None, None
    try:
        with MappedPools(request.pools) as mapped:
            shapes, _ = prepared.execute(
                request,
                mapped.views,
                loop_timeout_ns=FUZZ_LOOP_TIMEOUT_NS
                if loop_timeout_ns is None
                else loop_timeout_ns,
                deadline_ns=deadline_ns,
            )
            return (shapes, [bytes(v) for v in mapped.views]), None
    except Exception as exc:  # noqa: BLE001 - classified by check_error
        return None, check_error(exc, EXECUTE, "execute")


# ---------------------------------------------------------------------------
# Target 1: proto decoding
# ---------------------------------------------------------------------------


@functools.lru_cache(maxsize=64)
def _prepared_seed(index: int):
    from nnhal.tools.fuzz.corpus import seed_models

    seed = seed_models()[index]
    try:
        return device().prepareModel_1_3(seed.model)
    except HalError:
        return None  # a seed this device does not run: requests are only validated


def proto_target(data: bytes) -> None:
    if not data:
        return
    kind = MESSAGE_KINDS[data[0] % len(MESSAGE_KINDS)]
    if kind in _MODEL_DECODERS:
        cls, decode, version = _MODEL_DECODERS[kind]
        try:
            message = cls.FromString(data[1:])
        except DecodeError:
            return  # the gRPC deserializer rejects the call: documented
        try:
            model = decode(message)
        except Exception as exc:
            raise FuzzFailure("crash", f"{kind} decode: {type(exc).__name__}: {exc}") from exc
        model_pipeline(model, version)
        return
    from nnhal.tools.fuzz.corpus import seed_models

    seeds = seed_models()
    index = int.from_bytes(data[1:3].ljust(2, b"\0"), "big") % len(seeds)
    cls, decode = (
        (pb.Request, cv.request_from_pb)
        if kind == "request_1_3"
        else (legacy_pb.V1_0.Request, legacy.request_from_v1_0_pb)
    )
    try:
        message = cls.FromString(data[3:])
    except DecodeError:
        return
    try:
        request = decode(message)
    except Exception as exc:
        raise FuzzFailure("crash", f"{kind} decode: {type(exc).__name__}: {exc}") from exc
    model = seeds[index].model
    _, error = attempt(lambda: validate_request(request, model), INVALID, "validate_request")
    if error is not None or sum(
        len(p.data) for p in request.pools if isinstance(p, InlineMemory)
    ) > (1 << 26):
        return
    prepared = _prepared_seed(index)
    if prepared is not None:
        execute_request(prepared, request)


# ---------------------------------------------------------------------------
# Target 2: validation of semantically random models
# ---------------------------------------------------------------------------


def validation_target(data: bytes) -> None:
    from nnhal.tools.fuzz.corpus import seed_models
    from nnhal.tools.fuzz.models import adapt_inputs, mutate_model, request_for

    d = Draw(data)
    seeds = seed_models()
    seed = seeds[d.int(0, len(seeds) - 1)]
    model = mutate_model(d, seed.model)
    prepared = model_pipeline(model)
    if prepared is None:
        return
    request = request_for(model, adapt_inputs(d, model, seed.inputs))
    _, error = attempt(lambda: validate_request(request, model), INVALID, "validate_request")
    if error is None:
        execute_request(prepared, request)


# ---------------------------------------------------------------------------
# Target 3: op-package loaders
# ---------------------------------------------------------------------------


def loader_target(data: bytes) -> None:
    from nnhal.driver.op_packages import check_types
    from nnhal.driver.op_packages.generator import _generated_module, kernel_source
    from nnhal.driver.op_packages.ini_loader import load_ini
    from nnhal.driver.op_packages.json_loader import load_json
    from nnhal.driver.op_packages.spec import ConfigError, PackageSpec

    if not data:
        return
    syntax = ("xml", "json", "ini")[data[0] % 3]
    body = data[1:]
    try:
        if syntax == "xml":
            from nnhal.driver.op_packages.xml_loader import load_xml

            specs = [load_xml("fuzz.xml", body)]
        elif syntax == "json":
            specs = load_json("fuzz.json", body)
        else:
            specs = [load_ini("fuzz.ini", body)]
        for spec in specs:
            check_types(spec)
    except ConfigError as exc:
        if not exc.detail or not str(exc).startswith("fuzz."):
            raise FuzzFailure("status", f"{syntax}: ConfigError without a located message: {exc}")
        return
    except RecursionError as exc:  # lxml/configparser depth: still not a documented error
        raise FuzzFailure("crash", f"{syntax}: RecursionError: {exc}") from exc
    except Exception as exc:
        raise FuzzFailure("crash", f"{syntax}: {type(exc).__name__}: {exc}") from exc
    for spec in specs:
        try:
            again = PackageSpec.from_dict(spec.to_dict())
            if again != spec:
                raise FuzzFailure("wrong", f"{syntax}: spec does not round-trip through to_dict")
            for backend in (None, *(b.name for b in spec.backends)):
                spec.resolved(backend)
            # generated Python must compile and import (names come from the file)
            exec(compile(_generated_module(spec), "<generated>", "exec"), {})  # noqa: S102
            for op in spec.ops:
                exec(compile(kernel_source(spec, op, None), "<kernel>", "exec"), {})  # noqa: S102
        except FuzzFailure:
            raise
        except Exception as exc:
            raise FuzzFailure(
                "crash", f"{syntax}: a loaded spec breaks later: {type(exc).__name__}: {exc}"
            ) from exc


# ---------------------------------------------------------------------------
# Target 4: nasty graphs, prepared and executed in process
# ---------------------------------------------------------------------------


def graphs_target(data: bytes) -> None:
    from nnhal.tools.fuzz.graphs import nasty_case, spoil
    from nnhal.tools.fuzz.models import request_for

    d = Draw(data)
    case = nasty_case(d)
    if d.bool(35):
        case = spoil(d, case)
    intact = not case.spoiled
    what = f"nasty graph ({'; '.join(case.notes)})"
    prepared, error = attempt(lambda: device().prepareModel_1_3(case.model), PREPARE, what)
    if error is not None:
        if intact:
            raise FuzzFailure("wrong", f"{what}: a valid model was refused: {error}")
        return
    request = request_for(case.model, case.inputs)
    deadline = None
    if case.deadline_in_ns is not None:
        deadline = time.monotonic_ns() + case.deadline_in_ns
    # no loop timeout asked for: the HAL maximum, so a loaded machine cannot fail a valid loop
    timeout = LOOP_TIMEOUT_MAXIMUM_NS if case.loop_timeout_ns is None else case.loop_timeout_ns
    result, error = execute_request(
        prepared, request, loop_timeout_ns=timeout, deadline_ns=deadline
    )
    if case.infinite and not case.spoiled:
        if error is None or error.status not in (S.MISSED_DEADLINE_TRANSIENT,
                                                 S.MISSED_DEADLINE_PERSISTENT):  # fmt: skip
            raise FuzzFailure("wrong", f"{what}: an infinite loop ended with {error or 'NONE'}")
        return
    if case.expected is None:
        return
    timed = case.deadline_in_ns is not None or case.loop_timeout_ns is not None
    if error is not None:
        if timed and error.status in (S.MISSED_DEADLINE_TRANSIENT, S.MISSED_DEADLINE_PERSISTENT):
            return  # a short loop timeout or deadline may expire on a loaded machine
        raise FuzzFailure("wrong", f"{what}: a valid execution failed: {error}")
    shapes, views = result
    for k, (want, arg) in enumerate(zip(case.expected, request.outputs)):
        if tuple(shapes[k].dimensions) != tuple(want.shape):
            raise FuzzFailure("wrong", f"{what}: output {k} shape {shapes[k]} != {want.shape}")
        loc = arg.location
        got = np.frombuffer(views[loc.poolIndex], np.float32, want.size, loc.offset)
        if not np.array_equal(got.reshape(want.shape), want, equal_nan=True):
            raise FuzzFailure("wrong", f"{what}: output {k} {got.tolist()} != {want.tolist()}")


def grpc_target(data: bytes) -> None:
    from nnhal.tools.fuzz.live import grpc_target as run

    run(data)


TARGETS: dict[str, Callable[[bytes], None]] = {
    "proto": proto_target,
    "validation": validation_target,
    "loaders": loader_target,
    "graphs": graphs_target,
    "grpc": grpc_target,
}
