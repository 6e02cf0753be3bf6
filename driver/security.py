"""What a server does when exposed: TLS, bearer tokens, refusing insecure exposure, call tracking.

- ``ServerSecurity``: the server's certificate and key, the CA of client
  certificates (mutual TLS), the accepted bearer tokens, ``allow_insecure`` and
  the directories client-given cache files must lie in (``cache_roots``;
  none: client-given cache files are refused).
- ``Guard`` (made by ``create_server``): refuses to listen on an address that
  is not loopback without TLS unless ``allow_insecure``; adds the port (TLS or
  not); adds the health service (``nnhal.driver.health``); and its interceptor
  (``CallGuard``) checks the token of every call, counts the calls in flight
  (for a graceful shutdown) and records whether the caller is on this host
  (``call_is_local``: ``nnhal.driver.memory`` refuses shared memory to remote callers).
- ``GuardedServer``: the ``grpc.Server`` returned by ``create_server``; its
  ``stop`` first turns the health service NOT_SERVING.

Tokens: every call except the health service's must carry
``authorization: Bearer <token>`` with one of the server's tokens; the
comparison takes the same time wherever the first difference is
(``hmac.compare_digest`` against every token). Otherwise the call ends with
gRPC UNAUTHENTICATED and a message saying what was missing or wrong.
"""

from __future__ import annotations

import contextvars
import hmac
import ipaddress
import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from nnhal._client_security import AUTH_HEADER, is_loopback_host

log = logging.getLogger("nnhal.driver.security")

HEALTH_PREFIX = "/grpc.health.v1.Health/"
_CALL_IS_LOCAL: contextvars.ContextVar[bool] = contextvars.ContextVar("nnhal_local", default=True)


def call_is_local() -> bool:
    """Whether the gRPC call being served comes from this host (True outside a call)."""
    return _CALL_IS_LOCAL.get()


