"""``nnhal bench --model MODEL.tflite``: one TFLite model timed four ways in one process.

Cases, run in interleaved rounds (each round runs every case ``per_round`` times;
the figure is the median over rounds of the per-run mean):

- ``in-process``: the NNAPI model the delegate would build, on nnhal's executor
  directly (``nnhal.driver.executor.compile_model``), no gRPC;
- ``grpc``: the same model prepared on the in-process driver behind a real gRPC
  server on 127.0.0.1 (what an app's HAL calls cost);
- ``litert-1``: LiteRT, one thread (the baseline of the ratios);
- ``litert-default``: LiteRT with its default thread count.

Inputs are ``MODEL.npz`` beside the model when it exists (arrays ``input_0``, ...),
else seeded random values of each input tensor's type. LiteRT is optional
(``nnhal[tflite]``); without it the LiteRT cases are reported as skipped. Only
models the delegate takes whole are benchmarked.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["cmd_bench_tflite", "run_cases"]


def run_cases(
    cases: dict[str, Callable[[], Any]], rounds: int, per_round: int, warmup: int
) -> dict[str, float]:
    """Median over ``rounds`` of the mean ms per run, cases interleaved within each round."""
    for fn in cases.values():
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(rounds):
        for name, fn in cases.items():
            t0 = time.perf_counter()
            for _ in range(per_round):
                fn()
            samples[name].append((time.perf_counter() - t0) * 1e3 / per_round)
    return {name: statistics.median(v) for name, v in samples.items()}


def cmd_bench_tflite(args: argparse.Namespace) -> int:
    from nnhal.driver.executor import compile_model
    from nnhal.importers.tflite import TFLiteFormatError, import_tflite
    from nnhal.tools.cli import CliError
    from nnhal.tools.cli_tflite import _inputs
    from nnhal.tools.local import local_device

    try:
        result = import_tflite(args.model)
    except TFLiteFormatError as e:
        raise CliError(f"{args.model}: {e}") from None
    if not result.complete:
        raise CliError(
            f"{args.model}: {len(result.skipped)} operator(s) are not delegated "
            f"(first: {result.skipped[0].line()}); only whole models are benchmarked"
        )
    part = result.partitions[0]
    sg = result.tflite.subgraphs[0]
    beside = Path(args.model).with_suffix(".npz")  # input_0, ... when present (test models)
    ns = argparse.Namespace(inputs=str(beside) if beside.is_file() else None)
    inputs = _inputs(ns, [sg.tensors[t] for t in part.inputs])
    feeds = [np.atleast_1d(x) for x in inputs]
    shapes = [tuple(sg.tensors[t].shape) or (1,) for t in part.outputs]
    compiled = compile_model(part.model)
    cases: dict[str, Callable[[], Any]] = {"in-process": lambda: compiled.run(feeds)}
    skipped: dict[str, str] = {}
    interpreters = {}
    try:
        from ai_edge_litert.interpreter import Interpreter

        for name, threads in (("litert-1", 1), ("litert-default", None)):
            it = Interpreter(model_path=args.model, num_threads=threads)
            it.allocate_tensors()
            for d, x in zip(it.get_input_details(), inputs):
                it.set_tensor(d["index"], x)
            interpreters[name] = it
            cases[name] = it.invoke
    except ImportError:
        skipped["litert"] = "not installed (pip install 'nnhal[tflite]')"
    except (RuntimeError, ValueError) as e:
        skipped["litert"] = f"cannot run the model: {str(e).splitlines()[0]}"
    from nnhal.tools.cli_oppkg import local_options

    with local_device(args.profile, **local_options(args)) as dev:  # --op-package, installed
        prepared = dev.prepareModel_1_3(part.model)
        try:
            cases["grpc"] = lambda: prepared.execute(feeds, output_shapes=shapes)
            per_round = max(1, getattr(args, "tflite_per_round", 10))
            figures = run_cases(cases, args.rounds, per_round, max(args.warmup, 1))
        finally:
            prepared.release()
    base = figures.get("litert-1")
    doc = {
        "model": args.model,
        "operators": result.nodes,
        "delegated": result.delegated,
        "nnapi_operations": part.operations,
        "rounds": args.rounds,
        "ms": figures,
        "skipped": skipped,
    }
    print(
        f"{args.model}: {result.nodes} operators, all delegated ({part.operations} NNAPI "
        f"operations); median of {args.rounds} interleaved rounds, ms per run"
    )
    for name, ms in figures.items():
        ratio = f"  {ms / base:8.1f}x litert-1" if base else ""
        print(f"  {name:15s} {ms:10.3f}{ratio}")
    for name, why in skipped.items():
        print(f"  {name:15s} skipped: {why}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=2)
    return 0
