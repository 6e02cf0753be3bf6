"""What the gRPC servicers share: object registries and the HAL-status error mapping.

- ``Registry``: server-side objects (prepared models, buffers, sync fences,
  fenced-execution callbacks) named by random ids > 0, each visible only to
  the client that created it; an unknown id, 0, or another client's id is
  INVALID_ARGUMENT with the same message.
- ``hal_method``: turns what a servicer method raises into its reply: a
  ``HalError`` gives its status and message, anything else GENERAL_FAILURE
  with the exception named (traceback logged, the server keeps serving);
  timings are "not measured"; replies typed ``V1_0::ErrorStatus`` in the HAL
  downgrade the 1.3-only statuses to GENERAL_FAILURE. Before the call it
  applies the device's injected faults and latency (``nnhal.driver.faults``; the
  latency is also added to a measured Timing), after it records the call in
  the device's trace (``nnhal.driver.trace``).
- ``ServiceState``: one device, its registries, faults and trace, and its
  resource limits (``nnhal.driver.limits``): per-client quotas of prepared models
  and buffers, running executions (``nnhal.driver.occupancy``). A model message
  over the size limits is refused before it is decoded; a MemoryError is
  RESOURCE_EXHAUSTED_TRANSIENT.
"""

from __future__ import annotations

import functools
import logging
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import grpc
from nnhal.driver.executor.code_cache import drop_owner, reset_owner, set_owner
from nnhal.driver.faults import FaultSet, insufficient, model_operations
from nnhal.driver.fences import Fence, FencedExecution
from nnhal.driver.limits import check_model_size, limits_of, message_subgraphs
from nnhal.driver.memory import drop_frames
from nnhal.driver.occupancy import ClientQuota, ExecutionSlots
from nnhal.driver.sessions import SessionTable
from nnhal.driver.trace import Trace
from nnhal.driver.workers import ExecutionPool

from nnhal import convert as cv
from nnhal._proto.v1_3 import types_pb2 as tpb
from nnhal.control import DEVICE_HEADER, SESSION_HEADER
from nnhal.errors import HalError, InvalidArgument, OutputInsufficientSize, ResourceExhausted
from nnhal.types import NO_TIMING, ErrorStatus, Model

log = logging.getLogger("nnhal.driver.service")

#: Sync fences and fenced-execution callbacks kept at most (oldest dropped first):
#: clients that never call IFencedExecutionCallback.release must not grow the server forever.
MAX_FENCED_EXECUTIONS = 4096

_V1_3_ONLY = frozenset(
    {
        ErrorStatus.MISSED_DEADLINE_TRANSIENT,
        ErrorStatus.MISSED_DEADLINE_PERSISTENT,
        ErrorStatus.RESOURCE_EXHAUSTED_TRANSIENT,
        ErrorStatus.RESOURCE_EXHAUSTED_PERSISTENT,
    }
)
_TIMING_TYPE = tpb.Timing.DESCRIPTOR

T = TypeVar("T")


# ---------------------------------------------------------------------------
# Server-side objects
# ---------------------------------------------------------------------------


