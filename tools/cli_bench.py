"""The ``nnhal bench`` parser and the ``--suite`` command.

``nnhal bench control-flow ...`` (the seed benchmark, ``nnhal.tools.bench``) stays
a subcommand; ``nnhal bench --suite control-flow ...`` runs the workload
suite (``nnhal.tools.bench_suite``), optionally with a user model file
(``--model``), the issue's targets (``--targets``) and plots (``--plot``);
``nnhal bench --runtime [--target ADDR]...`` the runtime's overhead
(``nnhal.tools.bench_runtime``).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from nnhal.tools.bench_threads import apply, threads_line
from nnhal.tools.progress import add_quiet_option, progress_wanted

EXIT_OK, EXIT_FAILED = 0, 1


def add_bench_parser(sub, legacy: Callable[[argparse.Namespace], int]) -> None:
    """Add ``bench`` to the ``nnhal`` subparsers; ``legacy`` runs ``bench control-flow``."""
    from nnhal.tools.bench_modes import MODES
    from nnhal.tools.bench_threads import add_threads_option

    p = sub.add_parser(
        "bench",
        help="benchmarks (--suite control-flow: workloads, modes, peers, targets)",
        description="Run `nnhal bench --suite control-flow [--compare]` or `nnhal bench "
        "control-flow` (the Fibonacci seed benchmark).",
        allow_abbrev=False,  # `bench control-flow --n N` is the subcommand's option
    )
    p.add_argument(
        "--suite",
        choices=["control-flow", "models"],
        help="the workload suite to run (models: whole networks against onnxruntime)",
    )
    p.add_argument(
        "--workload", action="append", metavar="NAME", help="run only these workloads (repeatable)"
    )
    p.add_argument(
        "--model",
        metavar="FILE",
        help="also run a model file: vector format (.json, .json.gz) with its stored inputs, or"
        " .onnx side by side with onnxruntime",
    )
    p.add_argument("--inputs", metavar="FILE.npz", help="input values for --model MODEL.onnx")
    p.add_argument("--name", help="which model of --model's file")
    p.add_argument(
        "--mode",
        action="append",
        choices=MODES,
        help="execution modes (repeatable; default all: " + ", ".join(MODES) + ")",
    )
    p.add_argument(
        "--trips", type=int, action="append", metavar="N", help="trip counts (default per workload)"
    )
    p.add_argument("--rounds", type=int, default=5, help="timed interleaved rounds (default 5)")
    p.add_argument("--min-time", type=float, metavar="S", help="run rounds for at least S seconds")
    p.add_argument(
        "--warmup",
        type=int,
        default=2,
        help="warm-up runs per case (default 2: a model's first execution is interpreted, "
        "the second generates its code)",
    )
    p.add_argument("--loop-timeout-ms", type=float, help="loopTimeoutDuration of each execution")
    p.add_argument("--deadline-ms", type=float, help="deadline of each execution, from its start")
    p.add_argument("--compare", action="store_true", help="print ratios to onnxruntime and numpy")
    p.add_argument("--targets", action="store_true", help="also measure the issue's targets")
    p.add_argument("--json", metavar="FILE", help="write every figure as JSON")
    p.add_argument("--csv", metavar="FILE", help="write one row per case as CSV")
    p.add_argument("--plot", metavar="DIR", help="write PNG plots (needs matplotlib: [plot])")
    p.add_argument("--no-peers", action="store_true", help="skip onnxruntime")
    p.add_argument("--no-profile", action="store_true", help="skip the per-operation profile")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_quiet_option(p)
    p.add_argument("--profile", metavar="NAME|PATH", help="device profile of the driver")
    p.add_argument("--runtime", action="store_true",
                   help="the emulated NNAPI runtime vs a direct execution (nnhal.tools."
                   "bench_runtime): built-in models, or --model FILE")  # fmt: skip
    p.add_argument("--target", dest="runtime_targets", action="append", metavar="ADDR[/DEVICE]",
                   help="with --runtime: a served device (repeatable; nnapi-reference is always "
                   "added); none: in-process and a driver served in this process")  # fmt: skip
    from nnhal.tools.cli_oppkg import add_serve_options

    add_serve_options(p)  # --op-package, --package-backend: the driver's op packages
    add_threads_option(p)
    p.set_defaults(func=cmd_bench_suite, bench=None)

    bench = p.add_subparsers(dest="bench", metavar="BENCH")
    b = bench.add_parser(
        "control-flow", help="Fibonacci WHILE: executor vs a hand-written numpy loop"
    )
    b.add_argument(
        "--n",
        type=int,
        action="append",
        metavar="N",
        help="loop iterations (repeatable; default 10, 1000, 100000)",
    )
    b.add_argument("--repeat", type=int, default=5, help="timed rounds per case (default 5)")
    b.add_argument("--json", metavar="FILE", help="write the figures as JSON")
    b.add_argument("--no-grpc", action="store_true", help="skip the gRPC case")
    add_threads_option(b)
    b.set_defaults(func=_with_threads(legacy))


def _with_threads(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Apply --threads, state it, then run the benchmark."""

    def wrapped(args: argparse.Namespace) -> int:
        apply(args.threads)
        print(threads_line())
        return run(args)

    return wrapped


