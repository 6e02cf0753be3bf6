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
from collections.abc import Hashable, Iterator
from typing import Any

import grpc
from nnhal.driver._service_support import Call, Devices, HalMethod, ServiceState, hal_method
from nnhal.driver.buffers import TokenPools
from nnhal.driver.burst import BurstSession
from nnhal.driver.execution_plans import (
    execute_reply,
    find_plan,
    output_pool_indexes,
    plan_key,
    remember_plan,
    run_planned,
)
from nnhal.driver.executor.model import Cancel
from nnhal.driver.fences import ACTIVE, ERROR, Fence, launch
from nnhal.driver.limits import check_request_pools
from nnhal.driver.memory import MappedPools
from nnhal.driver.prepared_model import PreparedModel
from nnhal.driver.request_layouts import decode_request, validate_once
from nnhal.driver.workers import pooled

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

log = logging.getLogger("nnhal.driver.service")

#: Models and inline pools can be large: no gRPC message size limit here (the server
#: takes its limit from the devices' ``max_message_bytes``, ``nnhal.driver.limits.grpc_options``).
GRPC_OPTIONS = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
_NONE = ErrorStatus.NONE
#: waitFence checks this often whether its caller is still there
_WAIT_SLICE_S = 0.1


def _cache_args(
    message: dpb.PrepareModelRequest_1_2
    | dpb.PrepareModelRequest_1_3
    | dpb.PrepareModelFromCacheRequest
    | dpb.PrepareModelFromCacheRequest_1_3
    | None,
) -> dict[str, Any]:
    """modelCache / dataCache (paths per handle) and token of a prepare* message."""
    if message is None or not (message.modelCache or message.dataCache or message.token):
        return {}
    return {
        "modelCache": [tuple(h.paths) for h in message.modelCache],
        "dataCache": [tuple(h.paths) for h in message.dataCache],
        "token": bytes(message.token),
    }


def _measure(message: ppb.ExecuteRequest_1_2 | ppb.ExecuteRequest_1_3) -> bool:
    return message.measure == tpb.MEASURE_TIMING_YES


# ---------------------------------------------------------------------------
# IDevice
# ---------------------------------------------------------------------------


