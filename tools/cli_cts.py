"""``nnhal cts``: the conformance suite, run as a pytest session.

``nnhal cts`` connects to ``--target`` (or starts the in-process driver
behind a real gRPC server), starts the fuzz family's oracle (``--oracle``, or
the in-process reference driver), and runs ``pytest.main`` on the
``nnhal.cts`` package with the suite's plugin (``nnhal.cts.pytest_plugin``),
translating its options into the plugin's ``--cts-*`` ones. pytest does the
rest: ``-k``, ``-x``, ``--lf`` and ``-n N`` (pytest-xdist) are accepted
directly, anything else of pytest or its plugins after ``--``. The session
reads no ini file or conftest.py of the current folder (it is the suite's
alone), but keeps its cache there (``--lf``).

Exit status: 0 when every test passed, was skipped or xfail; 1 when a test
failed (or, with ``--strict``, a family was skipped whole or a listed test
passed); 2 for usage errors, including a selection that leaves no test.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
from contextlib import ExitStack
from typing import Any

__all__ = ["add_parsers", "pytest_argv"]


def add_parsers(sub: Any) -> None:
    from nnhal.tools.cli import _add_device_args

    p = sub.add_parser(
        "cts",
        help="run the conformance suite against a driver (a pytest session)",
        description="Run the conformance suite as a pytest session. Arguments after `--` go "
        "to pytest as they are (e.g. `-- --junitxml r.xml -rs`).",
    )
    p.add_argument(
        "--families", action="append", metavar="F,F,...", help="families to run (default: all)"
    )
    p.add_argument("-k", metavar="EXPR", help="pytest's -k: only tests whose id matches EXPR")
    p.add_argument("-x", "--exitfirst", action="store_true", help="stop at the first failure")
    p.add_argument("--lf", action="store_true", help="only the tests that failed last time")
    p.add_argument(
        "-n",
        metavar="N|auto",
        help="test processes (pytest-xdist; default: this process only)",
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="time limit of a test without its own (pytest-timeout; default 60)",
    )
    p.add_argument(
        "--max-timeouts",
        type=int,
        default=10,
        metavar="N",
        help="after N timed-out tests (in one process) the rest fail as not run (default 10)",
    )
    p.add_argument("--expectations", metavar="FILE", help="known failures of this target (xfail)")
    p.add_argument(
        "--vectors",
        action="append",
        metavar="PATH",
        help="also run these vector files/folders (family 'vectors')",
    )
    p.add_argument("--specs", action="append", metavar="PATH", help="extra spec files or folders")
    p.add_argument("--junit-xml", metavar="FILE", help="write a JUnit XML report (pytest's)")
    p.add_argument("--json-report", metavar="FILE", help="write a JSON report")
    p.add_argument(
        "--coverage",
        nargs="?",
        const="-",
        metavar="FILE",
        help="print (or write to FILE) operations x operand types x families",
    )
    p.add_argument(
        "--fuzz-count", type=int, default=40, metavar="N", help="fuzzed models (default 40)"
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the fuzz family (default 0)")
    p.add_argument(
        "--fuzz-dir",
        default="cts-failures",
        metavar="DIR",
        help="where failing fuzzed models are saved (default ./cts-failures)",
    )
    p.add_argument(
        "--oracle",
        metavar="ADDR",
        help="endpoint giving the fuzz family's expected outputs (default: the in-process "
        "reference driver, default profile)",
    )
    p.add_argument(
        "--no-corpus",
        action="store_true",
        help="leave out the shipped NNAPI corpus (spec library only: a quicker, smaller run)",
    )
    p.add_argument(
        "--strict",
        action="store_true",
        help="also fail on families skipped whole and on listed tests that pass",
    )
    p.add_argument(
        "--require-deadlines",
        action="store_true",
        help="fail a target that ignores execution and preparation deadlines",
    )
    p.add_argument(
        "pytest_args", nargs="*", metavar="-- PYTEST-ARGS", help="more arguments for pytest"
    )
    _add_device_args(p)
    p.set_defaults(func=cmd_cts)


def _families(args: argparse.Namespace) -> list[str]:
    from nnhal.cts.families import DEFAULT_FAMILIES, FAMILIES
    from nnhal.tools.cli import EXIT_USAGE, CliError

    from nnhal.suggest import unknown_names

    if not args.families:
        return list(DEFAULT_FAMILIES) + (["vectors"] if args.vectors else [])
    names = [n.strip() for v in args.families for n in v.split(",") if n.strip()]
    unknown = [n for n in names if n not in FAMILIES]
    if unknown:
        raise CliError(f"--families: {unknown_names('family', unknown, FAMILIES)}", EXIT_USAGE)
    return names


def pytest_argv(args: argparse.Namespace, target: str, oracle: str | None) -> list[str]:
    """The pytest command line of a ``nnhal cts`` run against ``target``."""
    from nnhal.cts.pytest_items import CTS_DIR

    argv = [
        str(CTS_DIR),
        "-p", "nnhal.cts.pytest_plugin",
        # the session is the suite's: no ini file or conftest.py of the current folder,
        # whose cache (--lf) it keeps
        "-c", os.devnull, "--rootdir", os.getcwd(), "--noconftest",
        "--cts-target", target,
        "--timeout", f"{args.timeout:g}",
        "--cts-max-timeouts", str(args.max_timeouts),
        "--cts-fuzz-count", str(args.fuzz_count),
        "--cts-seed", str(args.seed),
        "--cts-fuzz-dir", args.fuzz_dir,
    ]  # fmt: skip
    if args.target and args.device:
        argv += ["--cts-device", args.device]
    if oracle:
        argv += ["--cts-oracle", oracle]
    if args.families:
        argv += ["--cts-families", ",".join(_families(args))]
    for flag, value in (
        ("-k", args.k),
        ("-n", args.n),
        ("--junitxml", args.junit_xml),
        ("--cts-json-report", args.json_report),
        ("--cts-expectations", args.expectations),
    ):
        if value:
            argv += [flag, value]
    if args.coverage:
        argv.append(f"--cts-coverage={args.coverage}")
    for path in args.vectors or ():
        argv += ["--cts-vectors", path]
    for path in args.specs or ():
        argv += ["--cts-specs", path]
    for flag, on in (
        ("-x", args.exitfirst),
        ("--lf", args.lf),
        ("--cts-no-corpus", args.no_corpus),
        ("--cts-strict", args.strict),
        ("--cts-require-deadlines", args.require_deadlines),
    ):
        if on:
            argv.append(flag)
    return argv + list(args.pytest_args)


def _oracle(args: argparse.Namespace, stack: ExitStack) -> str | None:
    """The fuzz family's second endpoint: ``--oracle ADDR``, else the in-process reference."""
    from nnhal.tools.cli import _check_address
    from nnhal.tools.local import local_device

    if args.oracle:
        return _check_address(args.oracle)  # the session connects (and reports a dead one)
    if args.fuzz_count == 0 or "fuzz" not in _families(args):
        return None
    return stack.enter_context(local_device(None)).address


