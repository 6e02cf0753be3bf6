"""TFLite models in: ``.tflite`` files to NNAPI models, as TFLite's NNAPI delegate builds them.

- ``reader``: the flatbuffer (parsed with the ``tflite`` schema package) into
  checked records; bad files raise ``TFLiteFormatError`` with one line.
- ``ops``: builtin operator -> NNAPI operation mappings and the delegate's
  reasons for refusing a node.
- ``convert``: partitions and NNAPI models (``nnhal.builder``), folding
  constant float16 DEQUANTIZE, WHILE/IF as NNAPI control flow.
- ``cli``: ``nnhal import MODEL.tflite`` (dispatched by ``nnhal.tools.cli_import``).

``import_tflite(path)`` is the Python entry point.
"""

from __future__ import annotations

from pathlib import Path

from nnhal.importers.tflite.convert import ImportResult, Partition, Skipped, convert
from nnhal.importers.tflite.reader import TFLiteFormatError, read_model

__all__ = ["ImportResult", "Partition", "Skipped", "TFLiteFormatError", "import_tflite",
           "read_model"]


def import_tflite(source: str | Path | bytes) -> ImportResult:
    """Read, check and convert a TFLite model (a path or the file's bytes)."""
    return convert(read_model(source))
