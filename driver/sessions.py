"""Client sessions: who owns a server-side object, and when a client is gone.

The HAL's binder objects die with their client process; over gRPC the server
cannot see a client go away between calls. A client therefore names itself
with the gRPC metadata key ``nnhal-session`` (an opaque string, a UUID in
``nnhal.client``) and renews a lease with ``INnhalControl.keepAlive``. The
objects its calls create are owned by that session; when the lease expires
or the client calls ``endSession``, they are released and its executions
still running are cancelled (control.proto documents the contract).
"""

from __future__ import annotations

from typing import Any

SESSION_HEADER = "nnhal-session"


def session_of(context: Any) -> str | None:
    """The session a call belongs to (its ``nnhal-session`` metadata), or None."""
    if context is None:
        return None
    for key, value in context.invocation_metadata() or ():
        if key == SESSION_HEADER:
            return value or None
    return None


def client_key(context: Any) -> str:
    """Who a call comes from, for per-client limits: the session, else the connection
    (``context.peer()``, e.g. ``ipv4:127.0.0.1:53122``)."""
    session = session_of(context)
    if session is not None:
        return f"session:{session}"
    peer = context.peer() if context is not None else None
    return f"peer:{peer or 'unknown'}"