def _check(args: argparse.Namespace) -> None:
    from nnhal.tools.cli import EXIT_FAILED, EXIT_USAGE, CliError, readable_file

    if args.timeout <= 0 or args.fuzz_count < 0 or args.max_timeouts < 1:
        raise CliError(
            "--timeout must be > 0, --fuzz-count >= 0 and --max-timeouts >= 1", EXIT_USAGE
        )
    _families(args)
    # the files named must exist (a file error, exit 1)
    if args.expectations:
        readable_file(args.expectations, "--expectations")
    for path in [*(args.vectors or []), *(args.specs or [])]:
        readable_file(path, folder_ok=True)
    if args.pytest_args and not args.pytest_args[0].startswith("-"):
        raise CliError(
            f"unexpected argument {args.pytest_args[0]!r} (pytest's options go after `--`, "
            "e.g. `nnhal cts -- -rs`)",
            EXIT_USAGE,
        )
    if args.vectors is None and args.families and "vectors" in _families(args):
        raise CliError("the vectors family needs --vectors PATH", EXIT_USAGE)
    # found, not imported: pytest must import its plugins itself (assertion rewriting)
    wanted = [("pytest", "pytest"), ("pytest_timeout", "pytest-timeout")]
    if args.n:
        wanted.append(("xdist", "pytest-xdist (for -n)"))
    missing = [package for module, package in wanted if importlib.util.find_spec(module) is None]
    if missing:
        raise CliError(
            f"nnhal cts runs the suite with pytest; missing: {', '.join(missing)} "
            "(pip install 'nnhal[cts]')",
            EXIT_FAILED,
        )


def cmd_cts(args: argparse.Namespace) -> int:
    from nnhal.tools.cli import EXIT_FAILED, EXIT_OK, EXIT_USAGE, CliError, _device, _security

    _check(args)
    import pytest

    with ExitStack() as stack:
        device = stack.enter_context(_device(args))
        if args.target:
            # the session's connections (each xdist worker's too) read them from there
            _security().export_client_options(args)
        argv = pytest_argv(args, device.address, _oracle(args, stack))
        code = pytest.main(argv)
    if code == pytest.ExitCode.OK:
        return EXIT_OK
    if code == pytest.ExitCode.NO_TESTS_COLLECTED:
        raise CliError("no tests to run (check --families and -k)", EXIT_USAGE)
    if code == pytest.ExitCode.USAGE_ERROR:
        return EXIT_USAGE
    if code == pytest.ExitCode.INTERRUPTED:
        raise KeyboardInterrupt
    return EXIT_FAILED