def peer_is_local(peer: str | None) -> bool:
    """``context.peer()`` ("ipv4:127.0.0.1:5000", "ipv6:[::1]:5000", "unix:...") on this host?"""
    if not peer:
        return False
    kind, _, rest = peer.partition(":")
    if kind in ("unix", "unix-abstract"):
        return True
    if kind not in ("ipv4", "ipv6"):
        return False
    host = rest.rpartition(":")[0].strip("[]") if kind == "ipv6" else rest.partition(":")[0]
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def read_tokens(path: str) -> tuple[str, ...]:
    """The tokens of a token file: one per non-empty line ("#" starts a comment line)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read the token file {path}: {exc}") from None
    tokens = tuple(
        line.strip()
        for line in text.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    )
    if not tokens:
        raise ValueError(f"the token file {path} holds no token")
    short = [t for t in tokens if len(t) < 16]
    if short:
        raise ValueError(f"the token file {path}: a token must have at least 16 characters")
    return tokens


def _read(path: str | None, what: str) -> bytes | None:
    if not path:
        return None
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise ValueError(f"cannot read the {what} {path}: {exc.strerror or exc}") from None


@dataclass(frozen=True)
class ServerSecurity:
    """How a server protects itself (see the module docstring); the default: nothing."""

    cert_chain: bytes | None = None
    private_key: bytes | None = None
    client_ca: bytes | None = None
    tokens: tuple[str, ...] = ()
    allow_insecure: bool = False
    cache_roots: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        if (self.cert_chain is None) != (self.private_key is None):
            raise ValueError("TLS needs both a certificate (--tls-cert) and its key (--tls-key)")
        if self.client_ca is not None and self.cert_chain is None:
            raise ValueError("--tls-client-ca needs TLS (--tls-cert and --tls-key)")

    @property
    def tls(self) -> bool:
        return self.cert_chain is not None

    @classmethod
    def from_files(
        cls,
        *,
        tls_cert: str | None = None,
        tls_key: str | None = None,
        tls_client_ca: str | None = None,
        token_file: str | None = None,
        allow_insecure: bool = False,
        cache_roots: Sequence[str] | None = None,
    ) -> ServerSecurity:
        return cls(
            cert_chain=_read(tls_cert, "TLS certificate"),
            private_key=_read(tls_key, "TLS key"),
            client_ca=_read(tls_client_ca, "TLS client CA"),
            tokens=read_tokens(token_file) if token_file else (),
            allow_insecure=allow_insecure,
            cache_roots=None if cache_roots is None else tuple(str(r) for r in cache_roots),
        )


class _Abort:
    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        self.code, self.message = code, message

    def __call__(self, request: Any, context: grpc.ServicerContext) -> Any:
        context.abort(self.code, self.message)


_FACTORIES = {
    (False, False): grpc.unary_unary_rpc_method_handler,
    (False, True): grpc.unary_stream_rpc_method_handler,
    (True, False): grpc.stream_unary_rpc_method_handler,
    (True, True): grpc.stream_stream_rpc_method_handler,
}


def _behavior(handler: Any) -> Callable:
    for name in ("unary_unary", "unary_stream", "stream_unary", "stream_stream"):
        fn = getattr(handler, name, None)
        if fn is not None:
            return fn
    raise ValueError("a method handler without behavior")


def _rebuild(handler: Any, behavior: Callable) -> Any:
    factory = _FACTORIES[(handler.request_streaming, handler.response_streaming)]
    return factory(
        behavior,
        request_deserializer=handler.request_deserializer,
        response_serializer=handler.response_serializer,
    )


class CallGuard(grpc.ServerInterceptor):
    """Token check, calls-in-flight count and caller locality for every call."""

    def __init__(self, tokens: Sequence[str] = (), exposed: bool = True) -> None:
        self._tokens = tuple(f"Bearer {t}".encode() for t in tokens)
        self._exposed = exposed  # on a loopback address every caller is local
        self._lock = threading.Lock()
        self._in_flight = 0
        self._wrapped: dict[str, tuple[Any, Any]] = {}  # method -> (handler, its wrapper)

    @property
    def in_flight(self) -> int:
        """Calls being served now (health calls not counted)."""
        with self._lock:
            return self._in_flight

    def _refusal(self, metadata: Any) -> str | None:
        """Why a call's credentials are refused, or None when they are good."""
        values = [v for k, v in metadata or () if k == AUTH_HEADER]
        if not values:
            return (
                "this server needs a bearer token: send `authorization: Bearer <token>` "
                "metadata (nnhal clients: --token-file FILE or NNHAL_TOKEN)"
            )
        value = values[-1]
        raw = value if isinstance(value, bytes) else str(value).encode("utf-8", "replace")
        scheme, _, credential = raw.partition(b" ")
        candidate = b"Bearer " + credential.strip()
        ok = scheme.lower() == b"bearer"
        matched = False
        for token in self._tokens:  # every token, so the time does not say which one is close
            matched |= hmac.compare_digest(candidate, token)
        if ok and matched:
            return None
        return "the bearer token is not valid for this server"

    def intercept_service(self, continuation: Callable, details: Any) -> Any:
        handler = continuation(details)
        if handler is None:
            return None
        method = details.method or ""
        if method.startswith(HEALTH_PREFIX):
            return handler
        if self._tokens:
            why = self._refusal(details.invocation_metadata)
            if why is not None:
                log.info("refused %s: %s", method, why)
                return _rebuild(handler, _Abort(grpc.StatusCode.UNAUTHENTICATED, why))
        cached = self._wrapped.get(method)
        if cached is not None and cached[0] is handler:
            return cached[1]
        behavior = _behavior(handler)
        if handler.response_streaming:
            wrapped = _rebuild(handler, self._streaming(behavior, method))
        else:
            wrapped = _rebuild(handler, self._unary(behavior, method))
        self._wrapped[method] = (handler, wrapped)
        return wrapped

    def _enter(self, method: str, context: Any) -> contextvars.Token | None:
        with self._lock:
            self._in_flight += 1
        if log.isEnabledFor(logging.DEBUG):
            log.debug("call %s from %s", method, context.peer())
        if not self._exposed:
            return None
        return _CALL_IS_LOCAL.set(peer_is_local(context.peer()))

    def _leave(self, mark: contextvars.Token | None) -> None:
        with self._lock:
            self._in_flight -= 1
        if mark is not None:
            try:
                _CALL_IS_LOCAL.reset(mark)
            except ValueError:  # a stream closed by the garbage collector on another thread
                pass

    def _unary(self, behavior: Callable, method: str) -> Callable:
        def call(request: Any, context: Any) -> Any:
            mark = self._enter(method, context)
            try:
                return behavior(request, context)
            finally:
                self._leave(mark)

        return call

    def _streaming(self, behavior: Callable, method: str) -> Callable:
        def call(request: Any, context: Any) -> Iterator[Any]:
            # gRPC drains a response iterator on the thread that called the behavior,
            # so the locality mark holds while the stream's messages are made.
            mark = self._enter(method, context)
            try:
                yield from behavior(request, context)
            finally:
                self._leave(mark)

        return call


