"""Occupancy limits of one served device (see ``nnhal.driver.limits`` for the statuses).

- ``ExecutionSlots``: executions running at once (``max_concurrent_executions``);
  a call over the limit is refused at once with RESOURCE_EXHAUSTED_TRANSIENT
  rather than queued, so a flood of fenced executions cannot pile up threads.
- ``ClientQuota``: server-side objects (prepared models, driver buffers) one
  client holds at once. It registers the object in the service's
  ``Registry`` and remembers the id per client; an id that has left the
  registry -- released by the client, or by whatever else removes objects
  (a session that ended) -- no longer counts, so the quota needs no hook on
  every way out.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from nnhal.errors import ResourceExhausted


class ExecutionSlots:
    """A non-blocking counter of running executions. Thread-safe."""

    def __init__(self, limit: int, device: str = "") -> None:
        self.limit = limit
        self.device = device
        self._running = 0
        self._lock = threading.Lock()

    @property
    def running(self) -> int:
        with self._lock:
            return self._running

    def acquire(self) -> None:
        """Take a slot or raise RESOURCE_EXHAUSTED_TRANSIENT (then hold none)."""
        with self._lock:
            if self._running >= self.limit:
                raise ResourceExhausted(
                    f"device {self.device!r} is running {self._running} executions; it runs at "
                    f"most {self.limit} at once (limit max_concurrent_executions); retry when "
                    "one has finished",
                    transient=True,
                )
            self._running += 1

    def release(self) -> None:
        with self._lock:
            if self._running > 0:
                self._running -= 1

    @contextmanager
    def slot(self) -> Iterator[None]:
        self.acquire()
        try:
            yield
        finally:
            self.release()


class ClientQuota:
    """At most ``limit`` live objects of one registry per client. Thread-safe."""

    #: adds between two sweeps of clients whose objects are all gone
    _SWEEP_EVERY = 256

    def __init__(self, registry: Any, limit: int, what: str, key: str) -> None:
        self.registry = registry
        self.limit = limit
        self.what = what  # "prepared models"
        self.key = key  # "max_prepared_models_per_client"
        self._owned: dict[str, set[int]] = {}
        self._adds = 0
        self._lock = threading.Lock()

    def held(self, client: str) -> int:
        with self._lock:
            return len(self._live(client))

    def add(self, client: str, obj: Any, owner: str | None = None) -> int:
        """Register ``obj`` for ``client`` (``owner``: its session, for the registry) and
        return its id, or raise
        RESOURCE_EXHAUSTED_TRANSIENT when the client already holds ``limit``."""
        with self._lock:
            live = self._live(client)
            if len(live) >= self.limit:
                raise ResourceExhausted(
                    f"this client ({client}) holds {len(live)} {self.what}; the device allows "
                    f"at most {self.limit} per client (limit {self.key}); release some first",
                    transient=True,
                )
            key = self.registry.add(obj, owner=owner, holder=client)
            live.add(key)
            self._owned[client] = live
            self._adds += 1
            if self._adds % self._SWEEP_EVERY == 0:
                self._sweep()
            return key

    def _live(self, client: str) -> set[int]:
        ids = self._owned.get(client, set())
        return {k for k in ids if self.registry.peek(k) is not None}

    def _sweep(self) -> None:
        """Forget clients that hold nothing any more (connections come and go)."""
        for client in list(self._owned):
            live = self._live(client)
            if live:
                self._owned[client] = live
            else:
                del self._owned[client]


__all__ = ["ClientQuota", "ExecutionSlots"]