class Registry(Generic[T]):
    """Objects named by random ids > 0 (0 is null), each held by one client. Thread-safe.

    Ids are random ``bits``-bit values (64 by default; driver buffers use 32, the
    HAL's token width), never reused while live, so they say nothing about other
    clients' objects. ``holder`` is the client that created an object
    (``nnhal.driver.sessions.client_key``: its session, else its connection);
    ``get`` with another ``caller`` answers exactly what an unknown id answers.
    ``owner`` is the session whose end releases the object (None: no session).
    """

    def __init__(
        self,
        kind: str,
        capacity: int | None = None,
        on_evict: Callable[[T], object] | None = None,
        *,
        bits: int = 64,
    ) -> None:
        self.kind = kind
        self.capacity = capacity
        self.bits = bits
        self._on_evict = on_evict
        self._objects: OrderedDict[int, T] = OrderedDict()
        self._holder_of: dict[int, str | None] = {}
        self._owner_of: dict[int, str] = {}
        self._owned: dict[str, set[int]] = {}
        self._lock = threading.Lock()

    def _new_key(self) -> int:  # with the lock held
        while True:
            key = secrets.randbits(self.bits)
            if key and key not in self._objects:
                return key

    def add(
        self,
        obj: T,
        key: int | None = None,
        owner: str | None = None,
        *,
        holder: str | None = None,
    ) -> int:
        with self._lock:
            key = self._new_key() if key is None else key
            self._objects[key] = obj
            self._holder_of[key] = holder
            if owner is not None:
                self._owner_of[key] = owner
                self._owned.setdefault(owner, set()).add(key)
            evicted = []
            if self.capacity is not None:
                while len(self._objects) > self.capacity:
                    oldest, old = self._objects.popitem(last=False)
                    self._disown(oldest)
                    evicted.append(old)
        if self._on_evict is not None:
            for old in evicted:
                self._on_evict(old)
        return key

    def _disown(self, key: int) -> None:  # with the lock held
        self._holder_of.pop(key, None)
        owner = self._owner_of.pop(key, None)
        if owner is not None:
            keys = self._owned.get(owner)
            if keys is not None:
                keys.discard(key)
                if not keys:
                    del self._owned[owner]

    def _visible(self, key: int, caller: str | None) -> T | None:  # with the lock held
        obj = self._objects.get(key)
        if obj is None or caller is None:
            return obj
        # another client's object is answered as if it did not exist
        return obj if self._holder_of.get(key) == caller else None

    def get(self, key: int, what: str | None, caller: str | None) -> T:
        """The object ``key`` as ``caller`` may see it, else INVALID_ARGUMENT.

        ``caller`` None: the server itself (no holder check)."""
        with self._lock:
            obj = self._visible(key, caller)
        if obj is None:
            label = what or self.kind
            if key == 0:
                raise InvalidArgument(f"{label}: null {self.kind} (id 0)")
            raise InvalidArgument(f"{label}: unknown {self.kind} id {key}")
        return obj

    def peek(self, key: int) -> T | None:
        """The object or None (no error, no holder check: for the server's own use)."""
        with self._lock:
            return self._objects.get(key)

    def pop(self, key: int, caller: str | None, what: str | None = None) -> T:
        """Remove ``key`` if ``caller`` holds it (as ``get``); returns the object."""
        with self._lock:
            obj = self._visible(key, caller)
            if obj is not None:
                self._objects.pop(key, None)
                self._disown(key)
        if obj is None:
            self.get(key, what, caller)  # raises the unknown-id error
        return obj  # type: ignore[return-value]

    def take_owned(self, owner: str) -> list[tuple[int, T]]:
        """Remove and return every object ``owner`` holds (its session ended)."""
        with self._lock:
            keys = sorted(self._owned.pop(owner, ()))
            taken = []
            for key in keys:
                self._owner_of.pop(key, None)
                self._holder_of.pop(key, None)
                obj = self._objects.pop(key, None)
                if obj is not None:
                    taken.append((key, obj))
            return taken

    def owned(self, owner: str) -> int:
        with self._lock:
            return len(self._owned.get(owner, ()))

    def __len__(self) -> int:
        with self._lock:
            return len(self._objects)

    def values(self) -> list[T]:
        """A snapshot of the live objects."""
        with self._lock:
            return list(self._objects.values())


