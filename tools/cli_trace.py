"""`nnhal trace`, `nnhal devices`, `nnhal faults`, and `nnhal serve` options.

- ``nnhal trace ADDR [--device NAME] [--clear]``: the device's call trace as JSON;
- ``nnhal devices ADDR``: the served devices (name, versionString, type, ...) as JSON;
- ``nnhal faults ADDR (FILE | --clear | --offline | --online) [--device NAME]``: replace a
  device's faults with the ``[faults]`` table of a TOML file, clear them, or take the device
  offline / back;
- ``nnhal serve --cache-dir DIR``: the server-side compilation cache directory.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any


def add_serve_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--cache-dir",
        metavar="DIR",
        help="server-side compilation cache: a prepareModel with a token and no cache "
        "handles is cached there (nnhal extension)",
    )


def configure_devices(devices: list[Any], args: argparse.Namespace) -> str:
    """Apply --cache-dir, check names and [faults]; the text naming the devices."""
    from nnhal.driver.cache import CompilationCache
    from nnhal.driver.faults import parse_rules
    from nnhal.tools.cli import EXIT_USAGE, CliError

    from nnhal.errors import HalError

    names = [d.name for d in devices]
    if len(set(names)) != len(names):
        raise CliError(f"two --profile options give the same device name: {names}", EXIT_USAGE)
    for device in devices:
        try:
            parse_rules(getattr(device.profile, "faults", None))
        except HalError as exc:
            raise CliError(f"profile {device.profile.source}: {exc.message}") from None
        if getattr(args, "cache_dir", None):
            # one folder per device: a cache is bound to its device anyway
            device.cache = CompilationCache(Path(args.cache_dir) / device.name)
    if len(devices) == 1:
        return repr(names[0])
    return ", ".join(repr(n) for n in names)


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("trace", help="print a served device's call trace as JSON")
    p.add_argument("address", metavar="ADDR", help="HOST:PORT of a running `nnhal serve`")
    p.add_argument("--device", default="", help="device name (default: the first)")
    p.add_argument("--clear", action="store_true", help="empty the trace after reading it")
    _client_options(p)
    p.set_defaults(func=cmd_trace)

    p = sub.add_parser("devices", help="list the devices a server serves, as JSON")
    p.add_argument("address", metavar="ADDR", help="HOST:PORT of a running `nnhal serve`")
    _client_options(p)
    p.set_defaults(func=cmd_devices)

    p = sub.add_parser("faults", help="change a served device's injected faults")
    p.add_argument("address", metavar="ADDR", help="HOST:PORT of a running `nnhal serve`")
    p.add_argument("file", nargs="?", help="TOML file with a [faults] table")
    p.add_argument("--device", default="", help="device name (default: the first)")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--clear", action="store_true", help="remove every fault")
    group.add_argument("--offline", action="store_true", help="take the device offline")
    group.add_argument("--online", action="store_true", help="bring the device back")
    _client_options(p)
    p.set_defaults(func=cmd_faults)


def _client_options(p: argparse.ArgumentParser) -> None:
    from nnhal.tools.cli_security import add_client_options

    add_client_options(p)  # --tls-ca, --token-file, ...


def _control(args: argparse.Namespace) -> Any:
    from nnhal.tools.cli_security import client_security

    from nnhal.control import Control

    return Control(args.address, security=client_security(args))


def _print(doc: Any) -> None:
    print(json.dumps(doc, indent=1), flush=True)


def cmd_trace(args: argparse.Namespace) -> int:
    with _control(args) as control:
        _print(_checked(lambda: control.trace(args.device, clear=args.clear)))
    return 0


def cmd_devices(args: argparse.Namespace) -> int:
    with _control(args) as control:
        _print(_checked(control.list_devices))
    return 0


def cmd_faults(args: argparse.Namespace) -> int:
    from nnhal.tools.cli import EXIT_USAGE, CliError, readable_file

    with _control(args) as control:
        if args.offline or args.online:
            _checked(lambda: control.set_offline(args.offline, device=args.device))
            _print({"offline": bool(args.offline)})
            return 0
        if args.clear:
            text = ""
        elif args.file:
            try:
                text = readable_file(args.file, "faults file").read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:  # a file error: exit 1
                raise CliError(f"faults file {args.file}: cannot read: {exc}") from None
        else:
            raise CliError("give a TOML file, --clear, --offline or --online", EXIT_USAGE)
        _print(_checked(lambda: control.set_faults(text, device=args.device)))
    return 0


def _checked(fn: Any) -> Any:
    from nnhal.tools.cli import CliError

    from nnhal.errors import HalError

    try:
        return fn()
    except HalError as exc:
        raise CliError(exc.message or str(exc)) from None
