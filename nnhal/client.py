"""Client-side proxies for an nnhal driver served over gRPC.

``connect(address)`` gives a ``Device`` whose methods keep the HAL names
(``getCapabilities_1_3``, ``prepareModel_1_3``...) and return nnhal.types
values. A non-NONE status in a reply is raised as the matching ``HalError``
subclass (``OutputInsufficientSize`` carries the output shapes), with the
server's message. Transport faults are raised as ``DeviceUnavailable``.

``PreparedModel.execute`` is the convenient form: numpy arrays in, numpy
arrays out, the request and its memory built for you (``memory="inline"``
sends the bytes in the messages; ``memory="shared"`` puts inputs and outputs
in one POSIX shared-memory segment that the server maps in place, unlinked
afterwards). ``execute_request`` is the low-level form over a ``Request``. Outputs of vendor
extension operand types are read with the dtypes given as ``output_dtypes``
(checked against the byte sizes the device lists in getSupportedExtensions).

Deadlines (``deadline_ns``) are absolute points on the steady clock, in
nanoseconds: ``time.monotonic_ns() + budget``. CLOCK_MONOTONIC is shared by
the processes of one host only, so deadlines are meaningful only when client
and server run on the same host.

Async forms (``prepare_model_async``, ``execute_async``) return
``concurrent.futures.Future`` objects run on a small client-side thread pool.

Every ``connect`` opens a client session (``nnhal._client_session``): the
objects the client creates are released by the server when it closes the
Device, or when it dies and stops renewing its lease (``lease_s``).
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import grpc
import numpy as np

from nnhal import convert as cv
from nnhal._client_burst import Burst
from nnhal._client_io import ExtensionTypes, IoPlan, extension_type_table, has_extension_outputs
from nnhal._client_results import (
    ExecutionResult,
    RequestResult,
    _call,
    _measure,
    _request_result,
    _rpc,
    _timing,
)
from nnhal._client_session import DEFAULT_LEASE_S, ClientSession, close_quietly
from nnhal._metadata import with_metadata
from nnhal._proto.v1_3 import device_pb2 as dpb
from nnhal._proto.v1_3 import device_pb2_grpc as dgrpc
from nnhal._proto.v1_3 import prepared_model_pb2 as ppb
from nnhal._proto.v1_3 import prepared_model_pb2_grpc as pgrpc
from nnhal._proto.v1_3 import types_pb2 as tpb
from nnhal.control import select_device
from nnhal.errors import DeviceUnavailable, HalError, error_from_status
from nnhal.types import (
    BufferDesc,
    BufferRole,
    Capabilities,
    DeviceStatus,
    DeviceType,
    ErrorStatus,
    ExecutionPreference,
    Extension,
    InlineMemory,
    Model,
    Priority,
    Request,
    SharedMemory,
    Timing,
)

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = [
    "Buffer",
    "Burst",
    "Device",
    "ExecutionResult",
    "FencedExecutionCallback",
    "FencedResult",
    "PreparedModel",
    "RequestResult",
    "connect",
]

GRPC_OPTIONS = [("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]


# ---------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class FencedResult:
    """Outcome of ``executeFenced``: the (already signalled) sync fence and the callback."""

    syncFence: int
    callback: FencedExecutionCallback
    pools: dict[int, bytes]


# ---------------------------------------------------------------------------
# Proxies
# ---------------------------------------------------------------------------


def _first_call(stub: Any, address: str, timeout: float) -> None:
    """getStatus, waiting for the server up to ``timeout``; but a refused connection (nothing
    listens there) is reported at once, with that word."""
    started = time.monotonic()
    try:
        stub.getStatus(dpb.DeviceQuery(), timeout=timeout)  # fails fast when refused
        return
    except grpc.RpcError as exc:
        details = (exc.details() or "").lower()
        if exc.code() == grpc.StatusCode.UNAVAILABLE and "refused" in details:
            raise DeviceUnavailable(
                f"no nnhal driver at {address}: connection refused (nothing listens there)"
            ) from None
        if exc.code() != grpc.StatusCode.UNAVAILABLE:
            raise
    left = max(0.1, timeout - (time.monotonic() - started))
    stub.getStatus(dpb.DeviceQuery(), timeout=left, wait_for_ready=True)


def connect(
    address: str,
    timeout: float = 10.0,
    device: str | None = None,
    *,
    session: bool = True,
    lease_s: float = DEFAULT_LEASE_S,
    security: Any = None,
) -> Device:
    """Connect to the nnhal driver at "host:port"; DeviceUnavailable if it does not answer.

    ``device``: the name of one of the server's devices (``nnhal.control.list_devices``);
    default the first. ``session``: open a client session whose lease (``lease_s``) the
    Device renews in the background; without one, objects the client does not release
    stay on the server until it stops. ``security``: TLS and token
    (``nnhal._client_security``; default from the environment, ``NNHAL_TOKEN``, ...).
    """
    from nnhal._client_security import open_channel

    channel = open_channel(address, GRPC_OPTIONS, security)
    if device:
        channel = select_device(channel, device)
    # One real call (waiting for the connection up to the timeout) also checks that the
    # peer speaks this protocol. (grpc.channel_ready_future would make close() slow.)
    opened = None
    try:
        stub = dgrpc.IDeviceStub(channel)
        _first_call(stub, address, timeout)
        if session:
            opened = ClientSession.open(channel, lease_s, timeout)
            if opened is not None:  # the session goes with every call as metadata
                channel = with_metadata(channel, (opened.header,))
    except grpc.RpcError as exc:
        channel.close()
        if exc.code() == grpc.StatusCode.NOT_FOUND and device:
            raise DeviceUnavailable(
                f"the server at {address} has no device {device!r}: {exc.details()}"
            ) from None
        raise DeviceUnavailable(
            f"no nnhal driver answered at {address} within {timeout} s: {exc.code()}"
            + (f" ({exc.details()})" if exc.code() == grpc.StatusCode.UNAUTHENTICATED else "")
        ) from None
    return Device(channel, address, session=opened)


class Device:
    """The client-side IDevice (not the driver's Device class)."""

    def __init__(
        self,
        channel: grpc.Channel,
        address: str = "",
        session: ClientSession | None = None,
    ) -> None:
        self.channel = channel
        self.address = address
        self.session = session
        # a Device dropped without close() still ends its session (and stops its thread)
        self._finalizer = (
            weakref.finalize(self, close_quietly, session) if session is not None else None
        )
        if self._finalizer is not None:
            # not at interpreter exit: an in-process server may be gone by then, and a
            # process that ends stops renewing, so its lease runs out anyway
            self._finalizer.atexit = False
        self.stub = dgrpc.IDeviceStub(channel)
        self.prepared_model_stub = pgrpc.IPreparedModelStub(channel)
        self.buffer_stub = pgrpc.IBufferStub(channel)
        self.callback_stub = pgrpc.IFencedExecutionCallbackStub(channel)
        self.fence_stub = pgrpc.ISyncFenceStub(channel)
        self._pool: ThreadPoolExecutor | None = None
        self._buffers: weakref.WeakSet[Buffer] = weakref.WeakSet()
        self._pool_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"nnhal.client.Device({self.address!r})"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the buffers this client allocated, end the session (the server releases
        whatever else the client still holds), then close the channel."""
        for buffer in list(self._buffers):
            try:
                buffer.release()
            except HalError:
                pass  # already gone, or the server is
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None
        if self._finalizer is not None:
            self._finalizer()  # ClientSession.close, once
        self.channel.close()

    def submit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future:
        """Run ``fn`` on the client's thread pool (the async forms use this)."""
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="nnhal-client")
            return self._pool.submit(fn, *args, **kwargs)

    # ---- queries ----

    def getCapabilities_1_3(self) -> Capabilities:
        reply = _rpc(self.stub.getCapabilities_1_3, dpb.DeviceQuery())
        return cv.capabilities_from_pb(reply.capabilities)

    def getVersionString(self) -> str:
        return _rpc(self.stub.getVersionString, dpb.DeviceQuery()).version

    def getType(self) -> DeviceType:
        return DeviceType(_rpc(self.stub.getType, dpb.DeviceQuery()).type)

    def getSupportedExtensions(self) -> tuple[Extension, ...]:
        reply = _rpc(self.stub.getSupportedExtensions, dpb.DeviceQuery())
        return tuple(cv.extension_from_pb(e) for e in reply.extensions)

    def getStatus(self) -> DeviceStatus:
        return DeviceStatus(_rpc(self.stub.getStatus, dpb.DeviceQuery()).deviceStatus)

    def getNumberOfCacheFilesNeeded(self) -> tuple[int, int]:
        reply = _rpc(self.stub.getNumberOfCacheFilesNeeded, dpb.DeviceQuery())
        return reply.numModelCache, reply.numDataCache

    def getSupportedOperations_1_3(self, model: Model) -> list[bool]:
        message = dpb.GetSupportedOperationsRequest_1_3(model=cv.model_to_pb(model))
        return list(_rpc(self.stub.getSupportedOperations_1_3, message).supportedOperations)

    def explainSupportedOperations(self, model: Model) -> tuple[list[bool], dict[int, str]]:
        """nnhal extension: the supported flags plus a reason per unsupported operation."""
        message = dpb.ExplainSupportedOperationsRequest(model=cv.model_to_pb(model))
        reply = _rpc(self.stub.explainSupportedOperations, message)
        return list(reply.supportedOperations), dict(reply.reasons)

    # ---- preparation ----

    def prepareModel_1_3(
        self,
        model: Model,
        preference: int = ExecutionPreference.FAST_SINGLE_ANSWER,
        priority: int = Priority.MEDIUM,
        deadline_ns: int | None = None,
        modelCache: Sequence[Sequence[str]] = (),
        dataCache: Sequence[Sequence[str]] = (),
        token: bytes = b"",
    ) -> PreparedModel:
        """Cache handles are path lists (one path per fd of the HAL handle), as below."""
        message = dpb.PrepareModelRequest_1_3(
            model=cv.model_to_pb(model),
            preference=int(preference),
            priority=int(priority),
            deadline=cv.optional_time_point_to_pb(deadline_ns),
            modelCache=[tpb.CacheHandle(paths=list(h)) for h in modelCache],
            dataCache=[tpb.CacheHandle(paths=list(h)) for h in dataCache],
            token=bytes(token),
        )
        reply = _rpc(self.stub.prepareModel_1_3, message)
        return PreparedModel(self, reply.preparedModel, model)

    def prepare_model_async(
        self,
        model: Model,
        preference: int = ExecutionPreference.FAST_SINGLE_ANSWER,
        priority: int = Priority.MEDIUM,
        deadline_ns: int | None = None,
    ) -> Future:
        """``prepareModel_1_3`` on the client's thread pool: a Future of a PreparedModel."""
        return self.submit(self.prepareModel_1_3, model, preference, priority, deadline_ns)

    def prepareModelFromCache_1_3(
        self,
        modelCache: Sequence[Sequence[str]] = (),
        dataCache: Sequence[Sequence[str]] = (),
        token: bytes = b"",
        deadline_ns: int | None = None,
        model: Model | None = None,
    ) -> PreparedModel:
        """Cache handles are given as path lists (one path per fd of the HAL handle).

        ``model`` (client side only, never sent) lets ``execute`` lay out numpy
        inputs and outputs; without it use ``execute_request``.
        """
        message = dpb.PrepareModelFromCacheRequest_1_3(
            deadline=cv.optional_time_point_to_pb(deadline_ns),
            modelCache=[tpb.CacheHandle(paths=list(h)) for h in modelCache],
            dataCache=[tpb.CacheHandle(paths=list(h)) for h in dataCache],
            token=bytes(token),
        )
        reply = _rpc(self.stub.prepareModelFromCache_1_3, message)
        return PreparedModel(self, reply.preparedModel, model)

    def allocate(
        self,
        desc: BufferDesc | None = None,
        preparedModels: Sequence[PreparedModel] = (),
        inputRoles: Sequence[BufferRole] = (),
        outputRoles: Sequence[BufferRole] = (),
    ) -> Buffer:
        message = dpb.AllocateRequest(
            desc=cv.buffer_desc_to_pb(desc or BufferDesc()),
            preparedModels=[p.id for p in preparedModels],
            inputRoles=[cv.buffer_role_to_pb(r) for r in inputRoles],
            outputRoles=[cv.buffer_role_to_pb(r) for r in outputRoles],
        )
        reply = _rpc(self.stub.allocate, message)
        buffer = Buffer(self, reply.buffer, reply.token)
        self._buffers.add(buffer)
        return buffer