class DeviceServicer(dgrpc.IDeviceServicer):
    """IDevice of every device of a server (``call.state``: the device a call names)."""

    def __init__(self, devices: Devices) -> None:
        self.devices = devices

    # ---- capabilities and simple queries ----

    @hal_method(dpb.GetCapabilitiesReply, v1_0=True)
    def getCapabilities(self, call: Call, request: dpb.DeviceQuery) -> dpb.GetCapabilitiesReply:
        caps = legacy.capabilities_to_v1_0_pb(call.state.device.getCapabilities_1_3())
        return dpb.GetCapabilitiesReply(status=_NONE, capabilities=caps)

    @hal_method(dpb.GetCapabilitiesReply_1_1, v1_0=True)
    def getCapabilities_1_1(
        self, call: Call, request: dpb.DeviceQuery
    ) -> dpb.GetCapabilitiesReply_1_1:
        caps = legacy.capabilities_to_v1_1_pb(call.state.device.getCapabilities_1_3())
        return dpb.GetCapabilitiesReply_1_1(status=_NONE, capabilities=caps)

    @hal_method(dpb.GetCapabilitiesReply_1_2, v1_0=True)
    def getCapabilities_1_2(
        self, call: Call, request: dpb.DeviceQuery
    ) -> dpb.GetCapabilitiesReply_1_2:
        caps = legacy.capabilities_to_v1_2_pb(call.state.device.getCapabilities_1_3())
        return dpb.GetCapabilitiesReply_1_2(status=_NONE, capabilities=caps)

    @hal_method(dpb.GetCapabilitiesReply_1_3)
    def getCapabilities_1_3(
        self, call: Call, request: dpb.DeviceQuery
    ) -> dpb.GetCapabilitiesReply_1_3:
        caps = cv.capabilities_to_pb(call.state.device.getCapabilities_1_3())
        return dpb.GetCapabilitiesReply_1_3(status=_NONE, capabilities=caps)

    @hal_method(dpb.GetStatusReply)
    def getStatus(self, call: Call, request: dpb.DeviceQuery) -> dpb.GetStatusReply:
        state = call.state
        status = DeviceStatus.OFFLINE if state.faults.offline else state.device.getStatus()
        return dpb.GetStatusReply(status=_NONE, deviceStatus=int(status))

    @hal_method(dpb.GetVersionStringReply, v1_0=True)
    def getVersionString(self, call: Call, request: dpb.DeviceQuery) -> dpb.GetVersionStringReply:
        return dpb.GetVersionStringReply(status=_NONE, version=call.state.device.getVersionString())

    @hal_method(dpb.GetTypeReply, v1_0=True)
    def getType(self, call: Call, request: dpb.DeviceQuery) -> dpb.GetTypeReply:
        return dpb.GetTypeReply(status=_NONE, type=int(call.state.device.getType()))

    @hal_method(dpb.GetSupportedExtensionsReply, v1_0=True)
    def getSupportedExtensions(
        self, call: Call, request: dpb.DeviceQuery
    ) -> dpb.GetSupportedExtensionsReply:
        extensions = [cv.extension_to_pb(e) for e in call.state.device.getSupportedExtensions()]
        return dpb.GetSupportedExtensionsReply(status=_NONE, extensions=extensions)

    @hal_method(dpb.GetNumberOfCacheFilesNeededReply, v1_0=True)
    def getNumberOfCacheFilesNeeded(
        self, call: Call, request: dpb.DeviceQuery
    ) -> dpb.GetNumberOfCacheFilesNeededReply:
        device = call.state.device
        num_model, num_data = device.getNumberOfCacheFilesNeeded()
        cache = getattr(device, "cache", None)
        if getattr(cache, "allowed_roots", None) == ():
            # this server takes no client-named cache files (no --cache-root): say so the
            # HAL way, so runtimes do not cache (a token alone still uses --cache-dir)
            num_model, num_data = 0, 0
        return dpb.GetNumberOfCacheFilesNeededReply(
            status=_NONE, numModelCache=num_model, numDataCache=num_data
        )

    # ---- supported operations ----

    @staticmethod
    def _supported(call: Call, model: Model, version: HalVersion) -> dpb.GetSupportedOperationsReply:
        # the model's size was checked on the message (hal_method(model=True))
        supported = call.state.device.getSupportedOperations_1_3(
            model, version=version, size_checked=True
        )
        return dpb.GetSupportedOperationsReply(status=_NONE, supportedOperations=list(supported))

    @hal_method(dpb.GetSupportedOperationsReply, v1_0=True, model=True)
    def getSupportedOperations(
        self, call: Call, request: dpb.GetSupportedOperationsRequest
    ) -> dpb.GetSupportedOperationsReply:
        return self._supported(call, legacy.model_from_v1_0_pb(request.model), HalVersion.V1_0)

    @hal_method(dpb.GetSupportedOperationsReply, v1_0=True, model=True)
    def getSupportedOperations_1_1(
        self, call: Call, request: dpb.GetSupportedOperationsRequest_1_1
    ) -> dpb.GetSupportedOperationsReply:
        return self._supported(call, legacy.model_from_v1_1_pb(request.model), HalVersion.V1_1)

    @hal_method(dpb.GetSupportedOperationsReply, v1_0=True, model=True)
    def getSupportedOperations_1_2(
        self, call: Call, request: dpb.GetSupportedOperationsRequest_1_2
    ) -> dpb.GetSupportedOperationsReply:
        return self._supported(call, legacy.model_from_v1_2_pb(request.model), HalVersion.V1_2)

    @hal_method(dpb.GetSupportedOperationsReply, model=True)
    def getSupportedOperations_1_3(
        self, call: Call, request: dpb.GetSupportedOperationsRequest_1_3
    ) -> dpb.GetSupportedOperationsReply:
        return self._supported(call, cv.model_from_pb(request.model), HalVersion.V1_3)

    @hal_method(dpb.ExplainSupportedOperationsReply, model=True)
    def explainSupportedOperations(
        self, call: Call, request: dpb.ExplainSupportedOperationsRequest
    ) -> dpb.ExplainSupportedOperationsReply:
        supported, reasons = call.state.device.explainSupportedOperations(
            cv.model_from_pb(request.model), size_checked=True
        )
        return dpb.ExplainSupportedOperationsReply(
            status=_NONE,
            supportedOperations=list(supported),
            reasons={int(k): str(v) for k, v in reasons.items()},
        )

    # ---- preparation ----

    @staticmethod
    def _prepare(
        call: Call,
        model: Model,
        version: HalVersion,
        preference: int = ExecutionPreference.FAST_SINGLE_ANSWER,
        priority: int = Priority.MEDIUM,
        deadline_ns: int | None = None,
        cache: dpb.PrepareModelRequest_1_2 | dpb.PrepareModelRequest_1_3 | None = None,
    ) -> dpb.PrepareModelReply:
        # Cache arguments never change the outcome of a preparation (driver/cache.py).
        # Invalid enum values go through as ints: the device reports INVALID_ARGUMENT.
        prepared = call.state.device.prepareModel_1_3(
            model,
            cv.enum_or_int(ExecutionPreference, preference),
            cv.enum_or_int(Priority, priority),
            deadline_ns,
            version=version,
            size_checked=True,  # on the message (hal_method(model=True))
            **_cache_args(cache),
        )
        return DeviceServicer._add_prepared(call, prepared)

    @staticmethod
    def _add_prepared(call: Call, prepared: PreparedModel) -> dpb.PrepareModelReply:
        state = call.state
        pooled(state.pool, prepared)  # its executions in the worker processes, if any
        state.sessions.touch(call.session)
        # at most max_prepared_models_per_client (driver/occupancy.py)
        key = state.prepared_quota.add(call.caller, prepared, owner=call.session)
        return dpb.PrepareModelReply(status=_NONE, preparedModel=key)

    @hal_method(dpb.PrepareModelReply, v1_0=True, model=True)
    def prepareModel(self, call: Call, request: dpb.PrepareModelRequest) -> dpb.PrepareModelReply:
        return self._prepare(call, legacy.model_from_v1_0_pb(request.model), HalVersion.V1_0)

    @hal_method(dpb.PrepareModelReply, v1_0=True, model=True)
    def prepareModel_1_1(
        self, call: Call, request: dpb.PrepareModelRequest_1_1
    ) -> dpb.PrepareModelReply:
        model = legacy.model_from_v1_1_pb(request.model)
        return self._prepare(call, model, HalVersion.V1_1, request.preference)

    @hal_method(dpb.PrepareModelReply, v1_0=True, model=True)
    def prepareModel_1_2(
        self, call: Call, request: dpb.PrepareModelRequest_1_2
    ) -> dpb.PrepareModelReply:
        model = legacy.model_from_v1_2_pb(request.model)
        return self._prepare(call, model, HalVersion.V1_2, request.preference, cache=request)

    @hal_method(dpb.PrepareModelReply, model=True)
    def prepareModel_1_3(
        self, call: Call, request: dpb.PrepareModelRequest_1_3
    ) -> dpb.PrepareModelReply:
        return self._prepare(
            call,
            cv.model_from_pb(request.model),
            HalVersion.V1_3,
            request.preference,
            request.priority,
            cv.deadline_ns_from_pb(request.deadline),
            cache=request,
        )

    @staticmethod
    def _from_cache(
        call: Call,
        request: dpb.PrepareModelFromCacheRequest | dpb.PrepareModelFromCacheRequest_1_3,
        deadline_ns: int | None,
    ) -> dpb.PrepareModelReply:
        device = call.state.device
        cache = getattr(device, "cache", None)
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
        prepared = device.prepareModelFromCache_1_3(
            deadline_ns=deadline_ns, **_cache_args(request)
        )
        return DeviceServicer._add_prepared(call, prepared)

    @hal_method(dpb.PrepareModelReply, v1_0=True)
    def prepareModelFromCache(
        self, call: Call, request: dpb.PrepareModelFromCacheRequest
    ) -> dpb.PrepareModelReply:
        return self._from_cache(call, request, None)

    @hal_method(dpb.PrepareModelReply)
    def prepareModelFromCache_1_3(
        self, call: Call, request: dpb.PrepareModelFromCacheRequest_1_3
    ) -> dpb.PrepareModelReply:
        return self._from_cache(call, request, cv.deadline_ns_from_pb(request.deadline))

    # ---- memory domains ----

    @hal_method(dpb.AllocateReply)
    def allocate(self, call: Call, request: dpb.AllocateRequest) -> dpb.AllocateReply:
        state = call.state
        prepared = [
            state.prepared_models.get(key, f"allocate: preparedModels[{i}]", call.caller)
            for i, key in enumerate(request.preparedModels)
        ]
        buffer = state.device.allocate(
            desc=cv.buffer_desc_from_pb(request.desc),
            preparedModels=prepared,
            inputRoles=[cv.buffer_role_from_pb(r) for r in request.inputRoles],
            outputRoles=[cv.buffer_role_from_pb(r) for r in request.outputRoles],
        )
        state.sessions.touch(call.session)
        # ids > 0, unique among live buffers
        token = state.buffer_quota.add(call.caller, buffer, owner=call.session)
        return dpb.AllocateReply(status=_NONE, buffer=token, token=token)