class ServiceState:
    """The driver Device and the objects clients have created on it.

    ``sessions``: the server's client sessions (shared by its devices); a
    ServiceState made alone gets its own table. ``pool``: the server's execution
    workers (``nnhal.driver.workers``), shared by its devices."""

    def __init__(
        self, device: Any, sessions: SessionTable | None = None, pool: ExecutionPool | None = None
    ) -> None:
        self.device = device
        #: the server's execution worker processes (None: executions run in the server)
        self.pool = pool
        self.sessions = sessions if sessions is not None else SessionTable(self.release_session)
        profile = getattr(device, "profile", None)
        self.faults = FaultSet(getattr(profile, "faults", None))
        self.trace = Trace()
        self.prepared_models: Registry[Any] = Registry("prepared model")
        # IBuffer ids are the buffers' tokens (uint32 in the HAL's MemoryPool).
        self.buffers: Registry[Any] = Registry("buffer", bits=32)
        # an evicted fence can no longer be signalled: executions waiting for it must end
        self.fences: Registry[Fence] = Registry(
            "sync fence", MAX_FENCED_EXECUTIONS, on_evict=lambda fence: fence.signal(False)
        )
        self.fenced_executions: Registry[FencedExecution] = Registry(
            "fenced execution callback", MAX_FENCED_EXECUTIONS
        )
        # resource limits (driver/limits.py, driver/occupancy.py)
        self.limits = limits_of(device)
        self.executions = ExecutionSlots(
            self.limits.max_concurrent_executions, getattr(device, "name", "")
        )
        self.prepared_quota = ClientQuota(
            self.prepared_models,
            self.limits.max_prepared_models_per_client,
            "prepared models",
            "max_prepared_models_per_client",
        )
        self.buffer_quota = ClientQuota(
            self.buffers, self.limits.max_buffers_per_client, "buffers", "max_buffers_per_client"
        )

    def release_session(self, session: str, reason: str = "") -> int:
        """Release every object ``session`` owns on this device; how many there were.

        Unsignalled fences it created go to ERROR (executions waiting for them
        end), as if the client had released them."""
        released = 0
        for _key, record in self.fenced_executions.take_owned(session):
            released += 1
            try:
                self.fences.pop(record.fence_id, None)
            except InvalidArgument:
                pass  # already gone
        for _key, fence in self.fences.take_owned(session):
            released += 1
            fence.signal(False)
        released += len(self.buffers.take_owned(session))
        released += len(self.prepared_models.take_owned(session))
        # what was kept to prepare this client's models faster goes too (not counted:
        # no object of the client's)
        owner = f"session:{session}"
        analyses = getattr(self.device, "analyses", None)
        if analyses is not None:
            analyses.drop_owner(owner)
        drop_owner(owner)
        return released


# ---------------------------------------------------------------------------
# Error handling
# ---------------------------------------------------------------------------


def downgrade(status: ErrorStatus, message: str) -> tuple[ErrorStatus, str]:
    """A 1.3-only status in a reply typed V1_0::ErrorStatus becomes GENERAL_FAILURE."""
    if status in _V1_3_ONLY:
        return ErrorStatus.GENERAL_FAILURE, f"{message} [{status.name} reported as GENERAL_FAILURE]"
    return status, message


def error_reply(reply_cls: Any, status: ErrorStatus, message: str, error: Exception) -> Any:
    reply = reply_cls(status=int(status), message=message)
    fields = reply_cls.DESCRIPTOR.fields_by_name
    # Timing is {UINT64_MAX, UINT64_MAX} unless measured on success (proto's default is 0).
    for field in reply_cls.DESCRIPTOR.fields:
        if field.message_type is _TIMING_TYPE:
            getattr(reply, field.name).CopyFrom(cv.timing_to_pb(NO_TIMING))
    if (
        isinstance(error, OutputInsufficientSize)
        and status == ErrorStatus.OUTPUT_INSUFFICIENT_SIZE
        and "outputShapes" in fields
    ):
        reply.outputShapes.extend(cv.output_shape_to_pb(s) for s in error.shapes)
    return reply


_UINT64_MAX = (1 << 64) - 1


# ---------------------------------------------------------------------------
# Calls: the device, session and client of one HAL call
# ---------------------------------------------------------------------------


@dataclass(slots=True)
class Call:
    """What a servicer method needs to know about its call, read once from the metadata.

    ``state``: the device the call is for; ``session``: its ``nnhal-session`` (None:
    none); ``caller``: the client for ownership and quotas (``sessions.client_key``:
    ``session:ID``, else ``peer:ADDRESS``); ``context``: the gRPC context (None when a
    servicer is called in-process)."""

    state: ServiceState
    context: grpc.ServicerContext | None
    session: str | None
    caller: str