class PreparedModel:
    """A prepared model living in the server, named by ``id``."""

    def __init__(self, device: Device, id: int, model: Model | None) -> None:
        self.device = device
        self.id = id
        self.model = model  # needed by execute() to lay out numpy inputs/outputs
        self._stub = device.prepared_model_stub
        self._extension_types: ExtensionTypes | None = None
        self._encoder = cv.RequestEncoder()  # its executions' requests (bursts' too)

    def __repr__(self) -> str:
        return f"nnhal.client.PreparedModel(id={self.id})"

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def _plan(
        self,
        inputs: Sequence[np.ndarray | None],
        output_shapes: Any,
        memory: str,
        output_dtypes: Sequence[Any] | None = None,
    ) -> IoPlan:
        if self.model is None:
            raise ValueError("this prepared model has no local Model: use execute_request")
        types = None
        if output_dtypes is not None and has_extension_outputs(self.model):
            types = self._extension_type_table()
        return IoPlan(self.model, inputs, output_shapes, memory, output_dtypes, types)

    def _extension_type_table(self) -> ExtensionTypes:
        """The device's extension operand types under this model's prefixes, asked once
        (a device lists an extension only when it supports all of it; others stay unknown)."""
        if self._extension_types is None:
            assert self.model is not None
            extensions = self.device.getSupportedExtensions()
            self._extension_types = extension_type_table(
                extensions, self.model.extensionNameToPrefix
            )
        return self._extension_types

    # ---- numpy level ----

    def execute(
        self,
        inputs: Sequence[np.ndarray | None],
        *,
        output_shapes: Sequence[Sequence[int] | None] | None = None,
        output_dtypes: Sequence[Any] | None = None,
        measure: bool = False,
        deadline_ns: int | None = None,
        loop_timeout_ns: int | None = None,
        memory: str = "inline",
        synchronous: bool = True,
    ) -> ExecutionResult:
        """Run once on numpy inputs (None = omitted input); raises HalError subclasses.

        Output buffers are sized from ``output_shapes`` (one entry per output,
        None = the model's dimensions) or else from the model's main output
        dimensions; an output whose dimensions the model leaves unknown needs
        an ``output_shapes`` entry. ``output_dtypes`` (one entry per output, None =
        the operand type's dtype) gives the element dtype of each output of a vendor
        extension operand type, which has no layout of its own (ValueError without it,
        or when it disagrees with the type). ``synchronous`` picks
        executeSynchronously_1_3 over execute_1_3 (the same outcome over this wire).
        """
        plan = self._plan(inputs, output_shapes, memory, output_dtypes)
        try:
            result = self.execute_request(
                plan.request,
                measure=measure,
                deadline_ns=deadline_ns,
                loop_timeout_ns=loop_timeout_ns,
                synchronous=synchronous,
            )
            outputs = plan.read_outputs(result.outputShapes, result.pools)
        finally:
            plan.close()
        return ExecutionResult(outputs, result.outputShapes, result.timing)

    def execute_async(self, inputs: Sequence[np.ndarray | None], **kwargs: Any) -> Future:
        """``execute`` (execute_1_3 form) on the client's thread pool: a Future of ExecutionResult."""
        kwargs.setdefault("synchronous", False)
        return self.device.submit(self.execute, inputs, **kwargs)

    def execute_fenced(
        self,
        inputs: Sequence[np.ndarray | None],
        *,
        waitFor: Sequence[int] = (),
        output_shapes: Sequence[Sequence[int] | None] | None = None,
        output_dtypes: Sequence[Any] | None = None,
        measure: bool = False,
        deadline_ns: int | None = None,
        loop_timeout_ns: int | None = None,
        duration_ns: int | None = None,
        memory: str = "inline",
    ) -> tuple[list[np.ndarray], FencedResult]:
        """``executeFenced`` on numpy inputs: the outputs and the fence/callback
        (``output_shapes``, ``output_dtypes`` as for ``execute``)."""
        plan = self._plan(inputs, output_shapes, memory, output_dtypes)
        try:
            fenced = self.executeFenced(
                plan.request,
                waitFor=waitFor,
                measure=measure,
                deadline_ns=deadline_ns,
                loop_timeout_ns=loop_timeout_ns,
                duration_ns=duration_ns,
            )
            outputs = plan.read_outputs((), fenced.pools)
        finally:
            plan.close()
        return outputs, fenced

    # ---- request level ----

    def execute_request(
        self,
        request: Request,
        *,
        measure: bool = False,
        deadline_ns: int | None = None,
        loop_timeout_ns: int | None = None,
        synchronous: bool = True,
    ) -> RequestResult:
        """executeSynchronously_1_3 (or execute_1_3) of a ready Request."""
        # filled in place (request_to_pb and the optional_*_to_pb, without their copies)
        message = ppb.ExecuteRequest_1_3()
        self._encoder.fill_execution(
            message, self.id, _measure(measure), request, deadline_ns, loop_timeout_ns
        )
        method = self._stub.executeSynchronously_1_3 if synchronous else self._stub.execute_1_3
        return _request_result(_rpc(method, message))

    def executeFenced(
        self,
        request: Request,
        *,
        waitFor: Sequence[int] = (),
        measure: bool = False,
        deadline_ns: int | None = None,
        loop_timeout_ns: int | None = None,
        duration_ns: int | None = None,
    ) -> FencedResult:
        message = ppb.ExecuteFencedRequest(
            preparedModel=self.id,
            request=cv.request_to_pb(request),
            waitFor=list(waitFor),
            measure=_measure(measure),
            deadline=cv.optional_time_point_to_pb(deadline_ns),
            loopTimeoutDuration=cv.optional_timeout_to_pb(loop_timeout_ns),
            duration=cv.optional_timeout_to_pb(duration_ns),
        )
        reply = _rpc(self._stub.executeFenced, message)
        return FencedResult(
            syncFence=reply.syncFence,
            callback=FencedExecutionCallback(self.device, reply.callback),
            pools={p.poolIndex: bytes(p.data) for p in reply.outputPools},
        )

    def burst(self) -> Burst:
        """configureExecutionBurst: a stream of executions on this prepared model."""
        return Burst(self)

    def release(self) -> None:
        """nnhal extension: free the server-side prepared model."""
        if self.id:
            _rpc(self._stub.release, ppb.ReleaseRequest(id=self.id))
            self.id = 0


