"""``nnhal import MODEL.onnx -o OUT.json``: the ONNX side of the import command.

Options (prefixed so other formats never clash):

- ``--onnx-shape NAME=D1,D2,...`` fixes a graph input's dimensions
  (repeatable), so shape arithmetic folds and WHILE operands are static;
- ``--onnx-inputs FILE.npz`` stores input values in the model file, with
  ONNX Runtime's outputs as the expected values when onnxruntime is
  installed;
- ``--onnx-no-host`` refuses nodes without a mapping instead of writing
  them as host operations (ONNX Runtime runs those through ``nnhal.runtime``:
  ``nnhal run MODEL.json --runtime``).

Prints what was mapped (operation counts) and every node without a mapping
with its reason and where it runs; exits 1 when a node can be neither mapped
nor run on the host or the file is bad (one line, no traceback), 0 when the
model file was written. Errors are raised as
``OnnxImportError`` (a ValueError: ``nnhal``'s main prints it as one line,
exit status 1), so this module needs nothing from the tools layer; a bad
``--onnx-shape`` is an argparse usage error (exit status 2).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--onnx-shape", action="append", default=[], metavar="NAME=D1,D2,...",
        type=parse_shape, help="ONNX: fix a graph input's dimensions (repeatable)",
    )  # fmt: skip
    parser.add_argument(
        "--onnx-inputs", metavar="FILE.npz",
        help="ONNX: input values to store (expected outputs from onnxruntime when installed)",
    )  # fmt: skip
    parser.add_argument(
        "--onnx-no-host", action="store_true",
        help="ONNX: refuse nodes without an NNAPI mapping (default: ONNX Runtime runs them on"
        " the host through the runtime)",
    )  # fmt: skip


def parse_shape(item: str) -> tuple[str, list[int]]:
    """``NAME=D1,D2,...`` -> (name, dims); argparse reports a bad one as a usage error."""
    name, sep, dims = item.partition("=")
    try:
        values = [int(d) for d in dims.split(",") if d.strip()]
    except ValueError:
        values = None
    if not sep or not name or not values or any(d <= 0 for d in values):
        raise argparse.ArgumentTypeError(f"{item!r}: expected NAME=D1,D2,... with positive dims")
    return name, values


def run(args: argparse.Namespace) -> int:
    from .errors import OnnxImportError

    try:
        import onnx  # noqa: F401
    except ImportError:
        raise OnnxImportError(
            "importing .onnx files needs the onnx package: pip install 'nnhal[onnx]'"
        ) from None
    from .api import import_onnx

    shapes = dict(getattr(args, "onnx_shape", []) or [])
    host = not getattr(args, "onnx_no_host", False)
    result = import_onnx(args.model, shapes=shapes, host=host)
    feeds = expected = None
    if getattr(args, "onnx_inputs", None):
        from .inputs import load_npz

        feeds = load_npz(args.onnx_inputs, result)
        expected = _expected(args.model, result, feeds)
    report = result.summary()
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        _print(result)
    if not result.ok:
        return 1
    if args.output:
        from . import vectors_out

        try:
            vectors_out.write(result, args.output, Path(args.model).stem, feeds, expected)
        except (OSError, ValueError) as exc:
            raise OnnxImportError(f"{args.output}: cannot write: {exc}") from None
        if not args.json:
            print(f"wrote {args.output}")
    return 0


def _expected(path, result, feeds):
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        print("(onnxruntime not installed: no expected outputs stored)", file=sys.stderr)
        return None
    from .inputs import ort_session, reference_outputs

    sess = ort_session(Path(path).read_bytes())
    return reference_outputs(sess, result, feeds)


def _print(result) -> None:
    ops = result.summary()["operations"] or {}
    print(f"{result.source}: opset {result.opset}, {result.nodes} nodes")
    for p in result.inputs:
        print(f"  input  {p.name}: {p.as_dict()['type']} {p.as_dict()['shape']}")
    for p in result.outputs:
        print(f"  output {p.name}: {p.as_dict()['type']} {p.as_dict()['shape']}")
    if ops:
        print("  NNAPI operations: " + ", ".join(f"{k} x{v}" for k, v in ops.items()))
    if result.host:
        print(f"  {len(result.host)} node(s) without an NNAPI mapping, run by ONNX Runtime on the"
              " host (nnhal run MODEL.json --runtime):")  # fmt: skip
        for u in result.host:
            where = "" if u.graph == "main" else f" in {u.graph}"
            print(f"    {u.node} ({u.op_type}){where}: {u.reason}")
    if result.unsupported:
        print(f"  {len(result.unsupported)} node(s) without an NNAPI mapping:")
        for u in result.unsupported:
            where = "" if u.graph == "main" else f" in {u.graph}"
            print(f"    {u.node} ({u.op_type}){where}: {u.reason}")
