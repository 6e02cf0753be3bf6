"""`nnhal stress` and `nnhal resources` (load and leak checks).

- ``nnhal stress [ADDR] [--clients N] [--executions M] [--duration S] [--seed S]
  [--mix KIND=W,...] [--json] [--profile P] [--device NAME]``: many client processes
  against one server (its own ``nnhal serve`` without ADDR); exit 0 when every call
  ended as expected and the server's resources are as before (``nnhal.tools.stress``), 1
  otherwise, 2 for bad usage;
- ``nnhal resources ADDR``: the server's ``getResourceUsage`` answer as JSON.
"""

from __future__ import annotations

import argparse
import json
from importlib import import_module
from typing import Any


def add_parsers(sub: Any) -> None:
    from nnhal.tools.stress_client import KINDS

    p = sub.add_parser(
        "stress",
        help="N client processes x M mixed calls against a server; check statuses and leaks",
        description="Run client processes that mix executions (ADD, WHILE, endless loops "
        "with short timeouts, expiring deadlines, invalid requests, bursts, fenced "
        "executions, driver buffers, prepare/release churn) against a server, check "
        "every status, report throughput and latency, and compare the server's "
        "resources before and after. Without ADDR an own `nnhal serve` is started.",
    )
    p.add_argument("address", nargs="?", metavar="ADDR", help="HOST:PORT of a running server")
    p.add_argument("--clients", type=int, default=4, metavar="N", help="client processes (4)")
    p.add_argument(
        "--executions",
        type=int,
        default=200,
        metavar="M",
        help="actions per client (default 200; 0 = until --duration ends)",
    )
    p.add_argument("--duration", type=float, metavar="SECONDS", help="stop clients after this")
    p.add_argument("--seed", type=int, default=0, help="seed of the kinds and inputs (0)")
    p.add_argument(
        "--mix",
        metavar="KIND=W,...",
        help=f"change kind weights (0 leaves a kind out); kinds: {', '.join(KINDS)}",
    )
    p.add_argument(
        "--warmup", type=int, default=2, metavar="K", help="warm-up actions per kind (2)"
    )
    p.add_argument(
        "--settle",
        type=float,
        default=20.0,
        metavar="SECONDS",
        help="how long to wait for the server's figures to come back (20)",
    )
    p.add_argument(
        "--max-rss-growth-mb",
        type=float,
        default=64.0,
        metavar="MB",
        help="fail when resident memory grew by more (default 64)",
    )
    p.add_argument(
        "--call-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="gRPC deadline of every client call; a call past it counts as DEVICE_UNAVAILABLE "
        "(default 60)",
    )
    p.add_argument("--profile", help="profile of the own server (without ADDR)")
    p.add_argument("--device", default="", help="the device the clients use (default: the first)")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    import_module("nnhal.tools.progress").add_quiet_option(p)
    import_module("nnhal.tools.cli_security").add_client_options(p)  # TLS, token
    p.set_defaults(func=cmd_stress)

    p = sub.add_parser("resources", help="a server's resources and live objects, as JSON")
    p.add_argument("address", metavar="ADDR", help="HOST:PORT of a running `nnhal serve`")
    import_module("nnhal.tools.cli_security").add_client_options(p)  # TLS, token
    p.set_defaults(func=cmd_resources)


def parse_mix(text: str | None) -> dict[str, float]:
    from nnhal.tools.cli import EXIT_USAGE, CliError
    from nnhal.tools.stress_client import DEFAULT_WEIGHTS

    weights = dict(DEFAULT_WEIGHTS)
    for item in filter(None, (text or "").split(",")):
        kind, sep, value = item.partition("=")
        try:
            weights[kind.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep:
            raise CliError(f"--mix: expected KIND=WEIGHT, got {item!r}", EXIT_USAGE)
    return weights


def cmd_stress(args: argparse.Namespace) -> int:
    from nnhal.tools.cli import EXIT_USAGE, CliError, _check_address, _load_profile
    from nnhal.tools.stress import (
        StressError,
        StressOptions,
        check_options,
        format_report,
        run_stress,
    )

    if args.address and args.profile:
        raise CliError("--profile is for the own server; it cannot go with ADDR", EXIT_USAGE)
    if args.profile:  # checked here: the own server's message would come after its start
        _load_profile(args.profile)
    from nnhal.tools.cli_security import check_local, export_client_options

    if args.address:  # the client processes read them from the environment
        export_client_options(args)
    else:
        check_local(args)
    options = StressOptions(
        address=_check_address(args.address) if args.address else None,
        clients=args.clients,
        executions=args.executions,
        duration=args.duration,
        seed=args.seed,
        weights=parse_mix(args.mix),
        warmup=args.warmup,
        settle=args.settle,
        max_rss_growth_mb=args.max_rss_growth_mb,
        profile=args.profile,
        device=args.device,
        call_timeout=args.call_timeout,
    )
    try:
        check_options(options)
    except StressError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    from nnhal.tools.progress import Status, progress_wanted

    status = Status(progress_wanted(args), "nnhal stress", every=2.0)
    try:
        report = run_stress(options, progress=status.update)
    except StressError as exc:
        raise CliError(str(exc)) from None
    finally:
        status.close()
    if args.json:
        print(json.dumps(report, indent=1), flush=True)
    else:
        print(format_report(report), flush=True)
    return 0 if report["ok"] else 1


def cmd_resources(args: argparse.Namespace) -> int:
    from nnhal.tools.cli import _check_address
    from nnhal.tools.cli_trace import _checked, _control, _print

    _check_address(args.address)
    with _control(args) as control:  # with --tls-*/--token
        _print(_checked(control.resource_usage))
    return 0
