"""``nnhal tflite MODEL.tflite [--target ADDR]... [--inputs FILE.npz] [--repeat N] [--json]``.

Imports the model as TFLite's NNAPI delegate would (``nnhal.importers.tflite``)
and runs it as TFLite would on a phone with that delegate: each delegated
partition is one NNAPI compilation of the emulated runtime (``nnhal.runtime``:
partitioned over every ``--target``, the in-process driver when ``--profile`` /
``--op-package`` configure one, and the CPU device ``nnapi-reference``), and
the nodes the delegate would not take run on the CPU in LiteRT between them,
each as a single-operator model (``nnhal.importers.tflite.fallback``; without
LiteRT such a model is refused with the list of those nodes).

The report gives the plan (each partition with the runtime's steps: which
device runs which TFLite nodes), the operators per device, any fallback, the
median times, and, when LiteRT is installed (``pip install 'nnhal[tflite]'``),
the same inputs run in LiteRT (one thread) with per output the largest absolute
and relative difference (quantization steps for integer outputs).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["add_parsers", "cmd_tflite", "compare", "litert_run"]


def add_parsers(sub: Any) -> None:
    from nnhal.tools.cli import _add_device_args

    p = sub.add_parser(
        "tflite",
        help="run a .tflite model on the device as the NNAPI delegate would, compare with LiteRT",
        description="Import MODEL.tflite as TFLite's NNAPI delegate would, run it on the "
        "device and (with LiteRT installed) in LiteRT, and report differences and times.",
    )
    p.add_argument("model", metavar="MODEL.tflite")
    p.add_argument(
        "--inputs", metavar="FILE.npz", help="input_0, input_1, ... (default: seeded random inputs)"
    )
    p.add_argument(
        "--repeat",
        type=int,
        default=5,
        metavar="N",
        help="timed runs on each side (median reported; default 5)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument(
        "--preference",
        choices=("FAST_SINGLE_ANSWER", "LOW_POWER", "SUSTAINED_SPEED"),
        default="FAST_SINGLE_ANSWER",
        help="the NNAPI compilations' execution preference",
    )
    p.add_argument(
        "--no-nnapi-cpu",
        action="store_true",
        help="as the delegate's disallow_nnapi_cpu: compile the partitions for the given "
        "devices only (no nnapi-reference) and leave every node none of them supports to "
        "LiteRT on the CPU",
    )
    p.add_argument(
        "--custom-op",
        action="append",
        default=[],
        metavar="NAME=EXTENSION:OPERATION",
        help="run TFLite custom operator NAME as an op-package extension operation",
    )
    p.add_argument(
        "--op-package",
        action="append",
        metavar="DIR_OR_CONFIG",
        help="load an op package into the in-process driver (repeatable)",
    )
    _add_device_args(p)
    p.set_defaults(func=cmd_tflite, targets=[])


def _inputs(args: argparse.Namespace, tensors: list[Any]) -> list[np.ndarray]:
    from nnhal.tools.cli import CliError

    if args.inputs:
        from nnhal.tools.cli import readable_file
        from nnhal.tools.npz_inputs import fit_array, load_npz

        try:  # one line for a file that is no .npz, and for a value its tensor cannot hold
            data = load_npz(readable_file(args.inputs, "--inputs"))
            missing = [f"input_{k}" for k in range(len(tensors)) if f"input_{k}" not in data]
            if missing:
                raise ValueError(f"{args.inputs}: no {', '.join(missing)} (has {sorted(data)})")
            arrays = [data[f"input_{k}"] for k in range(len(tensors))]
            for k, (a, t) in enumerate(zip(arrays, tensors)):
                if tuple(a.shape) != tuple(t.shape):
                    raise ValueError(
                        f"{args.inputs}: input_{k} has shape {list(a.shape)}, tensor "
                        f"{t.name!r} needs {list(t.shape)}"
                    )
            return [
                fit_array(a, np.dtype(_dtype(t)), f"{args.inputs}: input_{k} ({t.name!r})")
                for k, (a, t) in enumerate(zip(arrays, tensors))
            ]
        except ValueError as e:
            raise CliError(str(e)) from None
    rng = np.random.default_rng(0)
    out = []
    for t in tensors:
        dt = np.dtype(_dtype(t))
        if np.issubdtype(dt, np.floating):
            out.append(rng.uniform(-1, 1, t.shape).astype(dt))
        elif dt == np.bool_:
            out.append(rng.integers(0, 2, t.shape).astype(dt))
        else:
            info = np.iinfo(dt)
            lo, hi = max(info.min, -128), min(info.max, 255)
            out.append(rng.integers(lo, hi + 1, t.shape).astype(dt))
    return out


def _stored_outputs(args: argparse.Namespace, n: int) -> list[np.ndarray]:
    """``output_0``, ... of the ``--inputs`` file when it has them all (expected outputs
    stored with the inputs, as examples/tflite/NAME.npz do), else none."""
    if not args.inputs:
        return []
    data = np.load(args.inputs)
    keys = [f"output_{k}" for k in range(n)]
    return [data[k] for k in keys] if all(k in data.files for k in keys) else []


def _dtype(t: Any) -> Any:
    from nnhal.importers.tflite.reader import TENSOR_TYPES

    return TENSOR_TYPES[t.type][1]


@contextmanager
def _open_devices(args: argparse.Namespace) -> Iterator[list[Any]]:
    """The runtime's devices: every ``--target``, plus the in-process driver (behind a gRPC
    server) when ``--profile`` or ``--op-package`` configures one. ``nnapi-reference`` is
    added by the compilation itself."""
    from nnhal.runtime.devices import ClientDevice, connect_target
    from nnhal.tools.cli import CliError

    from nnhal.errors import DeviceUnavailable, HalError

    targets = list(getattr(args, "targets", None) or [])
    if args.device:  # `--device NAME` names the device of every target given without /DEVICE
        targets = [t if "/" in t else f"{t}/{args.device}" for t in targets]
    devices: list[Any] = []
    try:
        for t in targets:
            if args.connect_timeout <= 0:
                raise CliError("--connect-timeout must be > 0", 2)
            try:
                devices.append(connect_target(t, timeout=args.connect_timeout))
            except (HalError, DeviceUnavailable, ValueError) as e:
                raise CliError(f"--target {t}: {e}") from None
        if args.profile or args.op_package:
            from nnhal.tools.cli_oppkg import local_options
            from nnhal.tools.local import local_device

            with local_device(args.profile, **local_options(args)) as dev:
                devices.append(ClientDevice(dev, f"{args.profile or 'nnhal'} (in-process)"))
                yield devices
        else:
            yield devices
    finally:
        for d in devices[: len(targets)]:  # the in-process one is closed by local_device
            d.device.close()


def _ranges(nodes: list[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> "0..2, 5, 7..8"."""
    parts, start, prev = [], None, None
    for n in sorted(nodes):
        if start is None:
            start = prev = n
        elif n == prev + 1:
            prev = n
        else:
            parts.append(str(start) if start == prev else f"{start}..{prev}")
            start = prev = n
    if start is not None:
        parts.append(str(start) if start == prev else f"{start}..{prev}")
    return ", ".join(parts)


