"""CLI of the emulated NNAPI runtime: ``nnhal plan`` and ``--runtime`` for run / vectors
(``nnhal bench --runtime`` lives in ``nnhal.tools.bench_runtime``).

    nnhal plan MODEL [--name NAME] [--target ADDR[/DEVICE]]... [--preference P] [--json]
    nnhal run MODEL --runtime [--target ADDR[/DEVICE]]... [--preference P] [--mode M]
    nnhal vectors PATH... --runtime [--target ADDR[/DEVICE]]... [--preference P]

Every command uses the given targets plus the runtime's CPU device
``nnapi-reference`` (always last), as an app's compilation on a phone does.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import math
import sys
from typing import Any

import numpy as np

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

PREFERENCES = {"FAST_SINGLE_ANSWER": 1, "SUSTAINED_SPEED": 2, "LOW_POWER": 0}


class TargetAction(argparse.Action):
    """``--target`` repeatable: ``args.target`` keeps the last (as the single-device commands
    expect), ``args.targets`` all of them (for ``--runtime`` and ``plan``)."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        setattr(namespace, self.dest, values)
        targets = list(getattr(namespace, "targets", None) or [])
        targets.append(values)
        namespace.targets = targets


def add_runtime_args(p: argparse.ArgumentParser) -> None:
    """The options ``--runtime`` brings to ``run`` and ``vectors``."""
    p.add_argument(
        "--runtime",
        action="store_true",
        help="run through the emulated NNAPI runtime: every --target (repeatable, "
        "ADDR[/DEVICE]) plus the CPU device nnapi-reference, partitioned as Android does",
    )
    p.add_argument("--preference", choices=sorted(PREFERENCES), default="FAST_SINGLE_ANSWER",
                   help="with --runtime: the compilation's execution preference")  # fmt: skip
    p.add_argument("--mode", choices=("sync", "async", "burst", "fenced"), default="sync",
                   help="with --runtime: how each step runs (default sync)")  # fmt: skip


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("plan", help="which operations the NNAPI runtime would run on which device")
    p.add_argument("model", help="model file (vector JSON, .json or .json.gz)")
    p.add_argument("--name", help="the model to use when the file holds several")
    p.add_argument("--target", action=TargetAction, metavar="ADDR[/DEVICE]",
                   help="a served device (repeatable); nnapi-reference is always added")  # fmt: skip
    p.add_argument("--connect-timeout", type=float, default=10.0, metavar="SECONDS")
    p.add_argument("--preference", choices=sorted(PREFERENCES), default="FAST_SINGLE_ANSWER")
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.set_defaults(func=cmd_plan, targets=[])


def _devices(args: argparse.Namespace) -> list[Any]:
    from nnhal.runtime.devices import connect_target

    if getattr(args, "profile", None):
        raise ValueError(
            "--profile configures the in-process driver; with --runtime give served devices "
            "with --target (nnapi-reference, the default profile, is always there)"
        )

    targets = list(getattr(args, "targets", None) or [])
    device = getattr(args, "device", None)
    if device:  # `--device NAME` names the device of every target given without /DEVICE
        targets = [t if "/" in t else f"{t}/{device}" for t in targets]
    return [connect_target(t, timeout=args.connect_timeout) for t in targets]


def _close(devices: list[Any]) -> None:
    for d in devices:
        d.device.close()


def _load(path: str, name: str | None) -> Any:
    from nnhal.runtime.api import load_test_model

    return load_test_model(path, name)


# --------------------------------------------------------------------------
# plan
# --------------------------------------------------------------------------


