"""Finding op packages: ``--op-package`` paths and ``nnhal.op_packages`` entry points.

A path is one of:

- a generated package directory (``nnhal oppkg generate --out DIR``): ``DIR``
  holds one package module directory with ``spec.json`` and ``kernels/``
  (the module directory itself is accepted too);
- a config file (``.xml``, ``.json``, ``.ini``): loaded directly; kernel
  modules are looked for in ``kernels/`` beside it (``kernels/<op>.py``).

An installed generated package registers the entry point
``nnhal.op_packages`` (``<name> = <module>:nnhal_op_package``); the object is
a callable returning an ``OpPackage`` (or a list of them). Entry points in
``nnhal.backends`` are listed by ``nnhal oppkg list`` (backends that plug in
beside the reference backend).

Nothing here raises for a bad package: ``discover`` returns the packages that
loaded and a ``Skipped(source, error)`` for each that did not, and logs it.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from nnhal.driver.op_packages import SUFFIXES, check_types, load_config
from nnhal.driver.op_packages.runtime import OpPackage, load_kernels
from nnhal.driver.op_packages.spec import ConfigError, PackageSpec

log = logging.getLogger("nnhal.op_packages")

ENTRY_POINT_GROUP = "nnhal.op_packages"
BACKEND_GROUP = "nnhal.backends"


@dataclass(frozen=True)
class Skipped:
    source: str
    error: str


def _import_name(source: Path, name: str) -> str:
    tag = re.sub(r"\W", "_", str(source.resolve()))[-40:]
    return f"nnhal_oppkg_{name}_{abs(hash(tag)) % 10**8}"


def load_package_dir(module_dir: Path) -> OpPackage:
    """A generated package module directory (spec.json + kernels/)."""
    spec_path = module_dir / "spec.json"
    try:
        data = json.loads(spec_path.read_text("utf-8"))
        spec = PackageSpec.from_dict(data.get("spec", data))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(str(spec_path), None, "spec.json", f"unreadable: {exc}") from None
    check_types(spec)
    package = OpPackage(spec=spec, source=str(module_dir))
    load_kernels(package, module_dir / "kernels", _import_name(module_dir, spec.module_name))
    return package


def load_path(path: str | Path) -> list[OpPackage]:
    """Packages from a directory or a config file (raises on any problem)."""
    p = Path(path)
    if p.is_dir():
        if (p / "spec.json").is_file():
            return [load_package_dir(p)]
        found = sorted(d for d in p.iterdir() if (d / "spec.json").is_file())
        if not found:
            raise ConfigError(
                str(p), None, "directory", "no generated op package in it (no */spec.json); "
                "give a config file or run `nnhal oppkg generate CONFIG --out DIR`",
            )  # fmt: skip
        return [load_package_dir(d) for d in found]
    if p.suffix.lower() in SUFFIXES:
        packages = []
        for spec in load_config(p):
            package = OpPackage(spec=spec, source=str(p))
            kernel_dir = p.parent / "kernels"
            if kernel_dir.is_dir():
                load_kernels(package, kernel_dir, _import_name(p, spec.module_name))
            else:
                package.notes.append(f"no kernels/ directory beside {p}")
            packages.append(package)
        return packages
    if not p.exists():
        raise ConfigError(str(p), None, "file", "does not exist")
    raise ConfigError(
        str(p), None, "file", "not an op package: expected a directory or a .xml/.json/.ini config"
    )


def _entry_points(group: str) -> list[metadata.EntryPoint]:
    try:
        return list(metadata.entry_points(group=group))
    except Exception:  # noqa: BLE001 - a broken distribution must not stop the driver
        return []


def discover(
    paths: Iterable[str | Path] = (), *, entry_points: bool = True
) -> tuple[list[OpPackage], list[Skipped]]:
    """Every package that loads, and every one that did not (logged with its source)."""
    packages: list[OpPackage] = []
    skipped: list[Skipped] = []

    def skip(source: str, exc: BaseException) -> None:
        text = str(exc) if isinstance(exc, ConfigError) else f"{type(exc).__name__}: {exc}"
        log.warning("op package %s skipped: %s", source, text)
        skipped.append(Skipped(source, text))

    for path in paths:
        try:
            packages.extend(load_path(path))
        except Exception as exc:  # noqa: BLE001 - one bad package must not stop the server
            skip(str(path), exc)
    if entry_points:
        for ep in _entry_points(ENTRY_POINT_GROUP):
            source = f"entry point {ep.name} = {ep.value}"
            try:
                obj = ep.load()
                got = obj() if callable(obj) and not isinstance(obj, OpPackage) else obj
                items = got if isinstance(got, (list, tuple)) else [got]
                for item in items:
                    if not isinstance(item, OpPackage):
                        raise TypeError(f"gave {type(item).__name__}, not an OpPackage")
                    item.source = f"{source} ({item.source})"
                    packages.append(item)
            except Exception as exc:  # noqa: BLE001
                skip(source, exc)
    # one package per extension name: the first wins, the rest are reported
    seen: dict[str, OpPackage] = {}
    unique = []
    for p in packages:
        if p.name in seen:
            skipped.append(
                Skipped(p.source, f"extension {p.name!r} already loaded from {seen[p.name].source}")
            )
            log.warning("op package %s skipped: duplicate extension %s", p.source, p.name)
            continue
        seen[p.name] = p
        unique.append(p)
    return unique, skipped


def load_backends() -> tuple[list, list[Skipped]]:
    """Backend plug-ins from ``nnhal.backends`` entry points (a backend, or a factory)."""
    backends: list = []
    skipped: list[Skipped] = []
    for ep in _entry_points(BACKEND_GROUP):
        source = f"entry point {ep.name} = {ep.value}"
        try:
            obj = ep.load()
            backend = obj if hasattr(obj, "supports") else obj()
            for attr in ("name", "supports", "definition"):
                if not hasattr(backend, attr):
                    raise TypeError(f"the backend has no {attr!r} (see nnhal.driver.extensions)")
            backends.append(backend)
        except Exception as exc:  # noqa: BLE001 - one bad plug-in must not stop the server
            log.warning("backend %s skipped: %s", source, exc)
            skipped.append(Skipped(source, f"{type(exc).__name__}: {exc}"))
    return backends, skipped


def backend_entry_points() -> list[tuple[str, str]]:
    """(name, value) of the ``nnhal.backends`` entry points."""
    return [(ep.name, ep.value) for ep in _entry_points(BACKEND_GROUP)]