# ---------------------------------------------------------------------------
# Executions (shared by IPreparedModel's methods)
# ---------------------------------------------------------------------------


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
    prepared: PreparedModel,
    request: Request,
    *,
    measure: bool,
    deadline_ns: int | None = None,
    loop_timeout_ns: int | None = None,
    allow_unspecified_output: bool = True,
    premapped: dict[int, memoryview] | None = None,
    cancel: Cancel | None = None,
    validated: bool = False,
    caller: str | None = None,
    layout: Hashable | None = None,
) -> ppb.ExecuteReply:
    """Map the pools, validate, run, and build the reply (HalErrors propagate).

    ``premapped``: views for some pools mapped already (burst memory slots).
    ``cancel``: stops the run from another thread (``cancellable``).
    ``validated``: the caller validated the request and checked its pools already, and
    holds one of the device's execution slots (a fenced execution, from its call on);
    otherwise the execution takes a slot (``max_concurrent_executions``) here.
    ``caller``: the client (``client_key``) whose driver buffers the request may name.
    ``layout``: the request's key from ``request_layouts.decode_request`` (validated once
    per layout, and run by its plan once one is kept: ``execution_plans``); None:
    validated here without a memo.
    """
    if validated:
        return _execute(
            state, prepared, request, measure, deadline_ns, loop_timeout_ns,
            allow_unspecified_output, premapped, cancel, True, caller, layout, None,
        )  # fmt: skip
    plan_at = None
    if layout is not None:
        plan_at = plan_key(layout, request, allow_unspecified_output)
        plan = find_plan(prepared, plan_at, state.limits)
        if plan is not None:  # this layout passed the checks below before
            return run_planned(
                state, prepared, plan, request, measure, deadline_ns, loop_timeout_ns,
                premapped, cancel,
            )  # fmt: skip
    check_request_pools(request, state.limits)
    state.executions.acquire()
    try:
        return _execute(
            state, prepared, request, measure, deadline_ns, loop_timeout_ns,
            allow_unspecified_output, premapped, cancel, False, caller, layout, plan_at,
        )  # fmt: skip
    finally:
        state.executions.release()


