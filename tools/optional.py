"""Optional dependencies asked for on the command line.

A feature the user asked for (``bench --plot``, ``bench --suite models``,
``--engine atheris``, ...) whose library is not installed is an error, exit 1,
naming the extra that installs it; a peer only used when present (onnxruntime
beside ``bench --suite control-flow``) is skipped with a note instead.
"""

from __future__ import annotations

import importlib
from types import ModuleType

#: module -> the pyproject extra that installs it
EXTRAS = {
    "matplotlib": "plot",
    "onnxruntime": "onnx",
    "onnx": "onnx",
    "ai_edge_litert": "tflite",
    "atheris": "fuzz",
}


class MissingDependency(Exception):
    """An optional library a requested feature needs is not installed."""


def install_hint(module: str, extra: str | None = None) -> str:
    return f"pip install 'nnhal[{extra or EXTRAS[module]}]'"


def require(module: str, feature: str, extra: str | None = None) -> ModuleType:
    """Import ``module`` for ``feature``, or MissingDependency with the install hint
    (``extra``: the pyproject extra to name, default ``EXTRAS[module]``)."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependency(
            f"{feature} needs {module}, which is not installed ({exc}); "
            f"install it with: {install_hint(module, extra)}"
        ) from None
