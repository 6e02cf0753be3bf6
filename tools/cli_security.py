"""`nnhal serve`'s exposure options and its graceful shutdown; the client commands' security options.

Server (``add_serve_options``, ``serve``):

- ``--tls-cert FILE --tls-key FILE [--tls-client-ca FILE]``: TLS; with a client
  CA every client must present a certificate it signed (mutual TLS);
- ``--token-file FILE`` (default ``$NNHAL_SERVE_TOKEN_FILE``): every call needs
  ``authorization: Bearer <one of the file's tokens>``;
- ``--allow-insecure``: listen on an address that is not loopback without TLS
  (refused otherwise, with a message);
- ``--cache-root DIR`` (repeatable): client-given cache files must lie under
  these directories (default: none; clients may still cache through
  ``--cache-dir`` with a token and no files);
- ``--grace SECONDS`` (default 10): on SIGTERM/SIGINT, new calls are refused at
  once and calls in flight get this long to finish; a second signal stops at once;
- ``--log-level LEVEL``: log the driver to stderr (``debug`` logs every call).

Clients: ``add_client_options`` (``--tls-ca/--tls-cert/--tls-key/--tls-server-name/
--token/--token-file``, environment ``NNHAL_TOKEN`` ...) and ``client_security``.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Sequence
from typing import Any

DEFAULT_GRACE = 10.0
# Beyond the grace period: how long gRPC's own stop, and then the process's exit, may
# take before the process ends itself (with the stacks of what still runs on stderr).
# A supervisor's SIGTERM must end the process even when a library thread never does.
STOP_MARGIN = 15.0
_PATHS = frozenset({"tls_ca", "tls_cert", "tls_key", "token_file"})


def add_serve_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("exposure (see README, 'Exposing nnhal serve')")
    g.add_argument("--tls-cert", metavar="FILE", help="PEM server certificate (chain): serve TLS")
    g.add_argument("--tls-key", metavar="FILE", help="PEM key of --tls-cert")
    g.add_argument(
        "--tls-client-ca", metavar="FILE", help="PEM CA: require client certificates it signed"
    )
    g.add_argument(
        "--token-file",
        metavar="FILE",
        default=os.environ.get("NNHAL_SERVE_TOKEN_FILE") or None,
        help="bearer tokens, one per line: every call must carry one "
        "(default $NNHAL_SERVE_TOKEN_FILE)",
    )
    g.add_argument(
        "--allow-insecure",
        action="store_true",
        help="allow an address that is not loopback without TLS",
    )
    g.add_argument(
        "--cache-root",
        action="append",
        metavar="DIR",
        help="accept client-given cache files under DIR (repeatable; default: none are "
        "accepted, on loopback too)",
    )
    g.add_argument(
        "--grace",
        type=float,
        default=DEFAULT_GRACE,
        metavar="SECONDS",
        help=f"on SIGTERM/SIGINT, time given to calls in flight (default {DEFAULT_GRACE:g})",
    )
    g.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        help="log the driver to stderr at this level (debug: every call)",
    )


def add_client_options(p: argparse.ArgumentParser) -> None:
    from nnhal._client_security import add_arguments

    add_arguments(p)


def check_files(args: argparse.Namespace, names: Sequence[str]) -> None:
    """The files named by these options exist and can be read: else exit 1 (a file
    error), before the option checks that make the rest a usage error."""
    from nnhal.tools.cli import readable_file

    for name in names:
        path = getattr(args, name, None)
        if path:
            readable_file(path, f"--{name.replace('_', '-')}")


def client_security(args: argparse.Namespace) -> Any:
    from nnhal.tools.cli import EXIT_USAGE, CliError

    from nnhal._client_security import ClientSecurity

    check_files(args, ("tls_ca", "tls_cert", "tls_key", "token_file"))
    try:
        return ClientSecurity.from_args(args)
    except ValueError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None


def export_client_options(args: argparse.Namespace) -> None:
    """Put the connection options given into the environment (``NNHAL_TLS_CA``, ...), for
    client processes and every ``connect`` of this one; checked first."""
    from nnhal._client_security import _ENV

    client_security(args)  # readable files, one-line token: a usage error otherwise
    for name, variable in _ENV.items():
        value = getattr(args, name, None)
        if value:  # paths made absolute: the client processes may run elsewhere
            os.environ[variable] = os.path.abspath(value) if name in _PATHS else value
    if getattr(args, "token", None) or getattr(args, "token_file", None):
        # the option given wins over whichever form the environment had
        os.environ.pop(_ENV["token_file" if args.token else "token"], None)


def check_local(args: argparse.Namespace) -> None:
    """A usage error when connection options come without ``--target``."""
    from nnhal.tools.cli import EXIT_USAGE, CliError

    given = [
        f"--{name.replace('_', '-')}"
        for name in ("tls_ca", "tls_cert", "tls_key", "tls_server_name", "token", "token_file")
        if getattr(args, name, None)
    ]
    if given:
        raise CliError(
            f"{', '.join(given)} configure the connection to --target; without --target the "
            "driver runs in this process",
            EXIT_USAGE,
        )


def server_security(args: argparse.Namespace) -> Any:
    from nnhal.driver.security import ServerSecurity
    from nnhal.tools.cli import EXIT_USAGE, CliError

    if args.grace < 0:
        raise CliError("--grace must be >= 0", EXIT_USAGE)
    check_files(args, ("tls_cert", "tls_key", "tls_client_ca", "token_file"))
    try:
        return ServerSecurity.from_files(
            tls_cert=args.tls_cert,
            tls_key=args.tls_key,
            tls_client_ca=args.tls_client_ca,
            token_file=args.token_file,
            allow_insecure=args.allow_insecure,
            cache_roots=args.cache_root,
        )
    except ValueError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None


def serve(devices: Sequence[Any], address: str, args: argparse.Namespace, label: str) -> int:
    """Serve until SIGTERM/SIGINT, then drain: the body of ``nnhal serve``."""
    from nnhal.driver.server import close_devices, create_server
    from nnhal.tools.cli import EXIT_USAGE, CliError

    if args.log_level:
        from nnhal.tools.cli_logs import configure

        configure(args.log_level)  # the one format: time, level, logger
    security = server_security(args)
    try:
        server, bound = create_server(
            devices,
            address,
            security=security,
            reflection=not args.no_reflection,
            execution_workers=args.workers,
            worker_threads=args.threads,
        )
    except ValueError as exc:  # insecure exposure, a bad certificate...
        raise CliError(str(exc), EXIT_USAGE) from None
    except OSError as exc:  # a busy port (named with its holder when it can be told)
        raise CliError(str(exc)) from None
    except Exception as exc:  # noqa: BLE001 - grpc reports a failed bind as RuntimeError
        raise CliError(f"cannot listen on {address}: {exc}") from None
    signals: list[int] = []
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        signals.append(signum)
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        print(f"nnhal: serving device {label} on {bound}", flush=True)  # parsed: keep the form
        if security.tls or security.tokens:
            extras = [
                "TLS" if security.tls else "",
                "client certificates" if security.client_ca else "",
            ]
            extras.append("bearer token" if security.tokens else "")
            print(
                f"nnhal: requiring {', '.join(e for e in extras if e)}", file=sys.stderr, flush=True
            )
        while not stop.wait(0.5):
            pass
        whole_process = getattr(args, "whole_process", False)
        return _drain(
            server, args.grace, signals, lambda: close_devices(devices), whole_process=whole_process
        )
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _drain(
    server: Any,
    grace: float,
    signals: list[int],
    close: Any,
    margin: float = STOP_MARGIN,
    whole_process: bool = False,
) -> int:
    """Refuse new calls, give those in flight ``grace`` seconds, then stop; ``close``
    stops what the devices run beside the server (op-package worker processes).

    The process ends within ``grace + margin`` seconds of the stop and, when the server
    is the ``whole_process`` (the ``nnhal serve`` program, not a call of its ``main``),
    within ``margin`` more of returning, whatever else still runs: ``_force_exit`` says
    what did not end."""
    first = len(signals)
    in_flight = server.in_flight
    done = server.stop(grace)  # from here new calls are refused; health says NOT_SERVING
    print(
        f"nnhal: shutting down ({signal.Signals(signals[0]).name}): {in_flight} call(s) in "
        f"flight, up to {grace:g} s to finish",
        file=sys.stderr,
        flush=True,
    )
    give_up = time.monotonic() + grace + margin
    while not done.wait(0.2):
        if len(signals) > first:  # a second signal: do not wait any longer
            print("nnhal: second signal: stopping now", file=sys.stderr, flush=True)
            if not server.stop(0).wait(margin):
                _force_exit(close, f"gRPC's stop did not finish {margin:g} s after it")
            break
        if time.monotonic() > give_up:
            _force_exit(close, f"gRPC's stop did not finish {grace + margin:g} s after it")
    left = server.in_flight
    if left:
        # Their RPCs are cancelled; their threads would keep the process alive (the
        # thread pool is joined at exit) until they end on their own, maybe never.
        print(
            f"nnhal: {left} call(s) still running after the grace period were cut off",
            file=sys.stderr,
            flush=True,
        )
        close()
        sys.stdout.flush()
        os._exit(0)
    close()
    print("nnhal: stopped", file=sys.stderr, flush=True)
    if whole_process:
        # the interpreter joins every non-daemon thread before it exits (a library's too)
        threading.Thread(
            target=_exit_watchdog, args=(margin,), name="nnhal-exit-watchdog", daemon=True
        ).start()
    return 0


def _exit_watchdog(margin: float) -> None:
    time.sleep(margin)
    _force_exit(None, f"the process did not exit {margin:g} s after the server stopped")


def _force_exit(close: Any, why: str) -> None:
    """End the process now: the stop was asked for, and something in it does not end."""
    print(f"nnhal: {why}; ending the process; its threads:", file=sys.stderr, flush=True)
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    for ident, frame in sys._current_frames().items():
        stack = "".join(traceback.format_stack(frame))
        print(f"thread {names.get(ident, ident)}:\n{stack}", file=sys.stderr)
    if close is not None:
        close()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
