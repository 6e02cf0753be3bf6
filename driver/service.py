"""The gRPC servicers: decode a message, call the driver Device / PreparedModel, encode.

No HAL logic lives here beyond what the wire itself needs:

- server-side objects (prepared models, buffers, sync fences, fenced-execution
  callbacks) are kept in registries and named by random ids; each belongs to
  the client that created it (``client_key``: its session, else its
  connection), and an unknown id or another client's is INVALID_ARGUMENT, the
  same answer in every RPC (docs/security.md);
- a ``HalError`` becomes its status and message in the reply; any other
  exception is a GENERAL_FAILURE with a message, its traceback is logged, and
  the server keeps serving;
- replies whose HAL signature is ``V1_0::ErrorStatus`` downgrade the 1.3-only
  statuses (MISSED_DEADLINE_*, RESOURCE_EXHAUSTED_*) to GENERAL_FAILURE;
- request pools are mapped with ``nnhal.driver.memory`` for the duration of an
  execution (token pools through ``nnhal.driver.buffers.TokenPools``), and the
  contents of the inline pools holding outputs go back in the reply;
- executeFenced validates within the call, then runs at once when its waitFor
  fences have signalled, else in the background (``nnhal.driver.fences``); bursts
  are a bidirectional stream with a memory-slot cache (``nnhal.driver.burst``);
- objects created by a call that names a client session (``nnhal-session``
  metadata) are owned by it and released when it ends (``nnhal.driver.sessions``);
  every execution can be cancelled: by its call ending early (the client
  went away) or by its session ending (``executor.model.Cancel``);
- every call goes through ``hal_method`` (``_service_support``): injected
  faults and latency first (``nnhal.driver.faults``), the call trace after
  (``nnhal.driver.trace``).

``create_server`` / ``serve_forever`` (in ``nnhal.driver.server``) serve one or
several devices.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from typing import Any

import grpc
from nnhal.driver._service_support import ServiceState, hal_method
from nnhal.driver.buffers import TokenPools
from nnhal.driver.burst import BurstSession
from nnhal.driver.executor.model import Cancel
from nnhal.driver.fences import ACTIVE, ERROR, Fence, launch
from nnhal.driver.limits import check_request_pools
from nnhal.driver.memory import MappedPools
from nnhal.driver.sessions import client_key, session_of

from nnhal import DEFAULT_ADDRESS
from nnhal import convert as cv
from nnhal import convert_legacy as legacy
from nnhal._proto.v1_3 import device_pb2 as dpb
from nnhal._proto.v1_3 import device_pb2_grpc as dgrpc
from nnhal._proto.v1_3 import prepared_model_pb2 as ppb
from nnhal._proto.v1_3 import prepared_model_pb2_grpc as pgrpc
from nnhal._proto.v1_3 import types_pb2 as tpb
from nnhal.errors import GeneralFailure, HalError, InvalidArgument, OutputInsufficientSize
from nnhal.types import (
    DeviceStatus,
    ErrorStatus,
    ExecutionPreference,
    HalVersion,
    InlineMemory,
    Model,
    Priority,
    Request,
    TokenMemory,
    is_tensor_type,
)
from nnhal.validation import validate_request

log = logging.getLogger("nnhal.driver.service")

#: Models and inline pools can be large: no gRPC message size limit here (the server
#: takes its limit from the devices' ``max_message_bytes``, ``nnhal.driver.limits.grpc_options``).
GRPC_OPTIONS = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
_NONE = ErrorStatus.NONE
#: waitFence checks this often whether its caller is still there
_WAIT_SLICE_S = 0.1


def _enum_or_int(cls: Any, value: int) -> Any:
    # invalid values go through as ints so the device reports INVALID_ARGUMENT itself
    return cv.enum_or_int(cls, value)


def _cache_args(message: Any) -> dict[str, Any]:
    """modelCache / dataCache (paths per handle) and token of a prepare* message."""
    if message is None or not (message.modelCache or message.dataCache or message.token):
        return {}
    return {
        "modelCache": [tuple(h.paths) for h in message.modelCache],
        "dataCache": [tuple(h.paths) for h in message.dataCache],
        "token": bytes(message.token),
    }


# ---------------------------------------------------------------------------
# IDevice
# ---------------------------------------------------------------------------


class DeviceServicer(dgrpc.IDeviceServicer):
    def __init__(self, state: ServiceState) -> None:
        self.state = state
        self.device = state.device

    # ---- capabilities and simple queries ----

    @hal_method(dpb.GetCapabilitiesReply, v1_0=True)
    def getCapabilities(self, request: Any, context: Any) -> Any:
        caps = legacy.capabilities_to_v1_0_pb(self.device.getCapabilities_1_3())
        return dpb.GetCapabilitiesReply(status=_NONE, capabilities=caps)

    @hal_method(dpb.GetCapabilitiesReply_1_1, v1_0=True)
    def getCapabilities_1_1(self, request: Any, context: Any) -> Any:
        caps = legacy.capabilities_to_v1_1_pb(self.device.getCapabilities_1_3())
        return dpb.GetCapabilitiesReply_1_1(status=_NONE, capabilities=caps)

    @hal_method(dpb.GetCapabilitiesReply_1_2, v1_0=True)
    def getCapabilities_1_2(self, request: Any, context: Any) -> Any:
        caps = legacy.capabilities_to_v1_2_pb(self.device.getCapabilities_1_3())
        return dpb.GetCapabilitiesReply_1_2(status=_NONE, capabilities=caps)

    @hal_method(dpb.GetCapabilitiesReply_1_3)
    def getCapabilities_1_3(self, request: Any, context: Any) -> Any:
        caps = cv.capabilities_to_pb(self.device.getCapabilities_1_3())
        return dpb.GetCapabilitiesReply_1_3(status=_NONE, capabilities=caps)

    @hal_method(dpb.GetStatusReply)
    def getStatus(self, request: Any, context: Any) -> Any:
        status = DeviceStatus.OFFLINE if self.state.faults.offline else self.device.getStatus()
        return dpb.GetStatusReply(status=_NONE, deviceStatus=int(status))

    @hal_method(dpb.GetVersionStringReply, v1_0=True)
    def getVersionString(self, request: Any, context: Any) -> Any:
        return dpb.GetVersionStringReply(status=_NONE, version=self.device.getVersionString())

    @hal_method(dpb.GetTypeReply, v1_0=True)
    def getType(self, request: Any, context: Any) -> Any:
        return dpb.GetTypeReply(status=_NONE, type=int(self.device.getType()))

    @hal_method(dpb.GetSupportedExtensionsReply, v1_0=True)
    def getSupportedExtensions(self, request: Any, context: Any) -> Any:
        extensions = [cv.extension_to_pb(e) for e in self.device.getSupportedExtensions()]
        return dpb.GetSupportedExtensionsReply(status=_NONE, extensions=extensions)

    @hal_method(dpb.GetNumberOfCacheFilesNeededReply, v1_0=True)
    def getNumberOfCacheFilesNeeded(self, request: Any, context: Any) -> Any:
        num_model, num_data = self.device.getNumberOfCacheFilesNeeded()
        cache = getattr(self.device, "cache", None)
        if getattr(cache, "allowed_roots", None) == ():
            # this server takes no client-named cache files (no --cache-root): say so the
            # HAL way, so runtimes do not cache (a token alone still uses --cache-dir)
            num_model, num_data = 0, 0
        return dpb.GetNumberOfCacheFilesNeededReply(
            status=_NONE, numModelCache=num_model, numDataCache=num_data
        )

    # ---- supported operations ----

    def _supported(self, model: Model, version: HalVersion) -> Any:
        supported = self.device.getSupportedOperations_1_3(model, version=version)
        return dpb.GetSupportedOperationsReply(status=_NONE, supportedOperations=list(supported))

    @hal_method(dpb.GetSupportedOperationsReply, v1_0=True)
    def getSupportedOperations(self, request: Any, context: Any) -> Any:
        return self._supported(legacy.model_from_v1_0_pb(request.model), HalVersion.V1_0)

    @hal_method(dpb.GetSupportedOperationsReply, v1_0=True)
    def getSupportedOperations_1_1(self, request: Any, context: Any) -> Any:
        return self._supported(legacy.model_from_v1_1_pb(request.model), HalVersion.V1_1)

    @hal_method(dpb.GetSupportedOperationsReply, v1_0=True)
    def getSupportedOperations_1_2(self, request: Any, context: Any) -> Any:
        return self._supported(legacy.model_from_v1_2_pb(request.model), HalVersion.V1_2)

    @hal_method(dpb.GetSupportedOperationsReply)
    def getSupportedOperations_1_3(self, request: Any, context: Any) -> Any:
        return self._supported(cv.model_from_pb(request.model), HalVersion.V1_3)

    @hal_method(dpb.ExplainSupportedOperationsReply)
    def explainSupportedOperations(self, request: Any, context: Any) -> Any:
        supported, reasons = self.device.explainSupportedOperations(cv.model_from_pb(request.model))
        return dpb.ExplainSupportedOperationsReply(
            status=_NONE,
            supportedOperations=list(supported),
            reasons={int(k): str(v) for k, v in reasons.items()},
        )

    # ---- preparation ----

    def _prepare(
        self,
        model: Model,
        version: HalVersion,
        preference: int = ExecutionPreference.FAST_SINGLE_ANSWER,
        priority: int = Priority.MEDIUM,
        deadline_ns: int | None = None,
        cache: Any = None,
        *,
        context: Any = None,
    ) -> Any:
        # Cache arguments never change the outcome of a preparation (driver/cache.py).
        prepared = self.device.prepareModel_1_3(
            model,
            _enum_or_int(ExecutionPreference, preference),
            _enum_or_int(Priority, priority),
            deadline_ns,
            version=version,
            **_cache_args(cache),
        )
        return self._add_prepared(prepared, context)

    def _add_prepared(self, prepared: Any, context: Any) -> Any:
        owner = session_of(context)
        self.state.sessions.touch(owner)
        # at most max_prepared_models_per_client (driver/occupancy.py)
        key = self.state.prepared_quota.add(client_key(context), prepared, owner=owner)
        return dpb.PrepareModelReply(status=_NONE, preparedModel=key)

    @hal_method(dpb.PrepareModelReply, v1_0=True)
    def prepareModel(self, request: Any, context: Any) -> Any:
        model = legacy.model_from_v1_0_pb(request.model)
        return self._prepare(model, HalVersion.V1_0, context=context)

    @hal_method(dpb.PrepareModelReply, v1_0=True)
    def prepareModel_1_1(self, request: Any, context: Any) -> Any:
        model = legacy.model_from_v1_1_pb(request.model)
        return self._prepare(model, HalVersion.V1_1, request.preference, context=context)

    @hal_method(dpb.PrepareModelReply, v1_0=True)
    def prepareModel_1_2(self, request: Any, context: Any) -> Any:
        model = legacy.model_from_v1_2_pb(request.model)
        return self._prepare(
            model, HalVersion.V1_2, request.preference, cache=request, context=context
        )

    @hal_method(dpb.PrepareModelReply)
    def prepareModel_1_3(self, request: Any, context: Any) -> Any:
        return self._prepare(
            cv.model_from_pb(request.model),
            HalVersion.V1_3,
            request.preference,
            request.priority,
            cv.deadline_ns_from_pb(request.deadline),
            cache=request,
            context=context,
        )

    def _from_cache(self, request: Any, deadline_ns: int | None, context: Any) -> Any:
        cache = getattr(self.device, "cache", None)
        if (
            getattr(cache, "allowed_roots", None) == ()
            and getattr(cache, "cache_dir", None) is None
            and not (request.modelCache or request.dataCache)
        ):
            # getNumberOfCacheFilesNeeded said (0, 0): the HAL's answer for a driver
            # that does not cache
            raise GeneralFailure(
                "prepareModelFromCache: this server does not cache compilations (it takes no "
                "client cache files without --cache-root, and has no --cache-dir)"
            )
        prepared = self.device.prepareModelFromCache_1_3(
            deadline_ns=deadline_ns, **_cache_args(request)
        )
        return self._add_prepared(prepared, context)

    @hal_method(dpb.PrepareModelReply, v1_0=True)
    def prepareModelFromCache(self, request: Any, context: Any) -> Any:
        return self._from_cache(request, None, context)

    @hal_method(dpb.PrepareModelReply)
    def prepareModelFromCache_1_3(self, request: Any, context: Any) -> Any:
        return self._from_cache(request, cv.deadline_ns_from_pb(request.deadline), context)

    # ---- memory domains ----

    @hal_method(dpb.AllocateReply)
    def allocate(self, request: Any, context: Any) -> Any:
        caller = client_key(context)
        prepared = [
            self.state.prepared_models.get(key, f"allocate: preparedModels[{i}]", caller)
            for i, key in enumerate(request.preparedModels)
        ]
        buffer = self.device.allocate(
            desc=cv.buffer_desc_from_pb(request.desc),
            preparedModels=prepared,
            inputRoles=[cv.buffer_role_from_pb(r) for r in request.inputRoles],
            outputRoles=[cv.buffer_role_from_pb(r) for r in request.outputRoles],
        )
        owner = session_of(context)
        self.state.sessions.touch(owner)
        # ids > 0, unique among live buffers
        token = self.state.buffer_quota.add(caller, buffer, owner=owner)
        return dpb.AllocateReply(status=_NONE, buffer=token, token=token)


# ---------------------------------------------------------------------------
# Executions (shared by IPreparedModel's methods)
# ---------------------------------------------------------------------------


def _output_pool_indexes(request: Request) -> list[int]:
    indexes = {
        arg.location.poolIndex
        for arg in request.outputs
        if not arg.hasNoValue and arg.location.poolIndex < len(request.pools)
    }
    return sorted(i for i in indexes if isinstance(request.pools[i], InlineMemory))


def _check_fenced_outputs(model: Model, request: Request) -> None:
    """executeFenced has no dynamic output shapes: every output must be fully specified."""
    main = model.main
    for i, (arg, index) in enumerate(zip(request.outputs, main.outputIndexes)):
        operand = main.operands[index]
        if arg.hasNoValue or not is_tensor_type(operand.type):
            continue
        dims = tuple(arg.dimensions) or tuple(operand.dimensions)
        if not dims or not all(d > 0 for d in dims):
            raise InvalidArgument(
                f"executeFenced: output {i} (operand {index}) has dimensions {list(dims)}; a "
                "fenced execution needs fully specified, non-zero-sized outputs"
            )


def execute(
    state: ServiceState,
    prepared: Any,
    request: Request,
    *,
    measure: bool,
    deadline_ns: int | None = None,
    loop_timeout_ns: int | None = None,
    allow_unspecified_output: bool = True,
    premapped: dict[int, memoryview] | None = None,
    cancel: Cancel | None = None,
    slot_held: bool = False,
    caller: str | None = None,
) -> ppb.ExecuteReply:
    """Map the pools, run, and build the reply (HalErrors propagate).

    ``premapped``: views for some pools mapped already (burst memory slots).
    ``cancel``: stops the run from another thread (``cancellable``).
    The execution takes one of the device's execution slots (``max_concurrent_executions``)
    unless ``slot_held`` (a fenced execution holds one from its call on).
    ``caller``: the client (``client_key``) whose driver buffers the request may name.
    """
    check_request_pools(request, state.limits)
    args = (
        measure,
        deadline_ns,
        loop_timeout_ns,
        allow_unspecified_output,
        premapped,
        cancel,
        caller,
    )
    if slot_held:
        return _execute(state, prepared, request, *args)
    with state.executions.slot():
        return _execute(state, prepared, request, *args)


def _execute(
    state: ServiceState,
    prepared: Any,
    request: Request,
    measure: bool,
    deadline_ns: int | None,
    loop_timeout_ns: int | None,
    allow_unspecified_output: bool,
    premapped: dict[int, memoryview] | None,
    cancel: Cancel | None,
    caller: str | None,
) -> ppb.ExecuteReply:
    tokens = None
    if any(isinstance(pool, TokenMemory) for pool in request.pools):
        # as the sample driver: validateRequest (token 0 is INVALID_ARGUMENT, VTS
        # InvalidToken), then the driver buffers' roles and state
        validate_request(request, prepared.model, allow_unspecified_output=allow_unspecified_output)
        tokens = TokenPools(
            prepared, request, lambda key, what: state.buffers.get(key, what, caller)
        )
        request = tokens.request
    if tokens:
        premapped = {**(premapped or {}), **{p: tokens.view(p) for p in tokens.buffers}}
    with MappedPools(request.pools, premapped) as mapped:
        try:
            shapes, timing = prepared.execute(
                request,
                mapped.views,
                measure=measure,
                deadline_ns=deadline_ns,
                loop_timeout_ns=loop_timeout_ns,
                allow_unspecified_output=allow_unspecified_output,
                cancel=cancel,
            )
        except OutputInsufficientSize as exc:
            if tokens is not None:
                tokens.finish(None)
                if any(not exc.shapes[i].isSufficient for i, _ in tokens.outputs):
                    raise GeneralFailure(
                        f"{exc.message} (a driver buffer output: its dimensions were wrong)"
                    ) from exc
            raise
        except HalError:
            if tokens is not None:
                tokens.finish(None)
            raise
        if tokens is not None:
            tokens.finish(shapes)
        pools = [
            tpb.PoolContents(poolIndex=i, data=bytes(mapped.views[i]))
            for i in _output_pool_indexes(request)
        ]
    return ppb.ExecuteReply(
        status=_NONE,
        outputShapes=[cv.output_shape_to_pb(s) for s in shapes],
        timing=cv.timing_to_pb(timing),
        outputPools=pools,
    )


@contextlib.contextmanager
def cancellable(state: ServiceState, context: Any, session: str | None = None) -> Iterator[Cancel]:
    """A ``Cancel`` for one execution, fired when the call ends before the execution does
    (the client cancelled or went away: gRPC runs the callback at the call's end) and when
    the call's client session ends. ``context`` None: the session only (fenced runs in the
    background outlive their call)."""
    cancel = Cancel()
    if context is not None:
        session = session_of(context)
        context.add_callback(lambda: cancel.cancel("the call ended: the client went away"))
    with state.sessions.running(session, cancel):
        yield cancel


# ---------------------------------------------------------------------------
# IPreparedModel, IBuffer, IFencedExecutionCallback
# ---------------------------------------------------------------------------


class PreparedModelServicer(pgrpc.IPreparedModelServicer):
    def __init__(self, state: ServiceState) -> None:
        self.state = state

    def _model(self, key: int, context: Any) -> Any:
        return self.state.prepared_models.get(key, None, client_key(context))

    @hal_method(ppb.ExecuteReply, v1_0=True)
    def execute(self, request: Any, context: Any) -> Any:
        prepared = self._model(request.preparedModel, context)
        hal_request = legacy.request_from_v1_0_pb(request.request)
        with cancellable(self.state, context) as cancel:
            return execute(
                self.state,
                prepared,
                hal_request,
                measure=False,
                cancel=cancel,
                caller=client_key(context),
            )

    @hal_method(ppb.ExecuteReply, v1_0=True)
    def execute_1_2(self, request: Any, context: Any) -> Any:
        prepared = self._model(request.preparedModel, context)
        hal_request = legacy.request_from_v1_0_pb(request.request)
        with cancellable(self.state, context) as cancel:
            return execute(
                self.state,
                prepared,
                hal_request,
                measure=request.measure == tpb.MEASURE_TIMING_YES,
                cancel=cancel,
                caller=client_key(context),
            )

    @hal_method(ppb.ExecuteReply, v1_0=True)
    def executeSynchronously(self, request: Any, context: Any) -> Any:
        return PreparedModelServicer.execute_1_2.__wrapped__(self, request, context)

    @hal_method(ppb.ExecuteReply)
    def execute_1_3(self, request: Any, context: Any) -> Any:
        prepared = self._model(request.preparedModel, context)
        hal_request = cv.request_from_pb(request.request)
        with cancellable(self.state, context) as cancel:
            return execute(
                self.state,
                prepared,
                hal_request,
                measure=request.measure == tpb.MEASURE_TIMING_YES,
                deadline_ns=cv.deadline_ns_from_pb(request.deadline),
                loop_timeout_ns=cv.timeout_ns_from_pb(request.loopTimeoutDuration),
                cancel=cancel,
                caller=client_key(context),
            )

    @hal_method(ppb.ExecuteReply)
    def executeSynchronously_1_3(self, request: Any, context: Any) -> Any:
        return PreparedModelServicer.execute_1_3.__wrapped__(self, request, context)

    @hal_method(ppb.ExecuteFencedReply)
    def executeFenced(self, request: Any, context: Any) -> Any:
        prepared = self._model(request.preparedModel, context)
        caller = client_key(context)
        waits = []
        for i, key in enumerate(request.waitFor):
            fence = self.state.fences.get(key, f"executeFenced: waitFor[{i}]", caller)
            if fence.state == ERROR:
                raise InvalidArgument(f"executeFenced: waitFor[{i}] (fence {key}) is in error")
            waits.append(fence)
        hal_request = cv.request_from_pb(request.request)
        # validated now, before any waiting: errors are the call's own status
        _check_fenced_outputs(prepared.model, hal_request)
        validate_request(hal_request, prepared.model, allow_unspecified_output=False)
        check_request_pools(hal_request, self.state.limits)
        loop_timeout_ns = cv.timeout_ns_from_pb(request.loopTimeoutDuration)
        measure = request.measure == tpb.MEASURE_TIMING_YES
        owner = session_of(context)
        self.state.sessions.touch(owner)

        def run(deadline_ns: int | None) -> Any:
            try:
                # in the background it outlives this call: only its session can cancel it
                with cancellable(self.state, None, owner) as cancel:
                    return execute(
                        self.state,
                        prepared,
                        hal_request,
                        measure=measure,
                        deadline_ns=deadline_ns,
                        loop_timeout_ns=loop_timeout_ns,
                        allow_unspecified_output=False,
                        cancel=cancel,
                        slot_held=True,
                        caller=caller,
                    )
            except OutputInsufficientSize as exc:
                raise InvalidArgument(
                    f"executeFenced: {exc.message} (fenced executions need sufficient outputs)"
                ) from exc

        # the execution holds a slot from now on, while it waits too
        self.state.executions.acquire()
        record, reply = launch(
            run,
            waits,
            measure=measure,
            deadline_ns=cv.deadline_ns_from_pb(request.deadline),
            duration_ns=cv.timeout_ns_from_pb(request.duration),
            new_fence=lambda fence: self.state.fences.add(fence, owner=owner, holder=caller),
            on_done=self.state.executions.release,
        )
        callback = self.state.fenced_executions.add(record, owner=owner, holder=caller)
        return ppb.ExecuteFencedReply(
            status=_NONE,
            syncFence=record.fence_id,
            callback=callback,
            outputPools=[] if reply is None else reply.outputPools,
        )

    def configureExecutionBurst(
        self, request_iterator: Iterator[Any], context: grpc.ServicerContext
    ) -> Iterator[Any]:
        burst = _Burst(self.state, execute, caller=client_key(context))
        # one Cancel for the stream: bursts carry no deadline, and once the stream is
        # gone (the client went away, or its session ended) nothing in it should run on
        with cancellable(self.state, context) as cancel:
            burst.cancel = cancel
            try:
                for message in request_iterator:
                    yield burst.run(message, context)
            finally:
                burst.close()

    @hal_method(ppb.StatusReply)
    def release(self, request: Any, context: Any) -> Any:
        self.state.prepared_models.pop(request.id, client_key(context), "release")
        return ppb.StatusReply(status=_NONE)


class _Burst(BurstSession):
    """A BurstSession whose run gives a reply with a HAL status for every message."""

    @hal_method(ppb.ExecuteReply, v1_0=True)
    def run(self, message: Any, context: Any) -> Any:  # type: ignore[override]
        return BurstSession.run(self, message)


class BufferServicer(pgrpc.IBufferServicer):
    def __init__(self, state: ServiceState) -> None:
        self.state = state

    @hal_method(ppb.CopyToReply)
    def copyTo(self, request: Any, context: Any) -> Any:
        buffer = self.state.buffers.get(request.buffer, "copyTo", client_key(context))
        dst = cv.memory_from_pb(request.dst)
        with MappedPools([dst]) as mapped:
            buffer.copyTo(mapped.views[0])
            data = bytes(mapped.views[0]) if isinstance(dst, InlineMemory) else b""
        return ppb.CopyToReply(status=_NONE, data=data)

    @hal_method(ppb.StatusReply)
    def copyFrom(self, request: Any, context: Any) -> Any:
        buffer = self.state.buffers.get(request.buffer, "copyFrom", client_key(context))
        with MappedPools([cv.memory_from_pb(request.src)]) as mapped:
            buffer.copyFrom(mapped.views[0], tuple(request.dimensions))
        return ppb.StatusReply(status=_NONE)

    @hal_method(ppb.StatusReply)
    def release(self, request: Any, context: Any) -> Any:
        self.state.buffers.pop(request.id, client_key(context), "release")
        return ppb.StatusReply(status=_NONE)


class FencedExecutionCallbackServicer(pgrpc.IFencedExecutionCallbackServicer):
    def __init__(self, state: ServiceState) -> None:
        self.state = state

    @hal_method(ppb.GetExecutionInfoReply)
    def getExecutionInfo(self, request: Any, context: Any) -> Any:
        record = self.state.fenced_executions.get(
            request.callback, "getExecutionInfo", client_key(context)
        )
        status, message, launched, fenced, pools = record.info()
        reply = ppb.GetExecutionInfoReply(
            status=int(status),
            message=message,
            timingLaunched=cv.timing_to_pb(launched),
            timingFenced=cv.timing_to_pb(fenced),
        )
        reply.outputPools.extend(pools)
        return reply

    @hal_method(ppb.StatusReply)
    def release(self, request: Any, context: Any) -> Any:
        caller = client_key(context)
        record = self.state.fenced_executions.pop(request.id, caller, "release")
        try:
            self.state.fences.pop(record.fence_id, caller)
        except InvalidArgument:
            pass  # already released or evicted
        return ppb.StatusReply(status=_NONE)


class SyncFenceServicer(pgrpc.ISyncFenceServicer):
    """nnhal extension: sync fences the client creates, signals and waits for."""

    def __init__(self, state: ServiceState) -> None:
        self.state = state

    def _reply(self, key: int, fence: Fence) -> Any:
        return ppb.FenceReply(status=_NONE, fence=key, state=fence.state)

    @hal_method(ppb.FenceReply)
    def createFence(self, request: Any, context: Any) -> Any:
        fence = Fence(client_created=True)
        owner = session_of(context)
        self.state.sessions.touch(owner)
        key = self.state.fences.add(fence, owner=owner, holder=client_key(context))
        return self._reply(key, fence)

    @hal_method(ppb.StatusReply)
    def signalFence(self, request: Any, context: Any) -> Any:
        fence = self.state.fences.get(request.fence, "signalFence", client_key(context))
        if not fence.client_created:
            raise InvalidArgument(
                f"signalFence: fence {request.fence} belongs to a fenced execution; only fences "
                "from createFence are signalled by the client"
            )
        if not fence.signal(request.fenceStatus == _NONE):
            raise InvalidArgument(f"signalFence: fence {request.fence} has already signalled")
        return ppb.StatusReply(status=_NONE)

    @hal_method(ppb.FenceReply)
    def waitFence(self, request: Any, context: Any) -> Any:
        fence = self.state.fences.get(request.fence, "waitFence", client_key(context))
        # Wait no longer than the call lives: a client that gave up (its deadline, a
        # cancel, a dead process) must not hold a server thread for up to 49 days.
        end = time.monotonic() + request.timeoutMs / 1000
        remaining = context.time_remaining() if context is not None else None
        if remaining is not None:
            end = min(end, time.monotonic() + max(0.0, remaining))
        while fence.state == ACTIVE and (context is None or context.is_active()):
            left = end - time.monotonic()
            if left <= 0:
                break
            fence.wait(min(left, _WAIT_SLICE_S))
        return self._reply(request.fence, fence)

    @hal_method(ppb.StatusReply)
    def release(self, request: Any, context: Any) -> Any:
        fence = self.state.fences.pop(request.id, client_key(context), "release")
        fence.signal(False)  # an unsignalled fence released: waiters see an error
        return ppb.StatusReply(status=_NONE)


# ---------------------------------------------------------------------------
# Servers
# ---------------------------------------------------------------------------


def create_server(
    device: Any, address: str = "127.0.0.1:0", max_workers: int = 16
) -> tuple[Any, str]:
    """Start a gRPC server for ``device`` (or a list of devices); see driver/server.py."""
    from nnhal.driver.server import create_server as create

    return create(device, address, max_workers)


def serve_forever(
    device: Any, address: str = DEFAULT_ADDRESS, max_workers: int = 16, **kw: Any
) -> None:
    """Serve ``device`` (or a list of devices) until SIGINT/SIGTERM; see driver/server.py."""
    from nnhal.driver.server import serve_forever as serve

    serve(device, address, max_workers, **kw)
