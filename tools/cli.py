"""The ``nnhal`` command.

Subcommands::

    nnhal serve     [--address HOST:PORT] [--profile NAME|PATH] [--limit KEY=VALUE]
                    [--tls-cert F --tls-key F [--tls-client-ca F]] [--token-file F]
                    [--allow-insecure] [--grace S]
    nnhal supported MODEL [--name NAME] [--target ADDR] [--profile ...]
    nnhal run       MODEL [--name NAME] [--inputs FILE.npz] [--loop-timeout-ms N]
                    [--deadline-ms N] [--target ADDR] [--profile ...]
    nnhal vectors   PATH... [--filter GLOB] [--json-report FILE] [--dump-outputs DIR]
                    [--target ADDR] [--profile ...]
    nnhal ops       [--json]
    nnhal cts       [--target ADDR] [--families F,...] [-k EXPR] [-x] [--lf] [-n N]
                    [--timeout S] [--expectations FILE] [--junit-xml FILE] [--json-report FILE]
                    [--coverage [FILE]] [--oracle ADDR] [--strict] [--no-corpus] [-- PYTEST-ARGS]
    nnhal bench control-flow [--n N ...] [--repeat R] [--json FILE]
    nnhal stress    [ADDR] [--clients N] [--executions M] [--duration S] [--seed S] [--json]
    nnhal resources ADDR

MODEL files use the test-vector JSON format (``nnhal.vectors``). Without
``--target`` the driver runs in this process behind a real gRPC server on a
free port, so every subcommand takes the same path as against ``nnhal serve``.
The driver is imported lazily, per subcommand (``nnhal`` never imports
``driver`` at import time). Errors print one line ``nnhal <cmd>: error: ...``
and exit non-zero; set ``NNHAL_DEBUG=1`` to see the traceback instead. Exit
codes: 0 done, 1 what was asked failed (a data or file error: a missing or
unreadable file, a bad model or input, a failed execution, an optional library
not installed), 2 the command line is wrong (usage), 130 interrupted, 141 the
reader of the output went away (docs/commands.md has the table).
"""

from __future__ import annotations

import os

# gRPC's C core logs connection churn (a GOAWAY when the in-process server stops, a
# cancelled call on Ctrl-C) straight to stderr; the command's output is its own. This
# must be set before grpc is imported: this module is the entry point, and imports
# nothing that imports grpc before this line. The user's own setting wins.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

import argparse
import fnmatch
import json
import math
import sys
import time
from collections.abc import Sequence
from contextlib import AbstractContextManager
from importlib import import_module
from pathlib import Path
from typing import Any

import numpy as np

import nnhal
from nnhal import DEFAULT_ADDRESS

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
#: 128 + SIGPIPE: what a shell shows for a writer whose reader went away
EXIT_BROKEN_PIPE = 141
#: 128 + SIGINT: Ctrl-C
EXIT_INTERRUPTED = 130


class CliError(Exception):
    """A user-facing error: printed as one line, exit code ``code``."""

    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.code = code


# --------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------


def _check_address(address: str) -> str:
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise CliError(f"bad address {address!r}: expected HOST:PORT (port 0-65535)", EXIT_USAGE)
    return address


def _device(args: argparse.Namespace) -> AbstractContextManager[Any]:
    """A client Device: to ``--target``, or to an in-process driver with ``--profile``."""
    from nnhal.tools.local import local_device

    from nnhal.vector_runner import connect_device

    if args.target:
        if args.profile:
            raise CliError(
                "--profile configures the in-process driver; it cannot be combined with --target "
                "(give the profile to the `nnhal serve` behind the target)",
                EXIT_USAGE,
            )
        _oppkg().check_target(args)  # --op-package configures the in-process driver too
        if args.connect_timeout <= 0:
            raise CliError("--connect-timeout must be > 0", EXIT_USAGE)
        return connect_device(
            _check_address(args.target),
            timeout=args.connect_timeout,
            security=_security().client_security(args),
            device=args.device,
        )
    if args.device:
        raise CliError(
            "--device picks one device of --target's server; the in-process driver serves "
            "one device (give its profile with --profile)",
            EXIT_USAGE,
        )
    _security().check_local(args)  # --tls-*/--token mean nothing without --target
    _load_profile(args.profile)  # fail early, with the profile's own message
    # op packages (--op-package, installed ones) exactly as `nnhal serve` loads them
    return local_device(args.profile, **_oppkg().local_options(args))


