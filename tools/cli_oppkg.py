"""``nnhal oppkg generate|validate|list|rules|test``, ``nnhal explain`` and ``serve``'s op-package options.

    nnhal oppkg generate CONFIG... --out DIR [--backend NAME] [--force]
    nnhal oppkg validate CONFIG...
    nnhal oppkg list [--op-package PATH ...] [--no-entry-points]
    nnhal oppkg rules MODEL [--op-package PATH ...] [--package-backend NAME]
    nnhal oppkg test CONFIG_OR_PACKAGE [--reference MODULE] [--examples N] [--seed S]
    nnhal explain MODEL [--name NAME] [--op-package PATH ...] [--package-backend NAME]
                        [--profile NAME|PATH]
    nnhal serve ... [--op-package DIR_OR_CONFIG ...] [--package-backend NAME]

Config errors print one line each, ``FILE:LINE: ELEMENT: what was expected``,
never a traceback. The driver is imported lazily (as in ``nnhal.tools.cli``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _err(prog: str, message: str) -> None:
    print(f"{prog}: error: {message}", file=sys.stderr, flush=True)


def _load_specs(paths: list[str], prog: str) -> tuple[list[Any], int]:
    from nnhal.driver.op_packages import load_config
    from nnhal.driver.op_packages.spec import ConfigError

    specs, failures = [], 0
    for path in paths:
        try:
            specs.extend(load_config(path))
        except ConfigError as exc:
            _err(prog, str(exc))
            failures += 1
    return specs, failures


def cmd_generate(args: argparse.Namespace) -> int:
    from nnhal.driver.op_packages.generator import generate

    prog = "nnhal oppkg generate"
    specs, failures = _load_specs(args.configs, prog)
    if failures:
        return EXIT_FAILED
    if args.backend:
        for spec in specs:
            if spec.backends and spec.backend(args.backend) is None:
                have = ", ".join(b.name for b in spec.backends)
                _err(prog, f"{spec.source}: no backend {args.backend!r} (it has {have})")
                return EXIT_USAGE
    report = generate(specs, Path(args.out), backend=args.backend, force=args.force)
    for path in report.written:
        print(f"wrote {path}")
    for path in report.overwritten:
        print(f"overwrote {path} (--force)")
    for path in report.kept:
        print(f"kept {path} (yours; --force overwrites)")
    names = ", ".join(s.extension_name for s in specs)
    print(f"op package(s) {names} in {args.out}: pip install {args.out}, or "
          f"nnhal serve --op-package {args.out}")  # fmt: skip
    return EXIT_OK


def cmd_validate(args: argparse.Namespace) -> int:
    prog = "nnhal oppkg validate"
    specs, failures = _load_specs(args.configs, prog)
    for spec in specs:
        # a count, not the names: a vendor file can define thousands of operations
        # (`nnhal oppkg list --op-package FILE` lists them)
        n = len(spec.ops)
        backends = ", ".join(b.name for b in spec.backends) or "-"
        print(f"{spec.source}: ok: extension {spec.extension_name} ({n} operation"
              f"{'' if n == 1 else 's'}; backends {backends})")  # fmt: skip
    return EXIT_FAILED if failures else EXIT_OK


def discover_packages(paths: list[str] | None, entry_points: bool = True) -> tuple[list, list]:
    from nnhal.driver.op_packages.discovery import discover

    return discover(paths or (), entry_points=entry_points)


def cmd_list(args: argparse.Namespace) -> int:
    from nnhal.driver.op_packages.discovery import backend_entry_points

    packages, skipped = discover_packages(args.op_package, not args.no_entry_points)
    for p in packages:
        ops = ", ".join(f"{i}={op.name}" for i, op in enumerate(p.spec.ops))
        print(
            f"{p.name}  ({p.spec.syntax} {p.spec.package_name} {p.spec.version})  from {p.source}"
        )
        print(f"    operations: {ops}")
        for note in p.notes:
            print(f"    note: {note}")
    for s in skipped:
        print(f"SKIPPED {s.source}: {s.error}")
    for name, value in backend_entry_points():
        print(f"backend entry point {name} = {value}")
    if not packages and not skipped:
        print("no op packages (give --op-package PATH, or install a generated package)")
    return EXIT_OK


def package_backend(values: list[str] | str | None, profile: str | None = None) -> str | None:
    """The --package-backend for a device: ``PROFILE=NAME`` entries for that profile (as
    given to --profile) win over a plain ``NAME`` for every device."""
    if isinstance(values, str):
        values = [values]
    chosen = None
    for value in values or ():
        key, sep, name = value.rpartition("=")
        if not sep:
            chosen = value
        elif profile is not None and key == profile:
            return name
    return chosen


def device_options(args: argparse.Namespace, profile: str | None = None) -> dict[str, Any]:
    """``Device(...)`` keyword arguments from --op-package / --package-backend for the
    device of ``profile`` (the --profile value). Broken packages are logged and skipped."""
    from nnhal.driver.op_packages.discovery import load_backends

    packages, _skipped = discover_packages(getattr(args, "op_package", None))
    plugins, _ = load_backends()
    for b in plugins:
        print(f"nnhal: backend plug-in {b.name}", file=sys.stderr, flush=True)
    # each skipped package was logged (logger nnhal.op_packages) with its source and error
    for p in packages:
        print(f"nnhal: op package {p.name} from {p.source}", file=sys.stderr, flush=True)
        for note in p.notes:
            print(f"nnhal:     note: {note}", file=sys.stderr, flush=True)
    return {
        "op_packages": [*packages, *plugins],
        "package_backend": package_backend(getattr(args, "package_backend", None), profile),
    }


def local_options(args: argparse.Namespace) -> dict[str, Any]:
    """``device_options`` for the in-process driver of run/supported/vectors/cts, found
    once per command (cts opens the device more than once)."""
    cached = getattr(args, "_nnhal_local_options", None)
    if cached is None:
        cached = device_options(args, getattr(args, "profile", None))
        args._nnhal_local_options = cached
    return cached


def check_target(args: argparse.Namespace) -> None:
    """--op-package / --package-backend configure the in-process driver: not with --target."""
    from nnhal.tools.cli import EXIT_USAGE as usage
    from nnhal.tools.cli import CliError

    if getattr(args, "op_package", None) or getattr(args, "package_backend", None):
        raise CliError(
            "--op-package and --package-backend configure the in-process driver; with "
            "--target give them to the `nnhal serve` behind the target",
            usage,
        )


def add_serve_options(p: argparse.ArgumentParser) -> None:
    """--op-package and --package-backend (either is left alone when a command already has
    its own, e.g. `nnhal tflite`, which adds --op-package before the device options)."""
    have = getattr(p, "_option_string_actions", {})
    if "--op-package" not in have:
        p.add_argument(
            "--op-package",
            action="append",
            metavar="DIR_OR_CONFIG",
            help="load an op package (generated directory or .xml/.json/.ini config; "
            "repeatable)",
        )
    if "--package-backend" in have:
        return
    p.add_argument(
        "--package-backend",
        action="append",
        metavar="[PROFILE=]NAME",
        help="which backend of the op packages the device is (SupplementalOpDefList "
        "Backend, SNPE core type; default CPU); PROFILE=NAME for one --profile's device",
    )


def cmd_explain(args: argparse.Namespace) -> int:
    from nnhal.driver.backends.explain import explain_model
    from nnhal.driver.device import Device
    from nnhal.driver.profile import load_profile
    from nnhal.tools.cli import _load_one

    test = _load_one(args.model, args.name)
    try:
        profile = load_profile(args.profile)
    except ValueError as exc:
        _err("nnhal explain", str(exc))
        return EXIT_USAGE
    device = Device(profile, **device_options(args))
    for line in explain_model(device, test.model):
        print(line)
    return EXIT_OK


def _op_names(model: Any, extensions: Any) -> list[str]:
    from nnhal.types import is_extension_type, operation_name

    names = []
    bound = extensions.for_model(model)
    for op in model.main.operations:
        found = bound.operation(op.type) if is_extension_type(op.type) else None
        names.append(
            f"{found.package.spec.package_name}::{found.op.name}"
            if found is not None and not isinstance(found, str)
            else operation_name(op.type)
        )
    return names


def cmd_test(args: argparse.Namespace) -> int:
    from nnhal.driver.op_packages.kernel_test import run_package_test

    return run_package_test(
        args.package,
        reference=args.reference,
        examples=args.examples,
        seed=args.seed,
        backends=args.package_backend,
    )


def cmd_rules(args: argparse.Namespace) -> int:
    """Which packages' rules fire on a model, in order, and the operations they leave."""
    from nnhal.driver.extensions import ExtensionSet
    from nnhal.driver.op_packages.rules import apply_rules
    from nnhal.tools.cli import _load_one

    test = _load_one(args.model, args.name)
    packages, skipped = discover_packages(args.op_package, not args.no_entry_points)
    for s in skipped:
        _err("nnhal oppkg rules", f"package skipped: {s.source}: {s.error}")
    backend = package_backend(args.package_backend) or "CPU"
    extensions = ExtensionSet(packages, backend)
    rules = [(p.spec.package_name, r) for p in extensions.packages.values() for r in p.rules]
    print(f"{len(rules)} rule(s) from {len(extensions.packages)} package(s), backend {backend}")
    for pkg, r in sorted(rules, key=lambda x: x[1].priority):
        print(f"  {pkg}: {r.name!r} priority {r.priority}: {r.pattern} -> {r.replacement}")
    before = _op_names(test.model, extensions)
    model, log = apply_rules(test.model, [r for _, r in rules], extensions)
    fired = [line for line in log if "not applied" not in line]
    for line in log:
        print(("fired: " if line in fired else "") + line)
    if not log:
        print("no rule matches this model")
    after = _op_names(model, extensions)
    print(f"main before: {', '.join(before) or '-'}")
    print(f"main after:  {', '.join(after) or '-'}")
    for n, (old, new) in enumerate(zip(test.model.referenced, model.referenced), 1):
        if old != new:
            print(f"subgraph {n}: {len(old.operations)} -> {len(new.operations)} operations")
    return EXIT_OK