class Guard:
    """The security of one server being made (``create_server``)."""

    def __init__(self, host: str, security: ServerSecurity | None, states: Mapping[str, Any]):
        self.security = security or ServerSecurity()
        self.exposed = not is_loopback_host(host)
        check_exposure(host, self.security)
        self.calls = CallGuard(self.security.tokens, self.exposed)
        self.interceptors = [self.calls]
        self.health: Any = None
        self.streams: Any = None  # the server's StreamGate (driver/streams.py)
        self.on_stopped: list[Callable[[], object]] = []  # called once the server has stopped
        self.states = states
        self._confine_caches(states)

    def _confine_caches(self, states: Mapping[str, Any]) -> None:
        """Client-given cache files: under ``cache_roots`` only; without roots none at all,
        on loopback too (a path a client names is a file of the server's user). The
        server-side cache directory (``--cache-dir``, a token and no handles) is not
        affected."""
        roots = tuple(self.security.cache_roots or ())
        for state in states.values():
            cache = getattr(state.device, "cache", None)
            if cache is None or not hasattr(cache, "allowed_roots"):
                continue
            cache.allowed_roots = roots

    def add_services(self, server: grpc.Server) -> None:
        from grpc_health.v1 import health_pb2_grpc as hgrpc
        from nnhal.driver.health import DeviceHealth

        self.health = DeviceHealth(self.states)
        hgrpc.add_HealthServicer_to_server(self.health, server)

    def add_port(self, server: grpc.Server, address: str) -> int:
        s = self.security
        if not s.tls:
            return server.add_insecure_port(address)
        credentials = grpc.ssl_server_credentials(
            [(s.private_key, s.cert_chain)],
            root_certificates=s.client_ca,
            require_client_auth=s.client_ca is not None,
        )
        return server.add_secure_port(address, credentials)

    def wrap(self, server: grpc.Server) -> GuardedServer:
        return GuardedServer(server, self)


def check_exposure(host: str, security: ServerSecurity) -> None:
    """ValueError when listening on ``host`` would expose the server without TLS."""
    if is_loopback_host(host) or security.tls or security.allow_insecure:
        return
    raise ValueError(
        f"refusing to listen on {host or 'every interface'} without TLS: it is not a loopback "
        "address, so anyone who can reach it could run models and name files and shared memory "
        "on this host. Give --tls-cert FILE --tls-key FILE (and --token-file FILE), or "
        "--allow-insecure to accept that"
    )


class GuardedServer(grpc.Server):
    """A ``grpc.Server`` whose ``stop`` turns the health service NOT_SERVING first."""

    def __init__(self, server: grpc.Server, guard: Guard) -> None:
        self._server = server
        self.guard = guard

    @property
    def in_flight(self) -> int:
        return self.guard.calls.in_flight

    @property
    def states(self) -> Mapping[str, Any]:
        """The served devices' ``ServiceState`` by name (for in-process inspection)."""
        return self.guard.states

    def stop(self, grace: float | None) -> threading.Event:
        if self.guard.health is not None:
            self.guard.health.shutdown()
        stopped = self._server.stop(grace)
        if self.guard.on_stopped:
            # what runs beside the server (execution workers) ends once the calls have
            hooks = list(self.guard.on_stopped)
            self.guard.on_stopped.clear()

            def after() -> None:
                stopped.wait()
                for hook in hooks:
                    hook()

            threading.Thread(target=after, name="nnhal-stop", daemon=True).start()
        return stopped

    def start(self) -> None:
        self._server.start()

    def wait_for_termination(self, timeout: float | None = None) -> bool:
        return self._server.wait_for_termination(timeout)

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        self._server.add_generic_rpc_handlers(handlers)

    def add_registered_method_handlers(self, service_name: str, handlers: Any) -> None:
        self._server.add_registered_method_handlers(service_name, handlers)

    def add_insecure_port(self, address: str) -> int:
        return self._server.add_insecure_port(address)

    def add_secure_port(self, address: str, server_credentials: Any) -> int:
        return self._server.add_secure_port(address, server_credentials)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._server, name)

