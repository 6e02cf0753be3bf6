"""``nnhal cts``: the conformance suite from the command line.

``nnhal.tools.cli`` owns the argument parser (so ``nnhal`` imports nothing from
here until the subcommand runs) and calls ``run_cts(args, open_device,
open_oracle)`` with functions that connect to ``--target`` (or start the
in-process driver) and to the fuzz family's oracle (``--oracle`` or the
in-process reference); the suite itself never imports a driver. This module turns the arguments into a ``nnhal.cts.suite.Config``, runs
the suite, prints a line per failure (``FAILED <id>: <why>``), the
per-family table and the summary line, and writes the JUnit XML, JSON and
coverage files asked for. Exit status 1 when anything failed, timed out or
could not run; with ``--strict`` also when a family was skipped whole or a
test passed against the expectations file (xpass).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack
from pathlib import Path
from typing import Any

from nnhal.cts.core import Outcome, Result
from nnhal.cts.families import DEFAULT_FAMILIES, FAMILIES
from nnhal.cts.families.fuzz import same_implementation
from nnhal.cts.report import (
    coverage_table,
    family_table,
    skipped_families_line,
    summary_line,
    write_json,
    write_junit,
)
from nnhal.cts.suite import Config, collect, run_suite
from nnhal.cts.target import Options

from nnhal.suggest import unknown_names

__all__ = ["config_from_args", "run_cts"]

_SHOWN = {Outcome.FAILED, Outcome.TIMEOUT, Outcome.ERROR, Outcome.XPASS}


def _families(values: list[str] | None, vectors: bool) -> tuple[str, ...]:
    if not values:
        return DEFAULT_FAMILIES + (("vectors",) if vectors else ())
    names = [n.strip() for v in values for n in v.split(",") if n.strip()]
    unknown = [n for n in names if n not in FAMILIES]
    if unknown:
        raise ValueError(f"--families: {unknown_names('family', unknown, FAMILIES)}")
    return tuple(dict.fromkeys(names))


def config_from_args(args: Any) -> Config:
    if args.jobs < 1 or args.timeout <= 0 or args.fuzz_count < 0 or args.max_timeouts < 1:
        raise ValueError("-j and --max-timeouts must be >= 1, --timeout > 0, --fuzz-count >= 0")
    options = Options(
        fuzz_count=args.fuzz_count,
        seed=args.seed,
        fuzz_dir=Path(args.fuzz_dir),
        vectors=tuple(args.vectors or ()),
        specs=tuple(args.specs or ()),
        profile=getattr(args, "profile", None),
        require_deadlines=bool(getattr(args, "require_deadlines", False)),
        corpus=not getattr(args, "no_corpus", False),
    )
    families = _families(args.families, bool(args.vectors))
    if "vectors" in families and not options.vectors:
        raise ValueError("the vectors family needs --vectors PATH")
    return Config(
        families=families,
        filters=tuple(args.filter or ()),
        jobs=args.jobs,
        timeout=args.timeout,
        max_timeouts=args.max_timeouts,
        expectations=args.expectations,
        progress=not args.no_progress,
        options=options,
        strict=bool(getattr(args, "strict", False)),
    )


def _print_result(result: Result, verbose: bool) -> None:
    if result.outcome in _SHOWN or (verbose and result.outcome != Outcome.PASSED):
        label = result.outcome.value.upper()
        # tqdm writes to stderr; results go to stdout, one line each
        print(f"{label} {result.id}: {result.message}", flush=True)


def _open_oracle(
    config: Config, open_oracle: Callable[[], AbstractContextManager[Any]] | None, stack: ExitStack
) -> None:
    if "fuzz" in config.families and config.options.fuzz_count and open_oracle is not None:
        config.options.oracle = stack.enter_context(open_oracle())


def run_cts(
    args: Any,
    open_device: Callable[[], AbstractContextManager[Any]],
    open_oracle: Callable[[], AbstractContextManager[Any]] | None = None,
) -> int:
    """Run the suite as the arguments say; returns the exit status."""
    config = config_from_args(args)
    tests = collect(config)
    if args.list:
        for t in tests:
            print(t.id)
        print(f"{len(tests)} tests", file=sys.stderr)
        return 0
    if not tests:
        raise ValueError("no tests to run (check --families and --filter)")
    with ExitStack() as stack:
        device = stack.enter_context(open_device())
        address = getattr(device, "address", "") or (args.target or "in-process")
        _open_oracle(config, open_oracle, stack)
        oracle = config.options.oracle
        if oracle is not None and same_implementation(device, oracle):
            print(
                "nnhal cts: warning: the fuzz oracle reports the same version string and type as "
                "the target (the same implementation cannot catch its own kernel bugs; name "
                "another endpoint with --oracle ADDR)",
                file=sys.stderr,
                flush=True,
            )
        report = run_suite(
            device,
            address,
            config,
            tests=tests,
            on_result=lambda r: _print_result(r, args.verbose),
        )
    results = report.results
    if report.not_run_reason:
        print(f"nnhal cts: tests not run: {report.not_run_reason}", flush=True)
    unused = report.info.get("unusedExpectations") or []
    if unused:
        print(f"nnhal cts: expectations that matched no problem: {', '.join(unused)}")
    print(family_table(results, report.families))
    if args.coverage:
        text = coverage_table(results, report.families)
        if args.coverage == "-":
            print(text)
        else:
            Path(args.coverage).write_text(text + "\n", encoding="utf-8")
    info = {**report.info, "families": list(report.families)}
    if args.junit_xml:
        write_junit(args.junit_xml, results, report.families)
    if args.json_report:
        write_json(args.json_report, results, report.families, info)
    whole = skipped_families_line(results, report.families)
    if whole:
        print(f"nnhal cts: {whole}", flush=True)
    if config.strict:
        for problem in report.strict_problems:
            print(f"STRICT {problem}", flush=True)
    print(f"{summary_line(results)} in {report.duration:.1f} s", flush=True)
    return 0 if report.ok else 1