def add_parsers(sub: Any) -> None:
    """Register ``oppkg`` and ``explain`` on the ``nnhal`` subparsers."""
    p = sub.add_parser("oppkg", help="op packages: generate, validate, list")
    ops = p.add_subparsers(dest="oppkg", metavar="ACTION")
    ops.required = True
    g = ops.add_parser("generate", help="write an installable Python op package from configs")
    g.add_argument("configs", nargs="+", metavar="CONFIG", help=".xml, .json or .ini config")
    g.add_argument("--out", required=True, metavar="DIR", help="where to write the package")
    g.add_argument("--backend", metavar="NAME", help="generate kernels for this backend's ops")
    g.add_argument("--force", action="store_true", help="also overwrite your kernel modules")
    g.set_defaults(func=cmd_generate)
    v = ops.add_parser("validate", help="check configs without generating")
    v.add_argument("configs", nargs="+", metavar="CONFIG")
    v.set_defaults(func=cmd_validate)
    ls = ops.add_parser("list", help="the op packages the driver would load, and from where")
    ls.add_argument("--op-package", action="append", metavar="DIR_OR_CONFIG")
    ls.add_argument("--no-entry-points", action="store_true", help="ignore installed packages")
    ls.set_defaults(func=cmd_list)
    r = ops.add_parser("rules", help="which op-package rules fire on a model, and the result")
    r.add_argument("model", help="model file (vector JSON)")
    r.add_argument("--name", help="the model to use when the file holds several")
    r.add_argument("--no-entry-points", action="store_true", help="ignore installed packages")
    add_serve_options(r)
    r.set_defaults(func=cmd_rules)
    t = ops.add_parser(
        "test", help="generate operations from a definition; check support answers and kernels",
        description="Generate operations from a definition (hypothesis: pip install "
        "'nnhal[oppkg]'); check support answers and kernels against a reference.",
    )
    t.add_argument("package", metavar="CONFIG_OR_PACKAGE", help="config file or package dir")
    t.add_argument("--reference", metavar="MODULE",
                   help="numpy reference: a .py file or module with one function per operation "
                   "(named like the kernel module); default: each operation's generic "
                   "implementation")  # fmt: skip
    t.add_argument("--examples", type=int, default=40, metavar="N",
                   help="generated cases per operation and backend (default 40)")  # fmt: skip
    t.add_argument("--seed", type=int, default=0, help="seed of the generation (default 0)")
    t.add_argument("--package-backend", action="append", metavar="NAME",
                   help="backends to test (default: every backend the definition names)")  # fmt: skip
    t.set_defaults(func=cmd_test)

    e = sub.add_parser(
        "explain", help="per operation: the backend and implementation chosen, and why"
    )
    e.add_argument("model", help="model file (vector JSON)")
    e.add_argument("--name", help="the model to use when the file holds several")
    e.add_argument("--profile", metavar="NAME|PATH", help="device profile (default: built-in)")
    add_serve_options(e)
    e.set_defaults(func=cmd_explain)
