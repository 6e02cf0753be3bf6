"""Budgets for long-lived streams, so that open streams can never starve unary calls.

grpcio's synchronous server runs every call on a thread of one pool, and a
stream holds its thread for as long as it is open, sending or not. Left
alone, 16 idle burst streams (or 16 health ``Watch`` streams, which need no
token) would take every thread, and ``getStatus``, executions and health
checks would wait until they close.

So the server (``nnhal.driver.server.create_server``) sizes its pool as the
unary workers plus one thread per stream its budgets allow, and
``StreamGate`` (a server interceptor) admits a stream only within them:

- ``max_bursts`` / ``max_watches``: open ``configureExecutionBurst`` /
  ``grpc.health.v1.Health/Watch`` streams on the whole server;
- ``max_bursts_per_client`` / ``max_watches_per_client``: per client
  (``nnhal.driver.sessions.client_key``: the session, else the connection).

A stream beyond a budget ends at once with gRPC RESOURCE_EXHAUSTED and a
message naming the budget; the unary workers stay free whatever streams are
open. ``StreamLimits.pool_size`` says how many threads that takes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import grpc
from nnhal.driver.sessions import client_key

log = logging.getLogger("nnhal.driver.streams")

BURST_METHOD = "/nnhal.v1_3.IPreparedModel/configureExecutionBurst"
WATCH_METHOD = "/grpc.health.v1.Health/Watch"


@dataclass(frozen=True)
class StreamLimits:
    """How many streams a server keeps open (see the module docstring)."""

    max_bursts: int = 64
    max_bursts_per_client: int = 16
    max_watches: int = 32
    max_watches_per_client: int = 4

    def __post_init__(self) -> None:
        for name in ("max_bursts", "max_bursts_per_client", "max_watches", "max_watches_per_client"):
            if int(getattr(self, name)) < 0:
                raise ValueError(f"{name} must be >= 0")

    def pool_size(self, unary_workers: int) -> int:
        """Threads the server needs: ``unary_workers`` always free for unary calls, one per
        admitted stream, and a few to answer refused streams at once."""
        return unary_workers + self.max_bursts + self.max_watches + 4


class _Budget:
    """Open streams of one kind: in total and per client. Thread-safe."""

    def __init__(self, kind: str, total: int, per_client: int, keys: tuple[str, str]) -> None:
        self.kind, self.total, self.per_client, self.keys = kind, total, per_client, keys
        self._open = 0
        self._by_client: dict[str, int] = {}
        self._lock = threading.Lock()

    @property
    def open(self) -> int:
        with self._lock:
            return self._open

    def take(self, client: str) -> str | None:
        """Admit one stream of ``client``; None, or why it is refused."""
        with self._lock:
            held = self._by_client.get(client, 0)
            if held >= self.per_client:
                return (
                    f"this client ({client}) has {held} {self.kind} streams open; the server "
                    f"allows {self.per_client} per client ({self.keys[1]}); close one first"
                )
            if self._open >= self.total:
                return (
                    f"the server has {self._open} {self.kind} streams open, its most "
                    f"({self.keys[0]}); retry later"
                )
            self._open += 1
            self._by_client[client] = held + 1
            return None

    def give_back(self, client: str) -> None:
        with self._lock:
            self._open -= 1
            held = self._by_client.get(client, 1) - 1
            if held > 0:
                self._by_client[client] = held
            else:
                self._by_client.pop(client, None)


class StreamGate(grpc.ServerInterceptor):
    """Admits burst and health-watch streams within their budgets (module docstring)."""

    def __init__(self, limits: StreamLimits | None = None) -> None:
        self.limits = limits or StreamLimits()
        lim = self.limits
        self.budgets = {
            BURST_METHOD: _Budget(
                "burst", lim.max_bursts, lim.max_bursts_per_client,
                ("max_bursts", "max_bursts_per_client"),
            ),
            WATCH_METHOD: _Budget(
                "health Watch", lim.max_watches, lim.max_watches_per_client,
                ("max_watches", "max_watches_per_client"),
            ),
        }
        self._wrapped: dict[str, tuple[Any, Any]] = {}
        self.refused = 0  # streams refused so far (getResourceUsage, tests)

    def open_streams(self) -> dict[str, int]:
        return {budget.kind: budget.open for budget in self.budgets.values()}

    def intercept_service(self, continuation: Callable, details: Any) -> Any:
        handler = continuation(details)
        budget = self.budgets.get(details.method or "")
        if handler is None or budget is None or not handler.response_streaming:
            return handler
        cached = self._wrapped.get(details.method)
        if cached is not None and cached[0] is handler:
            return cached[1]
        behavior = handler.stream_stream or handler.unary_stream
        factory = (
            grpc.stream_stream_rpc_method_handler
            if handler.request_streaming
            else grpc.unary_stream_rpc_method_handler
        )
        wrapped = factory(
            self._gated(budget, behavior),
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
        self._wrapped[details.method] = (handler, wrapped)
        return wrapped

    def _gated(self, budget: _Budget, behavior: Callable) -> Callable:
        def call(request: Any, context: Any) -> Iterator[Any]:
            client = client_key(context)
            why = budget.take(client)
            if why is not None:
                self.refused += 1
                log.info("refused a %s stream: %s", budget.kind, why)
                context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, why)
            try:
                yield from behavior(request, context)
            finally:
                budget.give_back(client)

        return call


#: Connection limits of the server (grpc channel arguments): a connection with no
#: call for 5 minutes is closed (clients reconnect on their next call), and the
#: server pings a connection silent for 60 s, closing it when no answer comes in 20 s
#: (a client host that vanished without closing its sockets).
CONNECTION_OPTIONS: tuple[tuple[str, int], ...] = (
    ("grpc.max_connection_idle_ms", 300_000),
    ("grpc.keepalive_time_ms", 60_000),
    ("grpc.keepalive_timeout_ms", 20_000),
)


__all__ = ["CONNECTION_OPTIONS", "StreamGate", "StreamLimits"]
