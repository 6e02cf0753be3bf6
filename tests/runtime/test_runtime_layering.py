"""The runtime imports the contract (nnhal) and the driver only for nnapi-reference."""

from __future__ import annotations

import ast
from pathlib import Path

from repo_paths import REPO_ROOT


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    return names


def test_runtime_imports():
    for path in sorted((Path(REPO_ROOT) / "runtime").glob("*.py")):
        for name in _imports(path):
            assert not name.startswith(("nnhal.tools", "nnhal.cts", "nnhal.importers")), (
                path,
                name,
            )
            if name.startswith("nnhal.driver"):
                assert path.name == "reference.py", f"{path.name} imports {name}"