def _load_profile(profile: str | None) -> Any:
    """The profile, or a CliError: an unknown built-in name is a usage error (with the
    closest names), a missing or bad profile file a file error."""
    from nnhal.driver.profile import builtin_profiles, load_profile

    from nnhal.suggest import unknown_names

    try:
        return load_profile(profile)
    except ValueError as e:  # ProfileError
        text = str(profile)
        if (
            os.sep not in text
            and "/" not in text
            and not text.endswith(".toml")
            and not (Path(text).exists())
        ):
            names = unknown_names("profile", [text], builtin_profiles())
            raise CliError(
                f"{names}: not a built-in profile and no such file", EXIT_USAGE
            ) from None
        raise CliError(str(e), EXIT_FAILED) from None


def readable_file(path: str | os.PathLike[str], what: str = "", folder_ok: bool = False) -> Path:
    """``path`` when it names a readable file (or folder, with ``folder_ok``); else a
    CliError, exit 1 (a file error, not a usage error), saying why."""
    p = Path(path)
    label = f"{what} {os.fspath(path)}" if what else os.fspath(path)
    if not p.exists():
        raise CliError(f"{label}: no such file{' or folder' if folder_ok else ''}")
    if p.is_dir() and not folder_ok:
        raise CliError(f"{label}: is a folder, not a file")
    if not os.access(p, os.R_OK):
        raise CliError(f"{label}: not readable (permission denied)")
    return p


def _load_one(path: str, name: str | None) -> Any:
    from nnhal.vectors import load_vectors

    tests = load_vectors(path)
    if name is not None:
        chosen = [t for t in tests if t.name == name]
        if not chosen:
            some = ", ".join(t.name for t in tests[:5])
            raise CliError(f"{path}: no model named {name!r} (it has: {some}...)")
        return chosen[0]
    if len(tests) != 1:
        some = ", ".join(t.name for t in tests[:5])
        raise CliError(
            f"{path} holds {len(tests)} models; choose one with --name (e.g. {some})", EXIT_USAGE
        )
    return tests[0]


def _jsonable(x: Any) -> Any:
    """Lists for arrays; NaN/Inf as the strings the vector loader reads back."""
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return "NaN" if math.isnan(x) else ("Infinity" if x > 0 else "-Infinity")
    if isinstance(x, (np.bool_, bool)):
        return bool(x)
    if isinstance(x, np.generic):
        return _jsonable(x.item())
    return x


def _print_json(doc: dict[str, Any]) -> None:
    """One top-level key per line, values compact: readable, and still one JSON document."""
    body = ",\n".join(f" {json.dumps(k)}: {json.dumps(v)}" for k, v in doc.items())
    print("{\n" + body + "\n}", flush=True)


def _shapes_json(shapes: Sequence[Any]) -> list[dict]:
    return [
        {"dimensions": list(s.dimensions), "isSufficient": bool(s.isSufficient)} for s in shapes
    ]


# --------------------------------------------------------------------------
# serve
# --------------------------------------------------------------------------


def _workers_arg(value: str) -> int:
    from nnhal.driver.workers import worker_count

    try:
        return worker_count(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected 'auto' or an integer >= 0, got {value!r}"
        ) from None


def cmd_serve(args: argparse.Namespace) -> int:
    from nnhal.driver.device import Device

    address = _check_address(args.address)
    # --profile repeats (several devices), --cache-dir (nnhal/cli_trace.py)
    from nnhal.driver.limits import parse_limit_options, with_limits  # --limit
    from nnhal.tools.cli_oppkg import device_options  # --op-package, --package-backend

    try:
        limits = parse_limit_options(args.limit or [])
    except ValueError as exc:
        raise CliError(str(exc)) from None
    devices = [
        Device(with_limits(_load_profile(p), limits), **device_options(args, p))
        for p in args.profile or [None]
    ]
    from nnhal.driver.ops.threads import serving_threads, set_threads  # --threads

    try:
        args.threads = serving_threads(args.threads, [d.profile.threads for d in devices])
        set_threads(args.threads)  # the execution workers (--workers) take the same count
        from nnhal.driver.ops import kernels  # the profiles' `kernels`

        choice = kernels.serving_kernels([d.profile.kernels for d in devices])
        if choice is not None:
            kernels.set_kernels(choice)
            os.environ[kernels.ENV] = choice  # the execution workers (--workers) inherit it
        from nnhal.driver.executor.model import executor_setting  # $NNHAL_EXECUTOR

        executor_setting()  # a bad value is refused now, not at every preparation
    except ValueError as exc:
        raise CliError(str(exc)) from None
    device = import_module("nnhal.tools.cli_trace").configure_devices(devices, args)
    # TLS, tokens, insecure exposure refused, graceful shutdown (nnhal/cli_security.py)
    return _security().serve(devices, address, args, device)