def litert_run(path: str, inputs: list[np.ndarray], repeat: int) -> tuple[list[np.ndarray], float]:
    """LiteRT's outputs and its median time (ms), single-threaded."""
    from ai_edge_litert.interpreter import Interpreter

    interp = Interpreter(model_path=path, num_threads=1)
    interp.allocate_tensors()
    times = []
    for _ in range(max(repeat, 1)):
        # variable tensors (LSTM states) carry over between invokes: start each from zeros,
        # as the NNAPI model does (read-only states are constant zeros there)
        interp.reset_all_variables()
        for d, x in zip(interp.get_input_details(), inputs):
            interp.set_tensor(d["index"], x)
        t0 = time.perf_counter()
        interp.invoke()
        times.append((time.perf_counter() - t0) * 1e3)
    outs = [interp.get_tensor(d["index"]).copy() for d in interp.get_output_details()]
    return outs, statistics.median(times)


def compare(got: np.ndarray, want: np.ndarray) -> dict[str, float]:
    """Largest absolute and relative difference; quantization steps for integer outputs."""
    g = np.asarray(got).reshape(want.shape).astype(np.float64)
    w = want.astype(np.float64)
    diff = np.abs(g - w)
    if np.issubdtype(want.dtype, np.floating):
        rel = diff / np.maximum(np.abs(w), np.finfo(np.float32).tiny)
        return {"max_abs": float(diff.max(initial=0)), "max_rel": float(rel.max(initial=0))}
    return {"max_steps": float(diff.max(initial=0))}


