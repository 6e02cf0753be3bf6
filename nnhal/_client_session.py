"""The client's side of a session (nnhal extension; the server's side is nnhal.driver.sessions).

``ClientSession.open(channel)`` names the client with a random session id,
which ``nnhal.client.Device`` sends as the ``nnhal-session`` metadata of
every call (``header``), and renews the lease with ``INnhalControl.keepAlive``
from a daemon thread every third of the lease. ``close()`` ends the session
(the server releases whatever the client still holds); a client that dies
stops renewing, and the server does the same once the lease runs out.

A server without the control service (another driver speaking the HAL
proto) answers keepAlive with UNIMPLEMENTED: the session is then off and
nothing else changes.
"""

from __future__ import annotations

import logging
import threading
import uuid
from typing import Any

import grpc

from nnhal._proto.v1_3 import control_pb2 as cpb
from nnhal._proto.v1_3 import control_pb2_grpc as cgrpc
from nnhal.control import SESSION_HEADER

log = logging.getLogger("nnhal.client")

#: Default lease: a client that stops renewing is cleaned up this long after.
DEFAULT_LEASE_S = 10.0


class ClientSession:
    """A session id, its lease and the thread that renews it."""

    def __init__(self, channel: grpc.Channel, lease_s: float, session_id: str) -> None:
        self.id = session_id
        self.lease_s = lease_s
        self._stub = cgrpc.INnhalControlStub(channel)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def open(
        cls, channel: grpc.Channel, lease_s: float = DEFAULT_LEASE_S, timeout: float = 10.0
    ) -> ClientSession | None:
        """A session on ``channel`` (None if the server has none)."""
        session = cls(channel, lease_s, uuid.uuid4().hex)
        try:
            granted = session._renew(timeout, wait_for_ready=True)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
                log.info("the server has no client sessions (keepAlive is unimplemented)")
                return None
            raise
        session.lease_s = granted
        session._thread = threading.Thread(
            target=session._beat, name=f"nnhal-session-{session.id[:8]}", daemon=True
        )
        session._thread.start()
        return session

    @property
    def header(self) -> tuple[str, str]:
        """The metadata pair to send on every call (``nnhal._metadata``)."""
        return (SESSION_HEADER, self.id)

    def _renew(self, timeout: float, wait_for_ready: bool = False) -> float:
        request = cpb.KeepAliveRequest(session=self.id, leaseMillis=int(self.lease_s * 1000))
        reply = self._stub.keepAlive(request, timeout=timeout, wait_for_ready=wait_for_ready)
        return reply.leaseMillis / 1000 if reply.leaseMillis else self.lease_s

    def _beat(self) -> None:
        while not self._stop.wait(self.lease_s / 3):
            try:
                self._renew(timeout=max(self.lease_s / 3, 0.1))
            except grpc.RpcError as exc:  # the server is gone or busy: try again next beat
                log.debug("session %s: keepAlive failed: %s", self.id, exc.code())

    def close(self) -> None:
        """Stop renewing and end the session on the server (best effort)."""
        if self._stop.is_set():
            return
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        try:
            self._stub.endSession(cpb.EndSessionRequest(session=self.id), timeout=5)
        except grpc.RpcError as exc:
            log.debug("session %s: endSession failed: %s", self.id, exc.code())

    def __repr__(self) -> str:
        return f"ClientSession({self.id!r}, lease {self.lease_s} s)"


def close_quietly(session: Any) -> None:
    """For weakref.finalize: end the session of a Device that was never closed."""
    try:
        session.close()
    except Exception as exc:  # noqa: BLE001 - interpreter shutdown, closed channel...
        log.debug("session %s: not ended: %s", session.id, exc)
