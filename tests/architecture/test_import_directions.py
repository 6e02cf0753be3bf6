"""The layers' import directions, read from every module's source (docs/architecture.md).

- the contract (``nnhal/``'s own modules) imports none of the other layers;
- the driver imports the contract; the conformance suite imports only the contract,
  so it runs against any endpoint;
- the runtime imports the contract, and the driver only for its in-process CPU
  reference device (``runtime/reference.py``);
- the importers import the contract and the runtime; the tools import anything;
- the driver's operations and executor never import grpc;
- no two modules import each other at module level, directly or through others.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest
from repo_paths import REPO_ROOT

#: repository folder -> the import name it installs as (setup.py's LAYERS)
FOLDERS = {
    "nnhal": "nnhal",
    "driver": "nnhal.driver",
    "cts": "nnhal.cts",
    "runtime": "nnhal.runtime",
    "importers": "nnhal.importers",
    "tools": "nnhal.tools",
    "proto": "nnhal.proto",
}
LAYERS = {name: layer for layer, name in FOLDERS.items()}
#: layer -> the layers it may import (its own always)
ALLOWED = {
    "nnhal": set(),
    "driver": {"nnhal"},
    "cts": {"nnhal"},
    "runtime": {"nnhal", "driver"},
    "importers": {"nnhal", "runtime"},
    "tools": set(FOLDERS),
    "proto": set(),
}
#: (module, layer it may import although its layer may not): the one door each
EXCEPTIONS = {
    ("nnhal.__main__", "tools"),  # `python -m nnhal` names the command line
}
NO_GRPC = ("nnhal.driver.ops", "nnhal.driver.executor")


def _modules() -> Iterator[tuple[str, Path]]:
    for folder, name in FOLDERS.items():
        root = REPO_ROOT / folder
        for path in sorted(root.rglob("*.py")):
            rel = path.relative_to(root).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            if folder == "nnhal" and parts and parts[0] == "_proto":
                continue  # generated stubs
            yield ".".join([name, *parts]), path


MODULES = dict(_modules())


def _layer(module: str) -> str | None:
    """The layer an import name belongs to (None: not ours)."""
    best = None
    for name, layer in LAYERS.items():
        ours = module == name or module.startswith(name + ".")
        if ours and (best is None or len(name) > len(best[0])):
            best = (name, layer)
    return None if best is None else best[1]


def _type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(test, ast.Name) and test.id == "TYPE_CHECKING" or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(module: str, path: Path) -> Iterator[tuple[str, int, bool]]:
    """(imported module, line, at module level) for every import of a module."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def walk(node: ast.AST, top: bool) -> Iterator[tuple[str, int, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child):
                continue
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield alias.name, child.lineno, top
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parent = package.rsplit(".", child.level - 1)[0]
                    base = f"{parent}.{base}" if base else parent
                yield base, child.lineno, top
                for alias in child.names:  # `from nnhal.driver import device`
                    if f"{base}.{alias.name}" in MODULES:
                        yield f"{base}.{alias.name}", child.lineno, top
            inner = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            yield from walk(child, top and not inner)

    yield from walk(tree, True)


IMPORTS = {m: list(_imports(m, p)) for m, p in MODULES.items()}


def test_every_layer_folder_is_read():
    assert {_layer(m) for m in MODULES} >= {"nnhal", "driver", "cts", "tools"}
    assert len(MODULES) > 150


@pytest.mark.parametrize("layer", sorted(FOLDERS))
def test_layer_imports_only_what_it_may(layer):
    wrong = []
    for module, imports in IMPORTS.items():
        if _layer(module) != layer:
            continue
        for target, line, _ in imports:
            other = _layer(target)
            if other is None or other == layer or other in ALLOWED[layer]:
                continue
            if (module, other) in EXCEPTIONS:
                continue
            if layer == "runtime" and other == "driver" and module == "nnhal.runtime.reference":
                continue
            wrong.append(f"{MODULES[module].relative_to(REPO_ROOT)}:{line}: imports {target}")
    assert not wrong, f"{layer} may import only {sorted(ALLOWED[layer])}:\n" + "\n".join(wrong)


def test_operations_and_executor_never_import_grpc():
    wrong = [
        f"{MODULES[m].relative_to(REPO_ROOT)}:{line}: imports {target}"
        for m, imports in IMPORTS.items()
        if m.startswith(NO_GRPC)
        for target, line, _ in imports
        if target == "grpc" or target.startswith(("grpc.", "nnhal._proto"))
    ]
    assert not wrong, "\n".join(wrong)


def test_no_module_level_import_cycles():
    graph = {
        m: sorted({t for t, _, top in imports if top and t in MODULES and t != m})
        for m, imports in IMPORTS.items()
    }
    # a package's __init__ importing its own submodules is how packages export: not a cycle
    for m, targets in graph.items():
        if MODULES[m].name == "__init__.py":
            graph[m] = [t for t in targets if not t.startswith(m + ".")]
    cycles, state, stack = [], {}, []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in graph[node]:
            if state.get(nxt) == 1:
                cycles.append(" -> ".join([*stack[stack.index(nxt):], nxt]))
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in graph:
        if node not in state:
            visit(node)
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_the_checks_can_fail():
    """The reader sees a forbidden import and a cycle when there is one."""
    assert _layer("nnhal.driver.device") == "driver"
    assert _layer("nnhal.types") == "nnhal"
    assert _layer("numpy") is None
    sample = ast.parse("from nnhal.driver.device import Device\n")
    assert isinstance(sample.body[0], ast.ImportFrom)
