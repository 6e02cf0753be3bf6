"""Client sessions: who owns a server-side object, and when a client is gone.

The HAL's binder objects die with their client process; over gRPC the server
cannot see a client go away between calls. A client therefore names itself
with the gRPC metadata key ``nnhal-session`` (an opaque string, a UUID in
``nnhal.client``) and renews a lease with ``INnhalControl.keepAlive``. The
objects its calls create are owned by that session; when the lease expires
or the client calls ``endSession``, they are released and its executions
still running are cancelled (control.proto documents the contract).

A busy server never takes a live client for a dead one: a session with a call
being served (a long preparation) does not expire, and its lease restarts
when the call ends; while calls wait for a server thread (``backlog``), or
after the reaper itself could not run for a while, no lease is judged, and
every lease that ran out meanwhile gets a new term once the server catches up.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from nnhal.control import SESSION_HEADER
from nnhal.errors import InvalidArgument

log = logging.getLogger("nnhal.driver.sessions")


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


#: The reaper woke this much later than it meant to: the interpreter was held, so
#: renewals may not have been served either (every lapsed lease gets a new term).
_LATE_S = 0.5
#: While calls wait for a server thread, leases are looked at again this often.
_BACKLOG_POLL_S = 0.1

#: Lease bounds (ms): the default when keepAlive asks 0, and the clamp range.
DEFAULT_LEASE_MS = 10_000
MIN_LEASE_MS = 200
MAX_LEASE_MS = 600_000


class SessionTable:
    """The server's client sessions: their leases and their running executions.

    ``release(session, reason)`` is the server's hook that frees the session's
    objects on every device (``ServiceState.release_session``) and returns how
    many it freed. A reaper thread, started with the first session and ended
    when none is left, expires leases; ``close()`` stops it (server stop).
    """

    def __init__(
        self, release: Callable[[str, str], int], backlog: Callable[[], bool] | None = None
    ) -> None:
        self._release = release
        # whether calls are waiting for a server thread (renewals may be among them)
        self.backlog = backlog
        self._lease_s: dict[str, float] = {}
        self._expiry: dict[str, float] = {}
        self._running: dict[str, set[Any]] = {}
        self._calls: dict[str, int] = {}  # calls of each session being served now
        # the condition's own lock, taken directly where nothing is notified: every call
        # of a client with a session passes there, and a Condition's `with` is Python code
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._reaper: threading.Thread | None = None
        self._closed = False
        self.expired = 0  # sessions whose lease ran out (for getResourceUsage / tests)

    # ---- leases ----

    def keep_alive(self, session: str, lease_ms: int = 0) -> int:
        """Open or renew ``session``; returns the lease granted in ms."""
        if not session:
            raise InvalidArgument("keepAlive: empty session id")
        granted = min(max(int(lease_ms) or DEFAULT_LEASE_MS, MIN_LEASE_MS), MAX_LEASE_MS)
        with self._cond:
            self._lease_s[session] = granted / 1000
            self._expiry[session] = time.monotonic() + granted / 1000
            self._start_reaper()
            self._cond.notify()
        return granted

    def touch(self, session: str | None) -> None:
        """A call of ``session`` arrived: renew its lease (opening it with the default)."""
        if session is None:
            return
        with self._cond:
            self._renew(session)

    def _renew(self, session: str) -> None:
        """Renew ``session``'s lease, opening it with the default (the lock held)."""
        lease = self._lease_s.setdefault(session, DEFAULT_LEASE_MS / 1000)
        self._expiry[session] = time.monotonic() + lease
        self._start_reaper()

    def end(self, session: str, reason: str = "the client ended its session") -> int:
        """Close ``session`` now: cancel its executions, release its objects."""
        with self._cond:
            self._lease_s.pop(session, None)
            self._expiry.pop(session, None)
            running = list(self._running.pop(session, ()))
            self._cond.notify()  # the reaper ends now when this was the last session
        for cancel in running:
            cancel.cancel(reason)
        released = self._release(session, reason)
        if released or running:
            log.info(
                "session %s: %s; %d objects released, %d executions cancelled",
                session,
                reason,
                released,
                len(running),
            )
        return released

    def __len__(self) -> int:
        with self._cond:
            return len(self._expiry)

    def running_count(self) -> int:
        with self._cond:
            return sum(len(c) for c in self._running.values())

    # ---- calls in flight ----

    def call_started(self, session: str) -> None:
        """A call of ``session`` is being served: its lease cannot run out meanwhile (a long
        call counts as activity); ``call_ended`` says when it is over. Every HAL call of a
        client with a session passes here, under one lock."""
        with self._lock:
            self._renew(session)
            self._calls[session] = self._calls.get(session, 0) + 1

    def call_ended(self, session: str) -> None:
        """The call ``call_started`` announced has ended: its lease restarts now."""
        with self._lock:
            left = self._calls.get(session, 1) - 1
            if left > 0:
                self._calls[session] = left
            else:
                self._calls.pop(session, None)
            if session in self._lease_s:
                self._expiry[session] = time.monotonic() + self._lease_s[session]

    # ---- executions ----

    def track(self, session: str, cancel: Any) -> None:
        """An execution of ``session`` runs (``running``, without a context manager):
        renew the lease, and let the session's end cancel it."""
        with self._lock:
            self._renew(session)
            self._running.setdefault(session, set()).add(cancel)

    def track_in_call(self, session: str, cancel: Any) -> None:
        """``track`` for an execution inside a call of ``session`` between ``call_started``
        and ``call_ended``: that renewed the lease, and holds it while the call lasts."""
        with self._lock:
            self._running.setdefault(session, set()).add(cancel)

    def untrack(self, session: str, cancel: Any) -> None:
        """The execution ``track`` announced has ended."""
        with self._lock:
            tracked = self._running.get(session)
            if tracked is not None:
                tracked.discard(cancel)
                if not tracked:
                    del self._running[session]

    @contextlib.contextmanager
    def running(self, session: str | None, cancel: Any) -> Iterator[None]:
        """Track an execution of ``session`` so that ending the session cancels it."""
        if session is None:
            yield
            return
        self.track(session, cancel)
        try:
            yield
        finally:
            self.untrack(session, cancel)

    # ---- the reaper ----

    def _start_reaper(self) -> None:  # with the condition held
        if self._reaper is None and not self._closed:
            self._reaper = threading.Thread(
                target=self._reap, name="nnhal-session-reaper", daemon=True
            )
            self._reaper.start()

    def _busy(self) -> bool:
        try:
            return bool(self.backlog is not None and self.backlog())
        except Exception:  # noqa: BLE001 - a probe that fails says nothing
            return False

    def _grace(self, now: float) -> None:  # with the condition held
        """The server could not hear renewals for a while: every lease that ran out
        meanwhile gets one more term from now."""
        for session, expiry in self._expiry.items():
            if expiry <= now:
                self._expiry[session] = now + self._lease_s.get(session, DEFAULT_LEASE_MS / 1000)

    def _reap(self) -> None:
        planned: float | None = None
        while True:
            with self._cond:
                if self._closed or not self._expiry:
                    self._reaper = None
                    return
                now = time.monotonic()
                if planned is not None and now - planned > _LATE_S:
                    # this thread itself could not run for a while (the interpreter was
                    # held): renewals could not be served either
                    self._grace(now)
                planned = None
                due = [
                    s for s, t in self._expiry.items() if t <= now and not self._calls.get(s)
                ]
                if due and self._busy():
                    # calls wait for a server thread, renewals perhaps among them: judge no
                    # lease until the server has caught up, then give every one a new term
                    self._cond.wait(_BACKLOG_POLL_S)
                    planned = time.monotonic()
                    if not self._busy():
                        self._grace(time.monotonic())
                    continue
                if not due:
                    open_ = [t for s, t in self._expiry.items() if not self._calls.get(s)]
                    wait = (min(open_) - now) if open_ else _BACKLOG_POLL_S
                    wait = max(0.0, min(wait, _BACKLOG_POLL_S * 10))
                    self._cond.wait(wait)
                    planned = now + wait
                    continue
            for session in due:
                with self._cond:  # renewed, ended or called meanwhile?
                    expiry = self._expiry.get(session)
                    if expiry is None or expiry > time.monotonic() or self._calls.get(session):
                        continue
                    self.expired += 1
                try:
                    self.end(session, "its lease expired (the client went away)")
                except Exception:
                    log.exception("session %s: releasing its objects failed", session)

    def close(self) -> None:
        """Stop the reaper (the server is stopping); objects stay until the server goes."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            reaper = self._reaper
        if reaper is not None and reaper is not threading.current_thread():
            reaper.join(timeout=5)
