"""``nnhal tflite MODEL.tflite [--inputs FILE.npz] [--target ADDR] [--repeat N] [--json]``.

Imports the model as TFLite's NNAPI delegate would (``nnhal.importers.tflite``),
runs it on the device (``--target``, or the in-process driver behind a real
gRPC server), and, when LiteRT is installed (``pip install 'nnhal[tflite]'``),
runs the same inputs in LiteRT (one thread) and reports per output the largest
absolute and relative difference (quantization steps for integer outputs) and
the median times of both.

Nodes the delegate would not take run on the CPU in LiteRT, each as a
single-operator model (``nnhal.importers.tflite.fallback``); that needs LiteRT,
without it such a model is refused with the list of those nodes. The report
gives the plan (which step runs where) and each step's median time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
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
    p.set_defaults(func=cmd_tflite)


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


def _dtype(t: Any) -> Any:
    from nnhal.importers.tflite.reader import TENSOR_TYPES

    return TENSOR_TYPES[t.type][1]


@contextmanager
def _open_device(args: argparse.Namespace) -> Iterator[Any]:
    """``--target``, or the in-process driver (with ``--op-package``s) behind a gRPC server."""
    from nnhal.tools.cli import CliError, _device

    if not args.op_package:
        with _device(args) as dev:
            yield dev
        return
    if args.target:
        raise CliError(
            "--op-package loads into the in-process driver; give it to the "
            "`nnhal serve` behind --target instead",
            2,
        )
    from nnhal.driver.device import Device
    from nnhal.driver.service import create_server
    from nnhal.tools.cli_oppkg import device_options

    from nnhal.vector_runner import connect_device

    server, address = create_server(Device(**device_options(args)), "127.0.0.1:0")
    try:
        with connect_device(address) as dev:
            yield dev
    finally:
        server.stop(None)


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
    from nnhal.importers.tflite import TFLiteFormatError, import_tflite, parse_custom_op
    from nnhal.tools.cli import CliError

    from nnhal.errors import HalError

    if args.repeat < 1:
        raise CliError("--repeat must be >= 1", 2)
    try:
        custom = dict(parse_custom_op(s) for s in args.custom_op)
    except ValueError as e:
        raise CliError(str(e), 2) from None
    try:
        result = import_tflite(args.model, custom)
    except TFLiteFormatError as e:
        raise CliError(f"{args.model}: {e}") from None
    from nnhal.importers.tflite.fallback import TfliteRunner

    sg = result.tflite.subgraphs[0]
    inputs = _inputs(args, [sg.tensors[t] for t in sg.inputs])
    out_tensors = [sg.tensors[t] for t in sg.outputs]
    report: dict[str, Any] = {
        "model": args.model,
        "operators": result.nodes,
        "delegated": result.delegated,
        "nnapi_operations": sum(p.operations for p in result.partitions),
        "not_delegated": [s.line() for s in result.skipped],
    }
    model_bytes = open(args.model, "rb").read()  # noqa: SIM115 - read whole, already parsed
    with _open_device(args) as dev:
        try:
            t0 = time.perf_counter()
            runner = TfliteRunner(result, dev.prepareModel_1_3, model_bytes)
            report["prepare_ms"] = (time.perf_counter() - t0) * 1e3
        except HalError as e:
            raise CliError(f"{args.model}: the device refused a partition: {e}") from None
        except ImportError as e:
            raise CliError(
                f"{args.model}: {len(result.skipped)} operator(s) are not delegated "
                f"({'; '.join(report['not_delegated'])}); {e}"
            ) from None
        except ValueError as e:  # FallbackError: a CPU node LiteRT cannot run
            raise CliError(f"{args.model}: {e}") from None
        try:
            report["plan"] = runner.plan()
            times, step_ms = [], []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                outputs = runner.run(inputs)
                times.append((time.perf_counter() - t0) * 1e3)
                step_ms.append([s.ms for s in runner.steps])
        except HalError as e:
            raise CliError(f"{args.model}: execution failed: {e}") from None
        finally:
            runner.release()
    report["run_ms"] = statistics.median(times)
    report["step_ms"] = [statistics.median(col) for col in zip(*step_ms)]
    outputs = [np.asarray(o).reshape(t.shape) for o, t in zip(outputs, out_tensors)]
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
    print(
        f"{args.model}: {result.nodes} operators, {result.delegated} delegated "
        f"({report['nnapi_operations']} NNAPI operations), {len(result.skipped)} on the CPU"
    )
    for line, ms in zip(report["plan"], report["step_ms"]):
        print(f"  {line}: {ms:.2f} ms")
    print(
        f"  whole run: prepare {report['prepare_ms']:.1f} ms, run median "
        f"{report['run_ms']:.2f} ms over {args.repeat}"
    )
    if "litert_ms" in report:
        print(f"  LiteRT (1 thread): invoke median {report['litert_ms']:.2f} ms")
        for o in report["outputs"]:
            diffs = ", ".join(f"{k} {v:.3g}" for k, v in o.items() if k.startswith("max_"))
            print(f"  output {o['name']!r} {o['shape']}: {diffs}")
    else:
        print(f"  LiteRT: {report['litert']}")
    return 0