def cmd_tflite(args: argparse.Namespace) -> int:
    from nnhal.importers.tflite import (
        TFLiteFormatError,
        import_tflite,
        parse_custom_op,
        read_model,
    )
    from nnhal.tools.cli import CliError
    from nnhal.tools.cli_runtime import PREFERENCES

    from nnhal.errors import HalError

    if args.repeat < 1:
        raise CliError("--repeat must be >= 1", 2)
    try:
        custom = dict(parse_custom_op(s) for s in args.custom_op)
    except ValueError as e:
        raise CliError(str(e), 2) from None
    if args.op_package:
        custom = _with_definitions(custom, args)
    try:
        tfl_model = read_model(args.model)
        result = import_tflite(args.model, custom)
    except TFLiteFormatError as e:
        raise CliError(f"{args.model}: {e}") from None
    from nnhal.importers.tflite.fallback import TfliteRunner
    from nnhal.importers.tflite.runtime_steps import RuntimePartition, import_for_devices

    preference = PREFERENCES[args.preference]
    use_reference = not args.no_nnapi_cpu
    model_bytes = Path(args.model).read_bytes()
    with _open_devices(args) as devices:
        if not use_reference:
            if not devices:
                raise CliError("--no-nnapi-cpu needs a device: give --target (or --profile)", 2)
            # the delegate's disallow_nnapi_cpu: nodes no device supports stay on the CPU
            result = import_for_devices(tfl_model, devices, custom)
        sg = result.tflite.subgraphs[0]
        inputs = _inputs(args, [sg.tensors[t] for t in sg.inputs])
        out_tensors = [sg.tensors[t] for t in sg.outputs]
        report: dict[str, Any] = {
            "model": args.model,
            "operators": result.nodes,
            "delegated": result.delegated,
            "folded": result.folded_counts(),
            "nnapi_operations": sum(p.operations for p in result.partitions),
            "not_delegated": [s.line() for s in result.skipped],
            "notes": list(result.notes),
        }
        report["devices"] = [d.name for d in devices] + (
            ["nnapi-reference"] if use_reference else []
        )

        def prepare(partition: Any) -> RuntimePartition:
            return RuntimePartition(
                partition, devices, preference=preference, use_reference=use_reference
            )

        try:
            t0 = time.perf_counter()
            runner = TfliteRunner(result, prepare, model_bytes)
            report["prepare_ms"] = (time.perf_counter() - t0) * 1e3
        except HalError as e:
            raise CliError(f"{args.model}: the NNAPI runtime refused a partition: {e}") from None
        except ImportError as e:
            raise CliError(
                f"{args.model}: {len(result.skipped)} operator(s) are not delegated "
                f"({'; '.join(report['not_delegated'])}); {e}"
            ) from None
        except ValueError as e:  # FallbackError: a CPU node LiteRT cannot run
            raise CliError(f"{args.model}: {e}") from None
        try:
            times, step_ms, fallbacks = [], [], []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                outputs = runner.run(inputs)
                times.append((time.perf_counter() - t0) * 1e3)
                step_ms.append([s.ms for s in runner.steps])
            for s in runner.steps:
                if s.kind == "nnapi" and s.runner[0].report is not None:
                    fallbacks += [f.to_json() for f in s.runner[0].report.fallbacks]
            report["plan"] = _plan(runner, [statistics.median(c) for c in zip(*step_ms)])
            report["fallbacks"] = fallbacks
        except HalError as e:
            raise CliError(f"{args.model}: execution failed: {e}") from None
        finally:
            runner.release()
    report["operators_per_device"] = _per_device(report["plan"], result)
    report["run_ms"] = statistics.median(times)
    outputs = [np.asarray(o).reshape(t.shape) for o, t in zip(outputs, out_tensors)]
    stored = _stored_outputs(args, len(out_tensors))
    if stored:
        report["stored_outputs"] = [
            {"name": t.name, "shape": list(t.shape), "file": args.inputs, **compare(o, r)}
            for t, o, r in zip(out_tensors, outputs, stored)
        ]
    try:
        ref, ref_ms = litert_run(args.model, inputs, args.repeat)
    except ImportError:
        report["litert"] = "not installed (pip install 'nnhal[tflite]')"
    except (RuntimeError, ValueError) as e:  # e.g. a custom operator LiteRT has no kernel for
        report["litert"] = f"cannot run the model: {str(e).splitlines()[0]}"
    else:
        report["litert_ms"] = ref_ms
        report["outputs"] = [
            {"name": t.name, "shape": list(t.shape), **compare(o, r)}
            for t, o, r in zip(out_tensors, outputs, ref)
        ]
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    _print(report, result, args.repeat)
    return 0