def plan_json(model: Any, devices: list[Any], preference: int) -> dict[str, Any]:
    """The plan of ``model``: per operation the device and why; the steps."""
    from nnhal.runtime.host import HostDevice, host_devices
    from nnhal.runtime.partition import (
        INTERPRETER,
        DeviceStep,
        IfStep,
        SubgraphPlan,
        number_steps,
        partition,
    )
    from nnhal.runtime.reference import reference_device
    from nnhal.runtime.slicing import subgraph_of

    from nnhal.types import operation_name

    all_devices = [*devices, *host_devices(model), reference_device()]
    plan = partition(model, all_devices, preference)
    number_steps(plan)

    def name(d: int) -> str:
        return "runtime interpreter" if d == INTERPRETER else all_devices[d].name

    def why(p: SubgraphPlan, c: Any) -> str:
        dev = None if c.device == INTERPRETER else all_devices[c.device]
        if isinstance(dev, HostDevice):  # what the host runs, and why there
            return dev.describe(
                model,
                subgraph_of(model, p.source),
                subgraph_of(model, p.source).operations[c.operation],
            )
        return c.note or _why(c, all_devices, preference)

    def sub_json(p: SubgraphPlan) -> dict[str, Any]:
        ops = []
        for c in p.choices:
            ops.append(
                {
                    "operation": c.operation,
                    "type": operation_name(c.type),
                    "device": name(c.device),
                    "why": why(p, c),
                    "performance": {all_devices[d].name: v for d, v in c.perf.items()},
                    "unsupported": {all_devices[d].name: r for d, r in c.unsupported.items()},
                }
            )
        steps = []
        for st in p.steps:
            if isinstance(st, DeviceStep):
                steps.append(
                    {
                        "step": st.index,
                        "device": all_devices[st.device].name,
                        "operations": st.operations,
                        "inputs": list(st.io.inputs),
                        "outputs": list(st.io.outputs),
                    }
                )
            elif isinstance(st, IfStep):
                steps.append({"step": st.index, "IF": st.operation,
                              "then": sub_json(st.then_plan), "else": sub_json(st.else_plan)})  # fmt: skip
            else:
                steps.append({"step": st.index, "WHILE": st.operation,
                              "cond": sub_json(st.cond_plan), "body": sub_json(st.body_plan)})  # fmt: skip
        return {"subgraph": p.source, "simple": p.simple, "operations": ops, "steps": steps}

    return {"devices": [d.name for d in all_devices], **sub_json(plan)}


def _why(choice: Any, devices: list[Any], preference: int) -> str:
    """Why the partitioner chose this device, in the runtime's own terms."""
    if len(choice.perf) == 1:
        return "the only device supporting it"
    figure = "powerUsage" if preference == 0 else "execTime"
    best = choice.perf[choice.device]
    others = ", ".join(
        f"{devices[d].name} {v:g}" for d, v in choice.perf.items() if d != choice.device
    )
    if any(v == best for d, v in choice.perf.items() if d != choice.device):
        return f"{figure} {best:g} ties with {others}; the CPU device wins ties"
    return f"lowest {figure}: {best:g} (vs {others})"


def _print_plan(doc: dict[str, Any], indent: str = "") -> None:
    if not indent:
        print(f"devices: {', '.join(doc['devices'])}")
    for op in doc["operations"]:
        line = f"{indent}op {op['operation']:>3} {op['type']:<28} -> {op['device']} ({op['why']})"
        print(line)
        for dev, why in op["unsupported"].items():
            print(f"{indent}        not on {dev}: {why}")
    kind = "simple plan (one device, whole model)" if doc["simple"] else "steps"
    print(f"{indent}{kind}:")
    for st in doc["steps"]:
        if "device" in st:
            print(f"{indent}  step {st['step']}: {st['device']} operations {st['operations']} "
                  f"inputs {st['inputs']} outputs {st['outputs']}")  # fmt: skip
        else:
            kind = "IF" if "IF" in st else "WHILE"
            print(f"{indent}  step {st['step']}: {kind} (operation {st[kind]}) in the runtime")
            for part in ("then", "else", "cond", "body"):
                if part in st:
                    print(f"{indent}    {part} (subgraph {st[part]['subgraph']}):")
                    _print_plan(st[part], indent + "      ")


def cmd_plan(args: argparse.Namespace) -> int:
    test = _load(args.model, args.name)
    devices = _devices(args)
    try:
        doc = plan_json(test.model, devices, PREFERENCES[args.preference])
    finally:
        _close(devices)
    if args.json:
        print(json.dumps(doc, indent=1))
    else:
        _print_plan(doc)
    return EXIT_OK


# --------------------------------------------------------------------------
# run / vectors --runtime
# --------------------------------------------------------------------------