# --------------------------------------------------------------------------
# supported / run
# --------------------------------------------------------------------------


def cmd_supported(args: argparse.Namespace) -> int:
    from nnhal.errors import HalError

    test = _load_one(args.model, args.name)
    with _device(args) as dev:
        try:
            supported, reasons = dev.explainSupportedOperations(test.model)
        except HalError as e:
            _print_json({"status": e.status.name, "message": e.message})
            return EXIT_FAILED
    _print_json(
        {
            "supported": [bool(s) for s in supported],
            "reasons": {str(k): v for k, v in sorted(reasons.items(), key=lambda kv: int(kv[0]))},
        }
    )
    return EXIT_OK


def _read_inputs(path: str, test: Any) -> list[np.ndarray | None]:
    """Inputs from an .npz: keys in0, in1, ... (or np.savez's arr_0, ...), or operand names;
    each must fit its operand (``nnhal.tools.npz_inputs``)."""
    from nnhal.tools.npz_inputs import fit_operand, load_npz

    try:
        data = load_npz(readable_file(path, "--inputs"))
    except ValueError as e:
        raise CliError(str(e)) from None
    main = test.model.main
    names = test.operand_names[0] if test.operand_names else []
    out: list[np.ndarray | None] = []
    used = set()
    for k, idx in enumerate(main.inputIndexes):
        candidates = [f"in{k}", f"arr_{k}"] + (
            [names[idx]] if idx < len(names) and names[idx] else []
        )
        key = next((c for c in candidates if c in data), None)
        if key is None:
            raise CliError(
                f"{path}: no value for model input {k} (operand {idx}); "
                f"give it as one of {candidates}"
            )
        used.add(key)
        operand = main.operands[idx]
        try:
            out.append(
                fit_operand(
                    data[key], operand.type, operand.dimensions, f"{path}: input {k} ({key})"
                )
            )
        except ValueError as e:
            raise CliError(str(e)) from None
    extra = sorted(set(data) - used)
    if extra:
        raise CliError(f"{path}: arrays {extra} match no model input")
    return out


def _execute_sized(
    prepared: Any,
    test: Any,
    inputs: list[np.ndarray | None],
    deadline_ms: float | None,
    loop_ns: int | None,
) -> Any:
    """Execute with output buffers sized by the model's output dimensions.

    When some output's dimensions are not fully specified and the driver
    answers OUTPUT_INSUFFICIENT_SIZE with the real shapes, retry once with
    those (what the NNAPI runtime does for dynamic output shapes).
    """
    from nnhal.errors import OutputInsufficientSize
    from nnhal.vector_runner import output_dtypes

    shapes = [tuple(s) for s in test.expected_shapes]
    dynamic = any(_is_tensor(t) and (not s or 0 in s) for s, t in zip(shapes, test.output_types))
    for attempt in range(2):
        deadline = (
            None if deadline_ms is None else time.monotonic_ns() + int(deadline_ms * 1_000_000)
        )
        try:
            return prepared.execute(
                inputs,
                output_shapes=shapes,
                output_dtypes=output_dtypes(test),  # extension-typed outputs: the file's dtype
                measure=True,
                deadline_ns=deadline,
                loop_timeout_ns=loop_ns,
            )
        except OutputInsufficientSize as e:
            if attempt or not dynamic or len(e.shapes) != len(shapes):
                raise
            shapes = [tuple(s.dimensions) for s in e.shapes]
    raise AssertionError("unreachable")  # pragma: no cover


def _is_tensor(type_code: int) -> bool:
    from nnhal.types import is_tensor_type

    return is_tensor_type(type_code)