class Devices:
    """The devices of one server by name; ``call`` resolves the one a call names
    (``nnhal-device``; none: the first), or aborts it with gRPC NOT_FOUND."""

    def __init__(self, states: Mapping[str, ServiceState]) -> None:
        if not states:
            raise ValueError("no device to serve")
        self.states = dict(states)
        self.default = next(iter(self.states))

    def call(self, context: grpc.ServicerContext | None) -> Call:
        name, session = self.default, None
        if context is None:
            return Call(self.states[name], None, None, "peer:unknown")
        found_session = False
        for key, value in context.invocation_metadata() or ():
            if key == DEVICE_HEADER:
                name = value  # the last one counts
            elif key == SESSION_HEADER and not found_session:
                session, found_session = value or None, True  # the first one counts
        state = self.states.get(name)
        if state is None:
            # a transport-level "no such service", as the Android service manager answers
            # for a missing instance (raises: grpc ends the call)
            context.abort(
                grpc.StatusCode.NOT_FOUND,
                f"no device {name!r} on this server (devices: {', '.join(self.states)})",
            )
        if session is not None:
            caller = f"session:{session}"
        else:
            caller = f"peer:{context.peer() or 'unknown'}"
        return Call(state, context, session, caller)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------
# Fault injection, model size, trace: around every HAL method
# ---------------------------------------------------------------------------


def _call_model(servicer: Any, state: ServiceState, request: Any) -> Model | None:
    """The nnhal Model a call is about (prepared model of an execution), or None."""
    prepared = getattr(servicer, "prepared", None)  # a burst stream, once bound
    key = getattr(request, "preparedModel", 0) if hasattr(request, "preparedModel") else 0
    if prepared is None and isinstance(key, int) and key:
        prepared = state.prepared_models.peek(key)
    return getattr(prepared, "model", None)


def _operations(servicer: Any, state: ServiceState, request: Any) -> Any:
    if hasattr(request, "model") and request.HasField("model"):
        msg = request.model
        subgraphs = [msg.main, *msg.referenced] if hasattr(msg, "main") else [msg]
        return [
            (op.type, sub.operands[op.inputs[0]].type if op.inputs else None)
            for sub in subgraphs
            for op in sub.operations
            if not op.inputs or op.inputs[0] < len(sub.operands)
        ]
    model = _call_model(servicer, state, request)
    return None if model is None else model_operations(model)


def _inject(servicer: Any, state: ServiceState, method: str, request: Any) -> tuple[Any, float]:
    """Apply the device's faults to this call: (injected error or None, latency µs)."""
    faults = state.faults
    ops = _operations(servicer, state, request) if faults.rules else None
    error, latency_us = faults.check(method, ops, state.device.getCapabilities_1_3())
    if latency_us:
        time.sleep(latency_us / 1e6)
    if error is not None and error.status == ErrorStatus.OUTPUT_INSUFFICIENT_SIZE:
        model = _call_model(servicer, state, request)
        if model is not None:
            shaped = insufficient(model, error.message)
            shaped.rule = getattr(error, "rule", None)
            error = shaped
    return error, latency_us


def _add_latency(reply: Any, latency_us: float) -> None:
    timing = getattr(reply, "timing", None)
    if timing is None or not latency_us or timing.timeOnDevice == _UINT64_MAX:
        return
    timing.timeOnDevice += int(latency_us)
    timing.timeInDriver += int(latency_us)


#: A servicer method's body: (servicer, call, request message) -> reply message.
Body = Callable[[Any, Any, Any], Any]