class FencedExecutionCallback:
    """The IFencedExecutionCallback of one executeFenced call."""

    def __init__(self, device: Device, id: int) -> None:
        self.device = device
        self.id = id

    def getExecutionInfo(self) -> tuple[ErrorStatus, Timing, Timing]:
        """(status, timingLaunched, timingFenced); raises only for transport or unknown ids."""
        reply = _call(
            self.device.callback_stub.getExecutionInfo,
            ppb.GetExecutionInfoRequest(callback=self.id),
        )
        # INVALID_ARGUMENT is no execution status here: it says the callback id is unknown.
        if reply.status == ErrorStatus.INVALID_ARGUMENT:
            raise error_from_status(reply.status, reply.message)
        self.message = reply.message
        self.pools = {p.poolIndex: bytes(p.data) for p in reply.outputPools}
        return (
            ErrorStatus(reply.status),
            _timing(reply, "timingLaunched"),
            _timing(reply, "timingFenced"),
        )

    def release(self) -> None:
        if self.id:
            _rpc(self.device.callback_stub.release, ppb.ReleaseRequest(id=self.id))
            self.id = 0


class Buffer:
    """An IBuffer from IDevice.allocate (driver-managed memory)."""

    def __init__(self, device: Device, id: int, token: int) -> None:
        self.device = device
        self.id = id
        self.token = token

    def copyTo(self, dst: InlineMemory | SharedMemory) -> bytes:
        """Copy the buffer into ``dst``; returns the bytes when ``dst`` is inline."""
        message = ppb.CopyToRequest(buffer=self.id, dst=cv.memory_to_pb(dst))
        return bytes(_rpc(self.device.buffer_stub.copyTo, message).data)

    def copyFrom(self, src: InlineMemory | SharedMemory, dimensions: Sequence[int] = ()) -> None:
        message = ppb.CopyFromRequest(
            buffer=self.id, src=cv.memory_to_pb(src), dimensions=list(dimensions)
        )
        _rpc(self.device.buffer_stub.copyFrom, message)

    def release(self) -> None:
        if self.id:
            _rpc(self.device.buffer_stub.release, ppb.ReleaseRequest(id=self.id))
            self.id = 0

