"""TFLite models in: ``.tflite`` files to NNAPI models, as TFLite's NNAPI delegate builds them.

- ``reader``: the flatbuffer (parsed with the ``tflite`` schema package) into
  checked records; bad files raise ``TFLiteFormatError`` with one line.
- ``ops``: builtin operator -> NNAPI operation mappings and the delegate's
  reasons for refusing a node.
- ``convert``: partitions and NNAPI models (``nnhal.builder``), folding
  constant float16 DEQUANTIZE, WHILE/IF as NNAPI control flow.
- ``sparsity``: sparse constants densified (DENSIFY folding).
- ``custom_options``: a custom operator's FlexBuffer options as op-package parameters.
- ``fallback`` / ``runtime_steps``: running a partitioned model (LiteRT nodes,
  partitions compiled by ``nnhal.runtime``).
- ``cli``: ``nnhal import MODEL.tflite`` (dispatched by ``nnhal.tools.cli_import``).

``import_tflite(path)`` is the Python entry point.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from nnhal.importers.tflite.convert import ImportResult, Partition, Skipped, convert
from nnhal.importers.tflite.custom_options import CustomParam
from nnhal.importers.tflite.reader import TFLiteFormatError, read_model

__all__ = [
    "CustomParam",
    "ImportResult",
    "Partition",
    "Skipped",
    "TFLiteFormatError",
    "import_tflite",
    "parse_custom_op",
    "read_model",
]


def import_tflite(
    source: str | Path | bytes, custom_ops: dict[str, tuple[Any, ...]] | None = None
) -> ImportResult:
    """Read, check and convert a TFLite model (a path or the file's bytes).

    ``custom_ops`` maps TFLite custom codes to (extension name, operation number), or to
    (extension name, operation number, [CustomParam, ...]) to pass the custom options as
    the operation's parameters (``custom_options``).
    """
    return convert(read_model(source), custom_ops)


def parse_custom_op(spec: str) -> tuple[str, tuple[str, int]]:
    """``NAME=EXTENSION:OPERATION`` -> (NAME, (EXTENSION, OPERATION)); ValueError if malformed."""
    name, eq, target = spec.partition("=")
    ext, colon, number = target.rpartition(":")
    if not (name and eq and ext and colon and number.isdigit() and int(number) <= 0xFFFF):
        raise ValueError(
            f"bad custom operator mapping {spec!r}: expected NAME=EXTENSION:OPERATION "
            "(OPERATION a number 0-65535), e.g. SoftClip=com.example.soft_clip_package:0"
        )
    return name, (ext, int(number))
