"""``nnhal import MODEL -o OUT.json``: a TFLite or ONNX file to an NNAPI model file.

The format is chosen by the file's suffix; each format's importer lives in its
own package (``nnhal.importers.<format>``) and gives this command two things in
its ``cli`` module:

- ``add_arguments(parser)``: options of its own (names prefixed by the format,
  so the formats never clash), and
- ``run(args) -> int``: the import itself; it raises a ``ValueError`` for a bad
  file (one line naming the node or tensor: ``nnhal``'s main prints it and exits
  1) and returns the exit code. (Importers may not import the command line.)
"""

from __future__ import annotations

import argparse
from importlib import import_module
from pathlib import Path
from typing import Any

#: file suffix -> the importer package under nnhal.importers
FORMATS = {".tflite": "tflite", ".onnx": "onnx"}


def _cli(fmt: str) -> Any:
    return import_module(f"nnhal.importers.{fmt}.cli")


def add_parsers(sub: Any) -> None:
    p = sub.add_parser(
        "import",
        help="convert a TFLite or ONNX model file to an NNAPI model file",
        description="Convert MODEL (.tflite or .onnx) to the NNAPI test-vector JSON format, "
        "listing every operator that has no NNAPI mapping and why.",
    )
    p.add_argument("model", metavar="MODEL", help="a .tflite or .onnx file")
    p.add_argument("-o", "--output", metavar="OUT.json", help="where to write the model file")
    p.add_argument("--json", action="store_true", help="print the import report as JSON")
    for fmt in FORMATS.values():
        try:
            _cli(fmt).add_arguments(p)
        except ImportError:  # that importer's optional dependency is missing
            pass
    p.set_defaults(func=cmd_import)


def cmd_import(args: argparse.Namespace) -> int:
    from nnhal.tools.cli import CliError
    from nnhal.tools.optional import require

    suffix = Path(args.model).suffix.lower()
    if suffix not in FORMATS:
        known = ", ".join(sorted(FORMATS))
        raise CliError(f"{args.model}: unknown model format {suffix!r} (known: {known})", 2)
    if suffix == ".onnx":  # the ONNX importer reads the file with the onnx package
        require("onnx", "importing an ONNX model", "onnx")
    return int(_cli(FORMATS[suffix]).run(args))