def _execute(
    state: ServiceState,
    prepared: PreparedModel,
    request: Request,
    measure: bool,
    deadline_ns: int | None,
    loop_timeout_ns: int | None,
    allow_unspecified_output: bool,
    premapped: dict[int, memoryview] | None,
    cancel: Cancel | None,
    validated: bool,
    caller: str | None,
    layout: Hashable | None,
    plan_at: tuple | None,
) -> ppb.ExecuteReply:
    """``execute`` past its slot; ``plan_at``: the key under which to keep the request's
    plan once it has passed the checks (None: keep none)."""
    tokens = None
    if TokenMemory in map(type, request.pools):
        # as the sample driver: validateRequest (token 0 is INVALID_ARGUMENT, VTS
        # InvalidToken), then the driver buffers' roles and state; the rewritten
        # request is the driver's own and is not validated again
        if not validated:
            validate_once(prepared, request, layout, allow_unspecified_output)
            validated = True
        tokens = TokenPools(
            prepared, request, lambda key, what: state.buffers.get(key, what, caller)
        )
        request = tokens.request
        premapped = {**(premapped or {}), **{p: tokens.view(p) for p in tokens.buffers}}
    with MappedPools(request.pools, premapped) as mapped:
        if not validated:  # after mapping, as the sample driver
            validate_once(prepared, request, layout, allow_unspecified_output)
            if plan_at is not None and tokens is None:
                # validated, and its pools checked by ``execute``: the next request of
                # this layout skips both (driver buffers are checked on every call)
                remember_plan(prepared, plan_at, request, state.limits)
        try:
            shapes, timing = prepared.execute(
                request,
                mapped.views,
                measure=measure,
                deadline_ns=deadline_ns,
                loop_timeout_ns=loop_timeout_ns,
                allow_unspecified_output=allow_unspecified_output,
                cancel=cancel,
                validated=True,
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
        return execute_reply(shapes, timing, mapped.views, output_pool_indexes(request))


@contextlib.contextmanager
def cancellable(
    state: ServiceState, context: grpc.ServicerContext | None, session: str | None
) -> Iterator[Cancel]:
    """A ``Cancel`` for one execution, fired when the call ends before the execution does
    (the client cancelled or went away: gRPC runs the callback at the call's end) and when
    the client ``session`` ends. ``context`` None: the session only (fenced runs in the
    background outlive their call)."""
    cancel = _cancel_with_call(context)
    with state.sessions.running(session, cancel):
        yield cancel


def _cancel_with_call(context: grpc.ServicerContext | None) -> Cancel:
    cancel = Cancel()
    if context is not None:
        context.add_callback(lambda: cancel.cancel("the call ended: the client went away"))
    return cancel



def _run_1_3(call: Call, request: ppb.ExecuteRequest_1_3) -> ppb.ExecuteReply:
    """execute_1_3 and executeSynchronously_1_3: the same call with a deadline and loop timeout."""
    return _run(
        call,
        request,
        v1_0=False,
        measure=_measure(request),
        deadline_ns=cv.deadline_ns_from_pb(request.deadline),
        loop_timeout_ns=cv.timeout_ns_from_pb(request.loopTimeoutDuration),
    )

def _run(
    call: Call,
    request: ppb.ExecuteRequest | ppb.ExecuteRequest_1_2 | ppb.ExecuteRequest_1_3,
    *,
    v1_0: bool,
    measure: bool,
    deadline_ns: int | None = None,
    loop_timeout_ns: int | None = None,
) -> ppb.ExecuteReply:
    """A synchronous execution of the call's own prepared model, cancelled with its call."""
    state = call.state
    prepared = state.prepared_models.get(request.preparedModel, None, call.caller)
    hal_request, layout = decode_request(prepared, request.request, v1_0=v1_0)
    # execute() would find the plan too: looked up here, its arguments are not built
    plan = find_plan(prepared, plan_key(layout, hal_request, True), state.limits)
    cancel = _cancel_with_call(call.context)
    session = call.session
    if session is not None:
        # cancellable(), without the context manager's cost on every call (hal_method's
        # call_started has renewed the lease)
        state.sessions.track_in_call(session, cancel)
    try:
        if plan is not None:
            return run_planned(
                state, prepared, plan, hal_request, measure, deadline_ns, loop_timeout_ns,
                None, cancel,
            )  # fmt: skip
        return execute(
            state, prepared, hal_request, measure=measure, deadline_ns=deadline_ns,
            loop_timeout_ns=loop_timeout_ns, cancel=cancel, caller=call.caller, layout=layout,
        )  # fmt: skip
    finally:
        if session is not None:
            state.sessions.untrack(session, cancel)


# ---------------------------------------------------------------------------
# IPreparedModel, IBuffer, IFencedExecutionCallback
# ---------------------------------------------------------------------------


class PreparedModelServicer(pgrpc.IPreparedModelServicer):
    def __init__(self, devices: Devices) -> None:
        self.devices = devices

    @hal_method(ppb.ExecuteReply, v1_0=True)
    def execute(self, call: Call, request: ppb.ExecuteRequest) -> ppb.ExecuteReply:
        return _run(call, request, v1_0=True, measure=False)

    @hal_method(ppb.ExecuteReply, v1_0=True)
    def execute_1_2(self, call: Call, request: ppb.ExecuteRequest_1_2) -> ppb.ExecuteReply:
        return _run(call, request, v1_0=True, measure=_measure(request))

    @hal_method(ppb.ExecuteReply, v1_0=True)
    def executeSynchronously(
        self, call: Call, request: ppb.ExecuteRequest_1_2
    ) -> ppb.ExecuteReply:
        return _run(call, request, v1_0=True, measure=_measure(request))

    @hal_method(ppb.ExecuteReply)
    def execute_1_3(self, call: Call, request: ppb.ExecuteRequest_1_3) -> ppb.ExecuteReply:
        return _run_1_3(call, request)

    @hal_method(ppb.ExecuteReply)
    def executeSynchronously_1_3(
        self, call: Call, request: ppb.ExecuteRequest_1_3
    ) -> ppb.ExecuteReply:
        return _run_1_3(call, request)

    @hal_method(ppb.ExecuteFencedReply)
    def executeFenced(
        self, call: Call, request: ppb.ExecuteFencedRequest
    ) -> ppb.ExecuteFencedReply:
        state, caller, owner = call.state, call.caller, call.session
        prepared = state.prepared_models.get(request.preparedModel, None, caller)
        waits = []
        for i, key in enumerate(request.waitFor):
            fence = state.fences.get(key, f"executeFenced: waitFor[{i}]", caller)
            if fence.state == ERROR:
                raise InvalidArgument(f"executeFenced: waitFor[{i}] (fence {key}) is in error")
            waits.append(fence)
        hal_request, layout = decode_request(prepared, request.request)
        # validated now, before any waiting: errors are the call's own status
        _check_fenced_outputs(prepared.model, hal_request)
        validate_once(prepared, hal_request, layout, False)
        check_request_pools(hal_request, state.limits)
        loop_timeout_ns = cv.timeout_ns_from_pb(request.loopTimeoutDuration)
        measure = _measure(request)
        state.sessions.touch(owner)

        def run(deadline_ns: int | None) -> ppb.ExecuteReply:
            try:
                # in the background it outlives this call: only its session can cancel it
                with cancellable(state, None, owner) as cancel:
                    return execute(
                        state,
                        prepared,
                        hal_request,
                        measure=measure,
                        deadline_ns=deadline_ns,
                        loop_timeout_ns=loop_timeout_ns,
                        allow_unspecified_output=False,
                        cancel=cancel,
                        validated=True,  # above; the slot is held from the call on
                        caller=caller,
                    )
            except OutputInsufficientSize as exc:
                raise InvalidArgument(
                    f"executeFenced: {exc.message} (fenced executions need sufficient outputs)"
                ) from exc

        # the execution holds a slot from now on, while it waits too
        state.executions.acquire()
        record, reply = launch(
            run,
            waits,
            measure=measure,
            deadline_ns=cv.deadline_ns_from_pb(request.deadline),
            duration_ns=cv.timeout_ns_from_pb(request.duration),
            new_fence=lambda fence: state.fences.add(fence, owner=owner, holder=caller),
            on_done=state.executions.release,
        )
        callback = state.fenced_executions.add(record, owner=owner, holder=caller)
        return ppb.ExecuteFencedReply(
            status=_NONE,
            syncFence=record.fence_id,
            callback=callback,
            outputPools=[] if reply is None else reply.outputPools,
        )

    def configureExecutionBurst(
        self, request_iterator: Iterator[ppb.ExecuteRequest_1_2], context: grpc.ServicerContext
    ) -> Iterator[ppb.ExecuteReply]:
        call = self.devices.call(context)
        burst = BurstSession(call.state, execute, caller=call.caller)
        # one Cancel for the stream: bursts carry no deadline, and once the stream is
        # gone (the client went away, or its session ended) nothing in it should run on
        with cancellable(call.state, context, call.session) as cancel:
            burst.cancel = cancel
            try:
                for message in request_iterator:
                    yield _BURST_MESSAGE(burst, call, message)
            finally:
                burst.close()

    @hal_method(ppb.StatusReply, name="IPreparedModel.release")
    def release(self, call: Call, request: ppb.ReleaseRequest) -> ppb.StatusReply:
        call.state.prepared_models.pop(request.id, call.caller, "release")
        return ppb.StatusReply(status=_NONE)


def _burst_run(
    burst: BurstSession, call: Call, message: ppb.ExecuteRequest_1_2
) -> ppb.ExecuteReply:
    return burst.run(message)


#: One burst message -> one reply with a HAL status, traced as configureExecutionBurst.
_BURST_MESSAGE = HalMethod(_burst_run, ppb.ExecuteReply, "configureExecutionBurst", True, False)


class BufferServicer(pgrpc.IBufferServicer):
    def __init__(self, devices: Devices) -> None:
        self.devices = devices

    @hal_method(ppb.CopyToReply)
    def copyTo(self, call: Call, request: ppb.CopyToRequest) -> ppb.CopyToReply:
        buffer = call.state.buffers.get(request.buffer, "copyTo", call.caller)
        dst = cv.memory_from_pb(request.dst)
        with MappedPools([dst]) as mapped:
            buffer.copyTo(mapped.views[0])
            data = bytes(mapped.views[0]) if isinstance(dst, InlineMemory) else b""
        return ppb.CopyToReply(status=_NONE, data=data)

    @hal_method(ppb.StatusReply)
    def copyFrom(self, call: Call, request: ppb.CopyFromRequest) -> ppb.StatusReply:
        buffer = call.state.buffers.get(request.buffer, "copyFrom", call.caller)
        with MappedPools([cv.memory_from_pb(request.src)]) as mapped:
            buffer.copyFrom(mapped.views[0], tuple(request.dimensions))
        return ppb.StatusReply(status=_NONE)

    @hal_method(ppb.StatusReply, name="IBuffer.release")
    def release(self, call: Call, request: ppb.ReleaseRequest) -> ppb.StatusReply:
        call.state.buffers.pop(request.id, call.caller, "release")
        return ppb.StatusReply(status=_NONE)


class FencedExecutionCallbackServicer(pgrpc.IFencedExecutionCallbackServicer):
    def __init__(self, devices: Devices) -> None:
        self.devices = devices

    @hal_method(ppb.GetExecutionInfoReply)
    def getExecutionInfo(
        self, call: Call, request: ppb.GetExecutionInfoRequest
    ) -> ppb.GetExecutionInfoReply:
        record = call.state.fenced_executions.get(
            request.callback, "getExecutionInfo", call.caller
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

    @hal_method(ppb.StatusReply, name="IFencedExecutionCallback.release")
    def release(self, call: Call, request: ppb.ReleaseRequest) -> ppb.StatusReply:
        state = call.state
        record = state.fenced_executions.pop(request.id, call.caller, "release")
        try:
            state.fences.pop(record.fence_id, call.caller)
        except InvalidArgument:
            pass  # already released or evicted
        return ppb.StatusReply(status=_NONE)


class SyncFenceServicer(pgrpc.ISyncFenceServicer):
    """nnhal extension: sync fences the client creates, signals and waits for."""

    def __init__(self, devices: Devices) -> None:
        self.devices = devices

    @staticmethod
    def _reply(key: int, fence: Fence) -> ppb.FenceReply:
        return ppb.FenceReply(status=_NONE, fence=key, state=fence.state)

    @hal_method(ppb.FenceReply)
    def createFence(self, call: Call, request: ppb.CreateFenceRequest) -> ppb.FenceReply:
        fence = Fence(client_created=True)
        call.state.sessions.touch(call.session)
        key = call.state.fences.add(fence, owner=call.session, holder=call.caller)
        return self._reply(key, fence)

    @hal_method(ppb.StatusReply)
    def signalFence(self, call: Call, request: ppb.SignalFenceRequest) -> ppb.StatusReply:
        fence = call.state.fences.get(request.fence, "signalFence", call.caller)
        if not fence.client_created:
            raise InvalidArgument(
                f"signalFence: fence {request.fence} belongs to a fenced execution; only fences "
                "from createFence are signalled by the client"
            )
        if not fence.signal(request.fenceStatus == _NONE):
            raise InvalidArgument(f"signalFence: fence {request.fence} has already signalled")
        return ppb.StatusReply(status=_NONE)

    @hal_method(ppb.FenceReply)
    def waitFence(self, call: Call, request: ppb.WaitFenceRequest) -> ppb.FenceReply:
        fence = call.state.fences.get(request.fence, "waitFence", call.caller)
        context = call.context
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

    @hal_method(ppb.StatusReply, name="ISyncFence.release")
    def release(self, call: Call, request: ppb.ReleaseRequest) -> ppb.StatusReply:
        fence = call.state.fences.pop(request.id, call.caller, "release")
        fence.signal(False)  # an unsignalled fence released: waiters see an error
        return ppb.StatusReply(status=_NONE)


# ---------------------------------------------------------------------------
# Servers
# ---------------------------------------------------------------------------


def create_server(
    device: Any, address: str = "127.0.0.1:0", max_workers: int = 16
) -> tuple[grpc.Server, str]:
    """Start a gRPC server for ``device`` (or a list of devices); see driver/server.py."""
    from nnhal.driver.server import create_server as create

    return create(device, address, max_workers)


def serve_forever(
    device: Any, address: str = DEFAULT_ADDRESS, max_workers: int = 16, **kw: Any
) -> None:
    """Serve ``device`` (or a list of devices) until SIGINT/SIGTERM; see driver/server.py."""
    from nnhal.driver.server import serve_forever as serve

    serve(device, address, max_workers, **kw)