def _jsonable(x: Any) -> Any:
    if isinstance(x, np.ndarray):
        x = x.tolist()
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, float) and math.isnan(x):
        return "NaN"
    if isinstance(x, float) and x in (float("inf"), float("-inf")):
        return "Infinity" if x > 0 else "-Infinity"
    return x


def cmd_run(args: argparse.Namespace, inputs: list[Any] | None = None) -> int:
    from nnhal.runtime.api import Compilation, Execution

    from nnhal.errors import HalError

    test = _load(args.model, args.name)
    inputs = list(test.inputs) if inputs is None else inputs
    devices = _devices(args)
    doc: dict[str, Any]
    try:
        compilation = Compilation(test.model, devices)
        compilation.set_preference(PREFERENCES[args.preference])
        try:
            compilation.finish()
        except HalError as e:
            print(json.dumps({"status": e.status.name, "message": e.message, "stage": "compile"}))
            return EXIT_FAILED
        execution = Execution(compilation)
        for k, v in enumerate(inputs):
            execution.set_input(k, v)
        for k, shape in enumerate(test.expected_shapes):
            execution.set_output(k, None, shape if shape and all(shape) else None)
        loop = getattr(args, "loop_timeout_ms", None)
        execution.set_loop_timeout(None if loop is None else int(loop * 1_000_000))
        deadline = getattr(args, "deadline_ms", None)
        execution.set_timeout(None if deadline is None else int(deadline * 1_000_000))
        try:
            outputs = execution.compute(args.mode)
            doc = {
                "status": "NONE",
                "outputShapes": [list(s.dimensions) for s in execution.output_shapes],
                "outputs": [_jsonable(np.asarray(o)) for o in outputs],
            }
            code = EXIT_OK
        except HalError as e:
            doc = {"status": e.status.name, "message": e.message, "stage": "execute"}
            code = EXIT_FAILED
        finally:
            compilation.release()
        doc["report"] = execution.report.to_json()
        if compilation.fallback:  # a device failed to prepare: the whole model on the CPU
            doc["report"]["compilation_fallback"] = compilation.fallback
    finally:
        _close(devices)
    print(json.dumps(doc, indent=1))
    return code


def cmd_vectors(args: argparse.Namespace) -> int:
    from nnhal.runtime.vectors import run_test_model

    from nnhal.vector_runner import FAILED, SKIPPED, summary_line, write_report
    from nnhal.vectors import find_vector_files, load_vectors, operations_used

    tests = [t for f in find_vector_files(args.paths) for t in load_vectors(f)]
    if args.filter:
        tests = [t for t in tests if any(fnmatch.fnmatchcase(t.name, g) for g in args.filter)]
    if args.operations:
        allowed = {n.strip().upper() for v in args.operations for n in v.split(",") if n.strip()}
        tests = [t for t in tests if operations_used(t.model) <= allowed]
    if not tests:
        print("no test models to run (check the paths and --filter)", file=sys.stderr)
        return EXIT_FAILED
    devices = _devices(args)
    results, fallbacks, spanning = [], 0, 0
    try:
        for t in tests:
            r = run_test_model(devices, t, preference=PREFERENCES[args.preference], mode=args.mode)
            results.append(r.result)
            if args.dump_outputs and r.outputs:
                from pathlib import Path

                from nnhal.vector_runner import dump_name

                Path(args.dump_outputs).mkdir(parents=True, exist_ok=True)
                np.savez(Path(args.dump_outputs) / f"{dump_name(t.name)}.npz",
                         **{f"out{k}": np.asarray(a) for k, a in enumerate(r.outputs)})  # fmt: skip
            fallbacks += bool(r.report.get("fallbacks"))
            spanning += len(r.devices_used) > 1
            if r.result.result == FAILED or (args.verbose and r.result.result == SKIPPED):
                print(f"{r.result.result.upper()} {r.result.name}: {r.result.error}", flush=True)
    finally:
        _close(devices)
    if args.json_report:
        write_report(args.json_report, results)
    print(f"{summary_line(results)} ({spanning} spanning several devices, "
          f"{fallbacks} with a CPU fallback)", flush=True)  # fmt: skip
    return EXIT_FAILED if any(r.result == FAILED for r in results) else EXIT_OK
