"""``nnhal import MODEL.tflite [-o OUT.json] [--json]``: the TFLite half of ``nnhal import``.

Prints what TFLite's NNAPI delegate would do with the model (operators,
partitions, every node it would leave to the CPU and why) and, with ``-o``,
writes the NNAPI model(s) in the test-vector JSON format: one model when every
node is delegated, else one per partition, named ``STEM/partition_K``.
A bad file raises ValueError (``nnhal`` prints it as one line, exit 1) naming the
subgraph, operator or tensor.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from nnhal.importers.tflite import (
    ImportResult,
    TFLiteFormatError,
    import_tflite,
    parse_custom_op,
)

__all__ = ["add_arguments", "report", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """TFLite-only options (``--tflite-...``)."""
    parser.add_argument(
        "--tflite-reference",
        metavar="FILE.npz",
        help="TFLite only: store these inputs (input_0, ...) and expected outputs "
        "(output_0, ...) with the model (whole-model imports only)",
    )

    parser.add_argument(
        "--tflite-custom-op",
        action="append",
        default=[],
        metavar="NAME=EXTENSION:OPERATION",
        help="TFLite only: import custom operator NAME as operation OPERATION of op-package "
        "extension EXTENSION (repeatable)",
    )


def report(result: ImportResult, path: str) -> dict[str, Any]:
    """The import as a JSON-ready dict."""
    tfl = result.tflite
    return {
        "model": path,
        "schema_version": tfl.version,
        "subgraphs": len(tfl.subgraphs),
        "operators": result.nodes,
        "operators_all_subgraphs": sum(tfl.op_counts.values()),
        "operator_counts": tfl.op_counts,
        "delegated": result.delegated,
        # the lowest Android API level whose NNAPI delegate maps every delegated builtin
        "min_android_api": result.min_api,
        "folded": result.folded,
        "partitions": [
            {
                "nodes": p.nodes,
                "nnapi_operations": p.operations,
                "inputs": p.inputs,
                "outputs": p.outputs,
            }
            for p in result.partitions
        ],
        "not_delegated": [
            {"subgraph": s.subgraph, "operator": s.index, "op": s.op, "reason": s.reason}
            for s in result.skipped
        ],
        "notes": list(result.notes),
    }


def _error(path: str, e: Exception) -> Exception:
    # a ValueError is printed by `nnhal` as one line with exit 1 (importers never import
    # the tools layer, so not its CliError)
    return ValueError(f"{path}: {e}")


def run(args: argparse.Namespace) -> int:
    path = args.model
    try:
        custom = dict(parse_custom_op(s) for s in getattr(args, "tflite_custom_op", []) or [])
        result = import_tflite(path, custom)
    except TFLiteFormatError as e:
        raise _error(path, e) from None
    doc = report(result, path)
    if args.output:
        _write(result, path, args)
    if getattr(args, "json", False):
        print(json.dumps(doc, indent=2))
        return 0
    n_ops = sum(p.operations for p in result.partitions)
    folded = result.folded_counts()
    print(
        f"{path}: {result.nodes} operators in the main subgraph "
        f"({doc['operators_all_subgraphs']} in {doc['subgraphs']} subgraphs); "
        f"{result.delegated} delegated to NNAPI in {len(result.partitions)} partition(s) "
        f"({n_ops} NNAPI operations, {folded.get('DEQUANTIZE', 0)} float16 DEQUANTIZE folded"
        + (f", {folded['DENSIFY']} sparse DENSIFY folded" if folded.get("DENSIFY") else "")
        + ")"
    )
    for s in result.skipped:
        print(f"  not delegated: {s.line()}")
    for note in result.notes:
        print(f"  note: {note}")
    if args.output:
        print(f"wrote {args.output}")
    return 0


def _write(result: ImportResult, path: str, args: argparse.Namespace) -> None:
    import numpy as np

    from nnhal.vectors import model_to_json, save_vectors

    stem = Path(path).stem
    if not result.partitions:
        raise _error(path, ValueError("no operator goes to NNAPI: nothing to write"))
    docs = []
    ref = getattr(args, "tflite_reference", None)
    if ref and not result.complete:
        raise _error(path, ValueError("--tflite-reference needs a model delegated whole"))
    for k, part in enumerate(result.partitions):
        name = stem if result.complete else f"{stem}/partition_{k}"
        kw: dict[str, Any] = {}
        if ref:
            try:
                data = np.load(ref)
                ins = [data[f"input_{i}"] for i in range(len(part.inputs))]
                outs = [data[f"output_{i}"] for i in range(len(part.outputs))]
            except (OSError, KeyError, ValueError) as e:
                raise _error(ref, e) from None
            kw = {
                "inputs": [np.atleast_1d(x) for x in ins],
                "expected": [np.atleast_1d(x) for x in outs],
            }
        names = [part.operand_names] + [[] for _ in part.model.referenced]
        docs.append(model_to_json(part.model, name=name, operand_names=names, **kw))
    try:
        save_vectors(args.output, docs)
    except OSError as e:
        raise _error(args.output, e) from None
