"""A loaded op package: its spec, its kernel implementations (with costs) and rules.

Kernel modules (one per operation, owned by the user) register implementations
the way HTP op packages do (DEF_PACKAGE_OP_AND_COST_AND_FLAGS)::

    from nnhal.driver.op_packages.runtime import FAST, implementation

    @implementation(cost=FAST, types={"x": "FLOAT_16"})
    def soft_clip_f16(x, *, limit=1.0): ...

    @implementation()                  # generic: any types the definition allows
    def soft_clip(x, *, limit=1.0): ...

``cost`` is GLACIAL, SNAIL, FAST, FREE (descending) or a function of the
``OpQuery`` giving a number. ``types`` maps tensor names to datatypes (the
package's names such as ``FLOAT_16``, or NNAPI names such as
``TENSOR_FLOAT16``). The cheapest implementation whose types match is
chosen, definition order breaking ties. A module without decorated functions
may define ``execute`` (or the Ascend ``opInterface`` name): the generic
implementation at cost GLACIAL.

Kernels are called as ``fn(*inputs, **params)``: inputs in definition order
(a Repeated first input spreads over its operands), parameters by name with
defaults filled in as DEF_PACKAGE_PARAM_ORDER does (an optional parameter
without a default and without a value is not passed). They return one array
or a tuple (one per output); results are cast to the output operand types.
Quantized operands arrive as their raw integers; a kernel with an ``operands``
keyword parameter also receives ``{"inputs": (OperandInfo...), "outputs": (...)}``
(type, dimensions, scale, zeroPoint, constant value) to dequantize and requantize.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

from nnhal.driver.op_packages.nnapi_types import SCALAR, TENSOR
from nnhal.driver.op_packages.spec import OpSpec, PackageSpec

GLACIAL, SNAIL, FAST, FREE = 3.0, 2.0, 1.0, 0.0
COST_NAMES = {GLACIAL: "GLACIAL", SNAIL: "SNAIL", FAST: "FAST", FREE: "FREE"}
_NNAPI_TO_DATATYPE = {
    **{t.name: dt for dt, t in TENSOR.items()},
    **{t.name: dt for dt, t in SCALAR.items()},
}


@dataclass
class Implementation:
    fn: Callable[..., Any]
    name: str
    cost: float | Callable[[Any], float] = GLACIAL
    types: dict[str, frozenset[str]] = field(default_factory=dict)  # tensor -> datatypes
    flags: tuple[str, ...] = ()
    #: the outputs are a function of the inputs alone (see OperationDef.pure)
    pure: bool = True

    @property
    def generic(self) -> bool:
        return not self.types

    def cost_of(self, query: Any) -> float:
        return float(self.cost(query)) if callable(self.cost) else float(self.cost)

    def cost_text(self, query: Any) -> str:
        if callable(self.cost):
            return f"{getattr(self.cost, '__name__', 'cost function')}() = {self.cost_of(query)}"
        return COST_NAMES.get(float(self.cost), str(self.cost))


def implementation(
    cost: float | Callable[[Any], float] = GLACIAL,
    types: dict[str, str | tuple[str, ...]] | None = None,
    flags: tuple[str, ...] = (),
    pure: bool = True,
) -> Callable[[Callable], Callable]:
    """Decorator registering a kernel implementation in its module.

    ``pure=False`` for a kernel whose outputs are not a function of its inputs alone
    (random draws, internal state): the executor then runs it at every use, never
    once for a loop's iterations.
    """

    def deco(fn: Callable) -> Callable:
        norm: dict[str, frozenset[str]] = {}
        for tensor, dts in (types or {}).items():
            items = (dts,) if isinstance(dts, str) else tuple(dts)
            norm[tensor] = frozenset(_NNAPI_TO_DATATYPE.get(d, d) for d in items)
        fn._nnhal_impl = Implementation(  # type: ignore[attr-defined]
            fn=fn, name=fn.__name__, cost=cost, types=norm, flags=tuple(flags), pure=pure
        )
        return fn

    return deco


@dataclass
class OpPackage:
    """A package as the driver uses it."""

    spec: PackageSpec
    source: str  # where it came from (entry point, directory, config file)
    implementations: dict[str, list[Implementation]] = field(default_factory=dict)
    modules: dict[str, ModuleType] = field(default_factory=dict)
    rules: list[Any] = field(default_factory=list)
    #: problems found while loading kernels (reported by `nnhal oppkg list`)
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.spec.extension_name

    def impls(self, op: OpSpec) -> list[Implementation]:
        return self.implementations.get(op.name, [])


def implementations_of(module: ModuleType, op: OpSpec) -> list[Implementation]:
    """The implementations a kernel module registers, in definition order."""
    found = [
        v._nnhal_impl
        for v in vars(module).values()
        if callable(v) and isinstance(getattr(v, "_nnhal_impl", None), Implementation)
    ]
    found.sort(key=lambda i: getattr(i.fn, "__code__", None) and i.fn.__code__.co_firstlineno)
    if found:
        return found
    for name in ("execute", op.metadata.get("op_interface")):
        fn = getattr(module, name, None) if name else None
        if callable(fn):
            return [Implementation(fn=fn, name=name)]
    return []


def import_file(path: Path, module_name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    # how a kernel worker process finds this module again (nnhal.driver.op_packages.supervisor)
    module.__nnhal_kernel_file__ = str(path)  # type: ignore[attr-defined]
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return module


def load_kernels(package: OpPackage, kernel_dir: Path, import_prefix: str) -> None:
    """Import ``kernel_dir/<op module>.py`` for every op (missing ones are noted)."""
    for op in package.spec.ops:
        path = kernel_dir / f"{op.module_name}.py"
        if not path.is_file():
            package.notes.append(f"{op.name}: no kernel module {path}")
            continue
        module = import_file(path, f"{import_prefix}.{op.module_name}")
        package.modules[op.name] = module
        impls = implementations_of(module, op)
        if not impls:
            package.notes.append(f"{op.name}: {path} registers no implementation")
        package.implementations[op.name] = impls
        rules = getattr(module, "RULES", None)
        if rules:
            package.rules.extend(rules)
        if op.metadata.get("dynamic_format"):
            apply_op_select_format(package, op, module, path)


def apply_op_select_format(package: OpPackage, op: OpSpec, module: ModuleType, path: Path) -> None:
    """Ascend dynamicFormat.flag: dtypes/formats from the module's op_select_format."""
    import json
    from dataclasses import replace

    from nnhal.driver.op_packages.ini_loader import DTYPES
    from nnhal.driver.op_packages.spec import ConfigError

    fn = getattr(module, "op_select_format", None)
    if not callable(fn):
        raise ConfigError(
            str(path), None, f"[{op.name}] dynamicFormat.flag",
            "true, but the kernel module defines no op_select_format()",
        )  # fmt: skip
    args = [{"name": t.name} for t in op.inputs] + [{"name": t.name} for t in op.outputs]
    attrs = {p.name: p.default for p in op.params}
    text = fn(*args, attrs)
    try:
        table = json.loads(text) if isinstance(text, str) else dict(text)
    except ValueError as exc:
        raise ConfigError(str(path), None, "op_select_format()", f"not JSON: {exc}") from None
    columns: list[list[str]] = []
    new: dict[str, tuple[str, ...]] = {}
    for kind, tensors in (("input", op.inputs), ("output", op.outputs)):
        for i, t in enumerate(tensors):
            entry = table.get(f"{kind}{i}")
            if not isinstance(entry, dict) or "dtype" not in entry:
                raise ConfigError(
                    str(path), None, "op_select_format()", f"result has no {kind}{i}.dtype"
                )
            dts = [d.strip() for d in str(entry["dtype"]).split(",") if d.strip()]
            bad = [d for d in dts if d not in DTYPES]
            if bad:
                raise ConfigError(
                    str(path), None, f"op_select_format() {kind}{i}", f"unknown dtype {bad[0]!r}"
                )
            columns.append([DTYPES[d] for d in dts])
            new[t.name] = tuple(dict.fromkeys(DTYPES[d] for d in dts))
    if len({len(c) for c in columns}) > 1:
        raise ConfigError(str(path), None, "op_select_format()", "dtype lists of different lengths")
    resolved = replace(
        op,
        inputs=tuple(replace(t, datatypes=new[t.name]) for t in op.inputs),
        outputs=tuple(replace(t, datatypes=new[t.name]) for t in op.outputs),
        metadata={**op.metadata, "combinations": [list(c) for c in zip(*columns)]},
    )
    package.spec = replace(
        package.spec, ops=tuple(resolved if o is op else o for o in package.spec.ops)
    )