def _usage(message: str) -> None:
    """A usage error: one line, exit 2 (not argparse's whole usage text)."""
    from nnhal.tools.cli import EXIT_USAGE, CliError

    raise CliError(message, EXIT_USAGE)


def cmd_bench_suite(args: argparse.Namespace) -> int:
    """Usage errors exit 2, file errors 1; each prints one line (``nnhal.tools.cli.main``)."""
    from nnhal.tools.cli import CliError, readable_file
    from nnhal.tools.optional import require

    if args.model:
        readable_file(args.model, "--model")
    if args.inputs:
        from nnhal.tools.npz_inputs import load_npz

        try:  # one line for a file that is no .npz archive (not numpy's about pickles)
            load_npz(readable_file(args.inputs, "--inputs"))
        except ValueError as exc:
            raise CliError(str(exc)) from None
    if args.plot:  # asked for: fail now, not after the whole run
        require("matplotlib", "--plot", "plot")
    if args.runtime or args.runtime_targets:
        if not args.runtime:
            _usage("--target goes with --runtime")
        from nnhal.tools.bench_runtime import cmd_bench_runtime  # runtime vs direct

        return cmd_bench_runtime(args)
    if args.model and args.model.lower().endswith(".tflite") and not args.suite:
        if args.rounds < 1 or args.warmup < 0:
            _usage("--rounds must be >= 1 and --warmup >= 0")
        from nnhal.tools.bench_tflite import cmd_bench_tflite  # TFLite vs LiteRT

        return cmd_bench_tflite(args)
    if args.suite is None and args.model is None:
        _usage("choose --suite control-flow (or --model FILE), or `bench control-flow`")
    if args.suite == "models":
        return cmd_bench_models(args)
    if args.rounds < 1 or args.warmup < 0 or any(n < 0 for n in args.trips or []):
        _usage("--rounds must be >= 1, --warmup >= 0 and every --trips >= 0")
    if args.inputs and not (args.model and args.model.lower().endswith(".onnx")):
        _usage("--inputs goes with --model MODEL.onnx")
    from nnhal.tools.bench_modes import MODES
    from nnhal.tools.bench_suite import print_table, run_suite, write_csv, write_json
    from nnhal.tools.bench_workloads import UnknownWorkload, suite, user_workload

    apply(args.threads)
    try:
        workloads = suite(args.workload) if args.suite else []
    except UnknownWorkload as exc:
        _usage(str(exc))
    try:
        if args.model and args.model.lower().endswith(".onnx"):
            require("onnx", "--model MODEL.onnx", "onnx")
            from nnhal.tools.bench_onnx import onnx_workload

            workloads.append(onnx_workload(args.model, args.inputs, args.trips))
        elif args.model:
            workloads.append(user_workload(args.model, args.name))
    except (ValueError, OSError) as exc:  # the model file's fault: a data error
        raise CliError(str(exc)) from None
    doc = run_suite(
        workloads,
        modes=tuple(args.mode or MODES),
        trips=args.trips,
        rounds=args.rounds,
        min_time=args.min_time,
        warmup=args.warmup,
        loop_timeout_ms=args.loop_timeout_ms,
        deadline_ms=args.deadline_ms,
        peers=not args.no_peers,
        profile_ops=not args.no_profile,
        progress=progress_wanted(args),
        device_profile=args.profile,
        device_options=_device_options(args),
    )
    print_table(doc, args.compare)
    if args.targets:
        from nnhal.tools.bench_targets import print_targets, run_targets

        prepare = {w["name"]: w["prepare"] for w in doc["workloads"]}
        doc["targets"] = run_targets(rounds=max(args.rounds, 7), prepare=prepare)
        print_targets(doc["targets"], sys.stdout)
    if args.json:
        write_json(doc, args.json)
    if args.csv:
        write_csv(doc, args.csv)
    if args.plot:
        from nnhal.tools.bench_plot import write_plots

        print(f"plots: {', '.join(write_plots(doc, args.plot))}")
    return EXIT_OK if doc["ok"] else EXIT_FAILED


