"""The spec library: every ``@spec`` in the modules of this package.

One module per operation family (``elementwise``, ``comparison``,
``logical``, ``select_cast``, ``fully_connected``, ``shape``) plus
``control_flow`` for the IF/WHILE situations. Adding specs for another
family is adding a module here (or passing files with ``nnhal cts --specs``):
``load_library`` imports every module and collects its ``SpecDef`` objects
(module-level names, or a module-level list ``SPECS`` for generated ones).
A module or spec that fails to load is reported, never fatal.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import sys
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType

from nnhal.cts.dsl import SpecDef

__all__ = ["load_library"]


def _specs_of(module: ModuleType) -> list[SpecDef]:
    """Module-level ``SpecDef`` objects, plus those in a module-level ``SPECS`` list."""
    found = [v for v in vars(module).values() if isinstance(v, SpecDef)]
    found += [v for v in getattr(module, "SPECS", ()) if isinstance(v, SpecDef)]
    return list(dict.fromkeys(found))


def _import_file(path: Path) -> ModuleType:
    name = f"cts_user_specs_{abs(hash(str(path.resolve())))}_{path.stem}"
    loader_spec = importlib.util.spec_from_file_location(name, path)
    if loader_spec is None or loader_spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(loader_spec)
    sys.modules[name] = module
    loader_spec.loader.exec_module(module)
    return module


def load_library(extra: Iterable[str | Path] = ()) -> tuple[list[SpecDef], list[tuple[str, str]]]:
    """(specs sorted by name, [(source, error message)]) from this package and ``extra``.

    ``extra`` holds spec files (``*.py``) or folders of them.
    """
    modules: list[tuple[str, ModuleType | None, str]] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        source = f"nnhal.cts.specs.{info.name}"
        try:
            modules.append((source, importlib.import_module(source), ""))
        except Exception as e:  # noqa: BLE001 - a broken spec file is reported, not fatal
            modules.append((source, None, f"{type(e).__name__}: {e}"))
    for raw in extra:
        p = Path(raw)
        files = sorted(p.glob("*.py")) if p.is_dir() else [p]
        for f in files:
            try:
                modules.append((str(f), _import_file(f), ""))
            except Exception as e:  # noqa: BLE001
                modules.append((str(f), None, f"{type(e).__name__}: {e}"))
    specs: dict[str, SpecDef] = {}
    errors: list[tuple[str, str]] = []
    for source, module, error in modules:
        if module is None:
            errors.append((source, error))
            continue
        for s in _specs_of(module):
            if s.name in specs and specs[s.name] is not s:
                errors.append((source, f"spec name {s.name!r} is defined twice"))
                continue
            s.source = source
            specs[s.name] = s
    return [specs[k] for k in sorted(specs)], errors