def cmd_run(args: argparse.Namespace) -> int:
    from nnhal.errors import HalError, OutputInsufficientSize

    test = _load_one(args.model, args.name)
    inputs = _read_inputs(args.inputs, test) if args.inputs else list(test.inputs)
    if args.runtime:  # through the emulated NNAPI runtime (tools/cli_runtime.py)
        return _runtime().cmd_run(args, inputs)
    loop_ns = None if args.loop_timeout_ms is None else int(args.loop_timeout_ms * 1_000_000)
    if args.trace:
        return _run_traced(args, test, inputs, loop_ns)
    with _device(args) as dev:
        try:
            prepared = dev.prepareModel_1_3(test.model)
        except HalError as e:
            _print_json({"status": e.status.name, "message": e.message, "stage": "prepare"})
            return EXIT_FAILED
        try:
            result = _execute_sized(prepared, test, inputs, args.deadline_ms, loop_ns)
        except HalError as e:
            doc: dict[str, Any] = {
                "status": e.status.name,
                "message": e.message,
                "stage": "execute",
            }
            if isinstance(e, OutputInsufficientSize):
                doc["outputShapes"] = _shapes_json(e.shapes)
            _print_json(doc)
            return EXIT_FAILED
        finally:
            prepared.release()
    _print_json(
        {
            "status": "NONE",
            "outputShapes": _shapes_json(result.outputShapes),
            "timing": {
                "timeOnDevice": result.timing.timeOnDevice,
                "timeInDriver": result.timing.timeInDriver,
            },
            "outputs": [_jsonable(np.asarray(o)) for o in result.outputs],
        }
    )
    return EXIT_OK


def _run_traced(args: argparse.Namespace, test: Any, inputs: list, loop_ns: int | None) -> int:
    """``nnhal run --trace``: the model in this process's executor, every operation's
    inputs and outputs on stderr as it runs, the result as JSON on stdout."""
    from nnhal.driver.deadlines import effective_loop_timeout
    from nnhal.driver.device import Device

    from nnhal.errors import HalError

    if args.target:
        raise CliError(
            "--trace runs the model in this process; it cannot take --target", EXIT_USAGE
        )
    if args.deadline_ms is not None:
        raise CliError("--trace takes no --deadline-ms (a traced run is not timed)", EXIT_USAGE)
    device = Device(_load_profile(args.profile))
    try:
        prepared = device.prepareModel_1_3(test.model)
        outputs = prepared.compiled.run(
            inputs,
            loop_timeout_ns=effective_loop_timeout(loop_ns),
            trace=lambda line: print(line, file=sys.stderr),
        )
    except HalError as e:
        _print_json({"status": e.status.name, "message": e.message})
        return EXIT_FAILED
    _print_json(
        {
            "status": "NONE",
            "outputShapes": [
                {"dimensions": list(np.shape(o)), "isSufficient": True} for o in outputs
            ],
            "outputs": [_jsonable(np.asarray(o)) for o in outputs],
        }
    )
    return EXIT_OK


# --------------------------------------------------------------------------
# vectors
# --------------------------------------------------------------------------


def _operation_names(values: Sequence[str]) -> set[str]:
    from nnhal.suggest import unknown_names
    from nnhal.types import OperationType

    names = {n.strip().upper() for v in values for n in v.split(",") if n.strip()}
    unknown = sorted(n for n in names if n not in OperationType.__members__)
    if unknown:
        raise CliError(
            f"--operations: {unknown_names('operation', unknown, OperationType.__members__)}",
            EXIT_USAGE,
        )
    return names


def cmd_vectors(args: argparse.Namespace) -> int:
    allowed = _operation_names(args.operations) if args.operations else None
    if args.runtime:  # through the emulated NNAPI runtime (tools/cli_runtime.py)
        return _runtime().cmd_vectors(args)
    from nnhal.tools.progress import progress_wanted

    from nnhal.vector_runner import FAILED, SKIPPED, run_vectors, summary_line, write_report
    from nnhal.vectors import find_vector_files, load_vectors, operations_used

    tests = []
    for f in find_vector_files(args.paths):
        tests.extend(load_vectors(f))
    if args.filter:
        tests = [t for t in tests if any(fnmatch.fnmatchcase(t.name, g) for g in args.filter)]
    if allowed is not None:
        tests = [t for t in tests if operations_used(t.model) <= allowed]
    if not tests:
        raise CliError("no test models to run (check the paths and --filter)")
    dump = Path(args.dump_outputs) if args.dump_outputs else None
    with _device(args) as dev:
        # a bar on stderr only when it is a terminal (not with --quiet/--no-progress)
        results = run_vectors(dev, tests, progress=progress_wanted(args), dump_dir=dump)
    for r in results:
        if r.result == FAILED or (args.verbose and r.result == SKIPPED):
            print(f"{r.result.upper()} {r.name}: {r.error}", flush=True)
    if args.json_report:
        write_report(args.json_report, results)
    print(summary_line(results), flush=True)
    return EXIT_FAILED if any(r.result == FAILED for r in results) else EXIT_OK