def _device_options(args: argparse.Namespace) -> dict:
    """The op packages (``--op-package``, installed ones) and ``--package-backend`` of the
    benchmarked driver, loaded as ``nnhal serve`` loads them."""
    from nnhal.tools.cli import _load_profile
    from nnhal.tools.cli_oppkg import local_options

    _load_profile(args.profile)  # a bad profile: its own message before packages load
    return local_options(args)


def cmd_bench_models(args: argparse.Namespace) -> int:
    """``--suite models``: each network against onnxruntime, then the greedy decoder WHILE,
    at each thread setting (``--threads``; default: 1, then the libraries' default)."""
    import json

    from nnhal.tools import bench_onnx
    from nnhal.tools.bench_models import CASES, print_models, run_models
    from nnhal.tools.bench_suite import print_table, run_suite
    from nnhal.tools.bench_threads import AUTO
    from nnhal.tools.bench_workloads import suite
    from nnhal.tools.optional import require

    from nnhal.suggest import unknown_names

    if args.rounds < 1:
        _usage("--rounds must be >= 1")
    names = args.workload
    unknown = sorted(set(names or []) - set(CASES) - {"greedy"})
    if unknown:
        _usage(unknown_names("models workload", unknown, [*CASES, "greedy"]))
    # asked for by name: a missing onnxruntime is an error (exit 1) with the install hint
    require("onnx", "--suite models (it compares with onnxruntime)", "bench")
    require("onnxruntime", "--suite models (it compares with onnxruntime)", "bench")
    assert bench_onnx.available() is None
    settings = [args.threads] if args.threads is not None else [1, AUTO]
    doc: dict = {"suite": "models", "runs": []}
    ok = True
    for count in settings:
        apply(count)
        line = threads_line()
        models = [n for n in (names or list(CASES)) if n in CASES]
        results = run_models(models, args.rounds, count) if models else []
        if results:
            print_models(results, line, sys.stdout)
        greedy = None
        if names is None or "greedy" in names:
            greedy = run_suite(
                suite(["greedy"]),
                modes=("executor",),
                rounds=args.rounds,
                warmup=args.warmup,
                profile_ops=False,
                progress=False,
            )
            print_table(greedy, True)
            ok = ok and greedy["ok"]
        print()
        doc["runs"].append({"threads": line, "models": results, "greedy": greedy})
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=1, default=str)
    return EXIT_OK if ok else EXIT_FAILED
