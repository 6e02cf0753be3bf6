"""Op packages: custom operations from vendor op-definition files.

- ``spec``: the normalized ``PackageSpec`` and ``ConfigError``
- ``xml_loader`` / ``json_loader`` / ``ini_loader``: the three config syntaxes
- ``nnapi_types``: datatypes -> NNAPI operand types (or extension types, or refused)
- ``runtime``: a loaded package (spec + kernel implementations with costs)
- ``generator``: ``nnhal oppkg generate`` (generated part + user-owned kernels)
- ``discovery``: packages from entry points and ``--op-package`` paths
- ``rules``: optimization rules applied at prepare
- ``supervisor`` (the pool policy), ``processes`` (one worker process),
  ``worker`` (the child and the wire): kernels in supervised worker processes
"""

from __future__ import annotations

from pathlib import Path

from nnhal.driver.op_packages.spec import ConfigError, PackageSpec

SUFFIXES = {".xml": "xml", ".json": "json", ".ini": "ini"}


def load_config(path: str | Path) -> list[PackageSpec]:
    """Every package a config file defines (the syntax is chosen by the file suffix).

    Raises ConfigError (file, line, element, what was expected) for any problem.
    """
    p = Path(path)
    syntax = SUFFIXES.get(p.suffix.lower())
    if syntax is None:
        raise ConfigError(
            str(p), None, "file", f"unknown config suffix {p.suffix!r}; expected .xml, .json, .ini"
        )
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise ConfigError(str(p), None, "file", f"cannot read: {exc.strerror or exc}") from None
    if syntax == "xml":
        from nnhal.driver.op_packages.xml_loader import load_xml

        specs = [load_xml(str(p), data)]
    elif syntax == "json":
        from nnhal.driver.op_packages.json_loader import load_json

        specs = load_json(str(p), data)
    else:
        from nnhal.driver.op_packages.ini_loader import load_ini

        specs = [load_ini(str(p), data)]
    for spec in specs:
        check_types(spec)
    return specs


def check_types(spec: PackageSpec) -> None:
    """Refuse datatypes with no NNAPI form (4-bit, STRING), naming the tensor and line."""
    from nnhal.driver.op_packages.nnapi_types import refused

    for op in spec.ops:
        for t in (*op.inputs, *op.outputs, *op.params):
            for dt in t.datatypes:
                why = refused(dt)
                if why is not None:
                    raise ConfigError(
                        spec.source,
                        t.line,
                        f"{op.name} {t.kind} {t.name!r}",
                        f"datatype {dt}: {why}",
                    )
    for b in spec.backends:
        for op_name, tensors in b.overrides.items():
            for tname, o in tensors.items():
                for dt in o.datatypes:
                    why = refused(dt)
                    if why is not None:
                        t = spec.op(op_name).tensor(tname)  # type: ignore[union-attr]
                        raise ConfigError(
                            spec.source,
                            t.line if t else None,
                            f"{op_name} {tname!r} on backend {b.name}",
                            f"datatype {dt}: {why}",
                        )


__all__ = ["ConfigError", "PackageSpec", "check_types", "load_config"]