# --------------------------------------------------------------------------
# bench
# --------------------------------------------------------------------------


def cmd_ops(args: argparse.Namespace) -> int:
    from nnhal.driver.catalog import catalog_json, catalog_table

    if args.json:
        print(json.dumps(catalog_json(), indent=1))
    else:
        print(catalog_table())
    return EXIT_OK


def cmd_bench(args: argparse.Namespace) -> int:
    from nnhal.tools.bench import run_control_flow_bench

    if args.repeat < 1 or any(n < 0 for n in args.n or []):
        raise CliError("--repeat must be >= 1 and every --n >= 0", EXIT_USAGE)
    ok = run_control_flow_bench(
        ns=args.n or [10, 1_000, 100_000],
        repeat=args.repeat,
        json_path=args.json,
        grpc=not args.no_grpc,
    )
    return EXIT_OK if ok else EXIT_FAILED


# --------------------------------------------------------------------------
# main
# --------------------------------------------------------------------------


def _add_device_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--target",
        metavar="ADDR",
        action=_runtime().TargetAction,  # repeatable for --runtime; else the last one counts
        help="HOST:PORT of a running `nnhal serve`",
    )
    p.add_argument(
        "--device", metavar="NAME", help="which device of --target's server (default: the first)"
    )
    p.add_argument(
        "--connect-timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="how long to wait for --target to answer (default 10)",
    )
    p.add_argument(
        "--profile",
        metavar="NAME|PATH",
        help="device profile for the in-process driver (built-in name or TOML file)",
    )
    _security().add_client_options(p)  # --tls-ca, --token-file, ...
    _oppkg().add_serve_options(p)  # --op-package, --package-backend (in-process driver)