def _with_definitions(
    custom: dict[str, tuple[Any, ...]], args: argparse.Namespace
) -> dict[str, tuple[Any, ...]]:
    """Add the operation's parameters (from the ``--op-package`` definitions) to each
    custom-operator mapping, so its custom options become parameter operands."""
    from nnhal.importers.tflite import CustomParam
    from nnhal.tools.cli import CliError
    from nnhal.tools.cli_oppkg import local_options

    packages = [p for p in local_options(args)["op_packages"] if hasattr(p, "spec")]
    out = dict(custom)
    for name, (extension, number, *_) in custom.items():
        pkg = next((p for p in packages if p.spec.extension_name == extension), None)
        if pkg is None:
            continue  # served elsewhere (a --target's package): no definition here
        if number >= len(pkg.spec.ops):
            raise CliError(
                f"--custom-op {name}={extension}:{number}: the package has "
                f"{len(pkg.spec.ops)} operations (0..{len(pkg.spec.ops) - 1})",
                2,
            )
        params = [
            CustomParam(t.name, tuple(t.datatypes), bool(t.scalar), bool(t.mandatory), t.default)
            for t in pkg.spec.ops[number].params
        ]
        out[name] = (extension, number, params)
    return out


def _plan(runner: Any, medians: list[float]) -> list[dict[str, Any]]:
    """The TFLite-level steps, each NNAPI partition with the runtime's steps inside it."""
    plan = []
    names = {op.index: op.name for op in runner.sg.operators}
    for k, (step, ms) in enumerate(zip(runner.steps, medians)):
        entry: dict[str, Any] = {
            "kind": step.kind,
            "nodes": list(step.nodes),
            "line": step.describe(lambda i: names[i]),
            "ms": ms,
        }
        if step.kind == "nnapi":
            entry["runtime_steps"] = [s.to_json() for s in step.runner[0].steps()]
        plan.append(entry)
    return plan


def _per_device(plan: list[dict[str, Any]], result: Any) -> dict[str, int]:
    """TFLite operators per place they ran (a node split over devices counts where its
    first NNAPI operation ran); folded nodes count as "folded"."""
    counts: dict[str, int] = {}
    for entry in plan:
        if entry["kind"] == "litert":
            counts["LiteRT CPU"] = counts.get("LiteRT CPU", 0) + len(entry["nodes"])
            continue
        seen: set[int] = set()
        for s in entry["runtime_steps"]:
            for n in s["nodes"]:
                if n not in seen:
                    seen.add(n)
                    counts[s["device"]] = counts.get(s["device"], 0) + 1
    if result.folded:
        counts["folded"] = len(result.folded)
    return counts


def _print(report: dict[str, Any], result: Any, repeat: int) -> None:
    print(
        f"{report['model']}: {result.nodes} operators, {result.delegated} delegated "
        f"({report['nnapi_operations']} NNAPI operations), {len(result.skipped)} on the CPU"
    )
    for line in report["not_delegated"]:
        print(f"  not delegated: {line}")
    for note in report["notes"]:
        print(f"  note: {note}")
    print(f"  devices: {', '.join(report['devices'])}")
    for entry in report["plan"]:
        print(f"  {entry['line']}: {entry['ms']:.2f} ms")
        for s in entry.get("runtime_steps", []):
            print(f"    runtime step {s['step']} on {s['device']}: nodes {_ranges(s['nodes'])}")
    per = ", ".join(f"{k} {v}" for k, v in report["operators_per_device"].items())
    print(f"  operators: {per}")
    for f in report["fallbacks"]:
        print(f"  fallback ({f['kind']}) from {f['device']} after {f['status']}: {f['message']}")
    print(
        f"  whole run: prepare {report['prepare_ms']:.1f} ms, run median "
        f"{report['run_ms']:.2f} ms over {repeat}"
    )
    for o in report.get("stored_outputs", []):
        diffs = ", ".join(f"{k} {v:.3g}" for k, v in o.items() if k.startswith("max_"))
        print(f"  output {o['name']!r} {o['shape']} vs {o['file']}: {diffs}")
    if "litert_ms" in report:
        print(f"  LiteRT (1 thread): invoke median {report['litert_ms']:.2f} ms")
        for o in report["outputs"]:
            diffs = ", ".join(f"{k} {v:.3g}" for k, v in o.items() if k.startswith("max_"))
            print(f"  output {o['name']!r} {o['shape']}: {diffs}")
    else:
        print(f"  LiteRT: {report['litert']}")