@dataclass(frozen=True, slots=True)
class HalMethod:
    """How the HAL wraps one servicer method body (``hal_method``): its reply type, its
    name in the trace and fault rules, whether the reply is typed ``V1_0::ErrorStatus``,
    and whether its request carries a model (checked against the size limits first)."""

    body: Body
    reply: Any
    name: str
    v1_0: bool
    model: bool

    def __call__(self, servicer: Any, call: Call | None, request: Any) -> Any:
        """The reply to ``request``: never raises (a HalError is its status)."""
        if call is None or call.session is None:
            return self._served(servicer, call, request)
        # the client is being served: its lease cannot run out meanwhile (a long call is no
        # sign it went away); started / ended without a context manager on every call
        sessions, session = call.state.sessions, call.session
        sessions.call_started(session)
        try:
            return self._served(servicer, call, request)
        finally:
            sessions.call_ended(session)

    def _served(self, servicer: Any, call: Call | None, request: Any) -> Any:
        state = None if call is None else call.state
        started, t0 = time.time(), time.perf_counter()
        injected, latency_us, reply = None, 0.0, None
        try:
            if state is not None:
                faults = state.faults
                if faults.rules or faults.offline:
                    error, latency_us = _inject(servicer, state, self.name, request)
                    if error is not None:
                        injected = getattr(error, "rule", "offline")
                        raise error
                if self.model and request.HasField("model"):
                    # the one model-size check of a call: before decoding, so that a huge
                    # model is not built in memory first (the device is told it was done)
                    check_model_size(state.limits, message_subgraphs(request.model))
            if self.model and call is not None:
                # what is kept to prepare faster is this client's alone (code_cache)
                owner = set_owner(call.caller)
                try:
                    reply = self.body(servicer, call, request)
                finally:
                    reset_owner(owner)
            else:
                reply = self.body(servicer, call, request)
            if latency_us:
                _add_latency(reply, latency_us)
        except HalError as exc:
            status, message = ErrorStatus(exc.status), exc.message or str(exc)
            error: Exception = exc
        except MemoryError as exc:
            status = ErrorStatus.RESOURCE_EXHAUSTED_TRANSIENT
            message = f"{self.body.__name__}: out of memory: {exc}"
            error = ResourceExhausted(message, transient=True)
        except Exception as exc:  # a bug: report it, keep serving
            log.exception("%s failed", self.body.__name__)
            status = ErrorStatus.GENERAL_FAILURE
            message = f"{self.body.__name__}: internal error: {type(exc).__name__}: {exc}"
            error = exc
        if reply is None:
            if self.v1_0:
                status, message = downgrade(status, message)
            reply = error_reply(self.reply, status, message, error)
            # the error, its traceback and this frame form a cycle that would hold
            # the failed call's tensors until the cyclic collector runs: break it now
            drop_frames(error)
            error.__traceback__ = None
            del error
        if state is not None:
            state.trace.record(
                self.name,
                request,
                started,
                (time.perf_counter() - t0) * 1000,
                reply.status,
                reply.message,
                injected,
                latency_us,
            )
        return reply


def hal_method(
    reply_cls: Any, *, v1_0: bool = False, name: str | None = None, model: bool = False
) -> Callable[[Body], Callable[[Any, Any, grpc.ServicerContext], Any]]:
    """Make a servicer method body ``(self, call, request) -> reply`` the gRPC method
    ``(self, request, context) -> reply``: the call's device and client resolved once
    (``self.devices``, a ``Devices``), the device's injected faults and latency applied
    first, exceptions turned into a reply with a HAL status, the call recorded in the
    device's trace. ``name``: the method's name in the trace and in fault rules (default:
    the function's); ``v1_0``: the reply is typed ``V1_0::ErrorStatus``; ``model``: the
    request carries a model, checked against the size limits before it is decoded. The
    body itself stays reachable as ``.hal`` (another method may answer with it)."""

    def decorate(fn: Body) -> Callable[[Any, Any, grpc.ServicerContext], Any]:
        method = HalMethod(fn, reply_cls, name or fn.__name__, v1_0, model)

        @functools.wraps(fn)
        def grpc_method(self: Any, request: Any, context: grpc.ServicerContext) -> Any:
            devices = getattr(self, "devices", None)
            return method(self, None if devices is None else devices.call(context), request)

        grpc_method.hal = method  # type: ignore[attr-defined]
        return grpc_method

    return decorate