def _threads_arg(text: str) -> int:
    from nnhal.driver.ops.threads import parse_threads

    try:
        return parse_threads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nnhal", description="An Android NNAPI HAL 1.3 driver emulator over gRPC."
    )
    parser.add_argument("--version", action="version", version=f"nnhal {nnhal.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser("serve", help="serve a device over gRPC until SIGINT/SIGTERM")
    p.add_argument(
        "--address",
        default=DEFAULT_ADDRESS,
        metavar="HOST:PORT",
        help=f"where to listen (default {DEFAULT_ADDRESS}; port 0 picks a free port)",
    )
    p.add_argument(
        "--profile",
        action="append",
        metavar="NAME|PATH",
        help="device profile (default: built-in); repeat to serve several devices",
    )
    p.add_argument(
        "--limit",
        action="append",
        metavar="KEY=VALUE",
        help="a resource limit for every served device, over its profile's [limits] "
        "(e.g. max_concurrent_executions=8); repeatable",
    )
    p.add_argument(
        "--threads",
        type=_threads_arg,
        metavar="N|auto",
        help="numeric-library (BLAS) threads of the server, over the profile's `threads` "
        "(default 1; auto = every core; docs/performance.md)",
    )
    p.add_argument(
        "--workers",
        type=_workers_arg,
        default=0,
        metavar="N|auto",
        help="run executions in N worker processes (auto: one per core), so that executions "
        "of different clients use every core (default 0: in the server process; "
        "docs/serving.md)",
    )
    p.add_argument(
        "--no-reflection",
        action="store_true",
        help="do not serve gRPC server reflection (on by default: grpcurl and grpc_cli can "
        "list and call the services)",
    )
    _oppkg().add_serve_options(p)
    import_module("nnhal.tools.cli_trace").add_serve_options(p)  # --cache-dir
    _security().add_serve_options(p)  # --tls-cert, --token-file, --grace, ...
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("supported", help="which main operations of a model the device supports")
    p.add_argument("model", help="model file (vector JSON, .json or .json.gz)")
    p.add_argument("--name", help="the model to use when the file holds several")
    _add_device_args(p)
    p.set_defaults(func=cmd_supported)

    p = sub.add_parser("run", help="prepare and execute a model; print the outputs as JSON")
    p.add_argument("model", help="model file (vector JSON, .json or .json.gz)")
    p.add_argument("--name", help="the model to use when the file holds several")
    p.add_argument(
        "--inputs", metavar="FILE.npz", help="inputs as in0, in1, ... (default: the file's)"
    )
    p.add_argument("--loop-timeout-ms", type=float, metavar="N", help="loopTimeoutDuration")
    p.add_argument("--deadline-ms", type=float, metavar="N", help="execution deadline from now")
    p.add_argument(
        "--trace",
        action="store_true",
        help="run in this process, printing every operation's inputs and outputs to stderr",
    )
    _add_device_args(p)
    _runtime().add_runtime_args(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("vectors", help="run test-vector files against the device")
    p.add_argument("paths", nargs="+", metavar="PATH", help="vector files or folders")
    p.add_argument(
        "--filter",
        action="append",
        metavar="GLOB",
        help="only test models whose name matches (repeatable), e.g. 'add/*'",
    )
    p.add_argument(
        "--operations",
        action="append",
        metavar="OP,OP,...",
        help="only test models whose operations (main and referenced) are all in this list",
    )
    p.add_argument("--json-report", metavar="FILE", help="write one entry per test model")
    p.add_argument(
        "--dump-outputs", metavar="DIR", help="write DIR/<name>.npz with out0, out1, ..."
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    import_module("nnhal.tools.progress").add_quiet_option(p)
    p.add_argument("-v", "--verbose", action="store_true", help="also list skipped models")
    _add_device_args(p)
    _runtime().add_runtime_args(p)
    p.set_defaults(func=cmd_vectors)

    import_module("nnhal.tools.cli_cts").add_parsers(sub)  # cts: the suite as a pytest session

    p = sub.add_parser("ops", help="the HAL 1.3 operations: operand types, versions, status")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.set_defaults(func=cmd_ops)

    import_module("nnhal.tools.cli_bench").add_bench_parser(sub, cmd_bench)
    _oppkg().add_parsers(sub)  # `nnhal oppkg ...`, `nnhal explain`
    import_module("nnhal.tools.cli_trace").add_parsers(sub)  # trace, devices, faults
    import_module("nnhal.tools.cli_stress").add_parsers(sub)  # stress, resources
    import_module("nnhal.tools.cli_import").add_parsers(sub)  # import (TFLite, ONNX)
    import_module("nnhal.tools.cli_tflite").add_parsers(sub)  # tflite: run, compare with LiteRT
    _runtime().add_parsers(sub)  # plan
    import_module("nnhal.tools.cli_proto").add_parsers(sub)  # proto
    return parser


def _security() -> Any:
    import nnhal.tools.cli_security

    return nnhal.tools.cli_security


def _runtime() -> Any:
    import nnhal.tools.cli_runtime

    return nnhal.tools.cli_runtime


def _oppkg() -> Any:
    import nnhal.tools.cli_oppkg

    return nnhal.tools.cli_oppkg


def main(argv: Sequence[str] | None = None) -> int:
    from nnhal.tools.cli_logs import configure
    from nnhal.tools.optional import MissingDependency

    configure()  # time, level and logger on every log line (serve --log-level: more)
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
    except KeyboardInterrupt:
        print("nnhal: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    prog = f"nnhal {args.command}"
    # the program itself (not a call from Python): `serve` may end the process if its exit hangs
    args.whole_process = argv is None
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        # Ctrl-C: one line, no traceback; what the command opened (its in-process
        # server, client channels) was closed by its `with` blocks on the way out
        print(f"{prog}: interrupted", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    except MissingDependency as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return EXIT_FAILED
    except BrokenPipeError:
        # the reader went away (`nnhal ops | head`): end quietly, as a process killed by
        # SIGPIPE would, and keep the interpreter from complaining while it flushes stdout
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_BROKEN_PIPE
    except CliError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return e.code
    except Exception as e:
        if os.environ.get("NNHAL_DEBUG"):
            raise
        from nnhal.errors import HalError

        what = (
            str(e) if isinstance(e, (HalError, ValueError, OSError)) else f"{type(e).__name__}: {e}"
        )
        print(f"{prog}: error: {what}", file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":  # pragma: no cover
    # `python -m nnhal.tools.cli`: run the imported module's main, not this copy's, so
    # that CliError raised by the other command modules (which import nnhal.tools.cli)
    # is the class main catches
    from nnhal.tools.cli import main as _main

    sys.exit(_main())
