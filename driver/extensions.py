"""NNAPI vendor extensions from op packages, and the backend the device asks.

Each loaded op package is one extension, named from its Domain and
PackageName (``spec.extension_name``, e.g. ``com.example.activation_package``);
its operations are numbered in definition order, so operation k of the
extension has the code ``(prefix << 16) | k`` where ``prefix`` is what the
model's ``extensionNameToPrefix`` gives that name (hal13.md §6.1).

- ``ExtensionSet``: the device's packages for one device backend name
  (which SupplementalOpDefList applies); ``hal_extensions()`` is
  getSupportedExtensions; ``for_model(model)`` resolves a model's prefixes.
- ``ModelExtensions``: one model's prefixes resolved; support questions carry it
  (``OpQuery.extensions``) to ``nnhal.driver.support_rules``.
- ``compiling(resolver)``: the context the executor's compiler reads
  (``kernel_definition``) to bind custom kernels, and built-in operations a
  package overrides with UseDefaultTranslation.

Backend plug-ins (entry points ``nnhal.backends``, ``discovery.load_backends``)
are objects with ``name``, ``supports(OpQuery) -> (bool, reason)`` and
``definition(op_type) -> OperationDef | None``; they come in the same list as
the packages. The device asks them about an operation the reference backend
declines and that the registry has no kernel for (OEM_OPERATION, operations a
build leaves out), and binds their kernels for it.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator, Sequence
from typing import Any

from nnhal.driver.backends import OpQuery
from nnhal.driver.backends.op_package import PackageOp
from nnhal.driver.op_packages.nnapi_types import extension_operand_types
from nnhal.driver.op_packages.runtime import GLACIAL, OpPackage
from nnhal.driver.ops.registry import OperationDef

from nnhal.types import (
    Extension,
    Model,
    OperandTypeInformation,
    OperationType,
    extension_prefix,
    is_extension_type,
)

#: the reference backend's kernels count as this cost when a package overrides them
REFERENCE_COST = GLACIAL


def _norm(name: str) -> str:
    return name.replace("_", "").lower()


class ExtensionSet:
    """The op packages of one device, seen through one device backend name."""

    def __init__(self, packages: Sequence[Any] = (), backend: str | None = None) -> None:
        self.backend = backend
        #: where kernels run: a KernelSupervisor (worker processes) or None (inline);
        #: set by the device from its profile's op_package_isolation
        self.runner: Any = None
        self.packages: dict[str, OpPackage] = {}
        #: backend plug-ins (anything in ``packages`` that is not an OpPackage)
        self.plugins: list[Any] = [p for p in packages if not isinstance(p, OpPackage)]
        for p in packages:
            if isinstance(p, OpPackage):
                self.packages.setdefault(p.name, p)
        #: NNAPI operation name -> (package, op) overriding it (UseDefaultTranslation)
        self.overrides: dict[int, tuple[OpPackage, Any]] = {}
        by_name = {_norm(t.name): t for t in OperationType}
        for p in self.packages.values():
            for op in p.spec.ops:
                target = by_name.get(_norm(op.name))
                if op.use_default_translation and target is not None:
                    self.overrides.setdefault(int(target), (p, op))

    def __bool__(self) -> bool:
        return bool(self.packages or self.plugins)

    def plugin_for(self, query: OpQuery) -> tuple[Any, str]:
        """The first plug-in that runs an operation the registry has no kernel for."""
        from nnhal.driver.ops import registry

        if registry.lookup(query.type) is not None:
            return None, ""
        reasons = []
        for plugin in self.plugins:
            ok, why = plugin.supports(query)
            if ok:
                return plugin, ""
            reasons.append(f"backend {plugin.name}: {why}")
        return None, "; ".join(reasons)

    def hal_extensions(self) -> tuple[Extension, ...]:
        """getSupportedExtensions: the packages whose every operation runs on this backend.

        The HAL lists an extension only when all of it is supported (hal13 6.2);
        a partly supported package still answers getSupportedOperations_1_3
        operation by operation, with reasons.
        """
        out = []
        for name, p in sorted(self.packages.items()):
            if all(p.spec.runs_on(self.backend, op)[0] for op in p.spec.ops):
                out.append(Extension(name=name, operandTypes=package_operand_types(p)))
        return tuple(out)

    def for_model(self, model: Model) -> ModelExtensions:
        return ModelExtensions(self, model)

    def rules(self) -> list[Any]:
        return [r for p in self.packages.values() for r in p.rules]

    def rewrite(self, model: Model) -> Model:
        """The model after the packages' optimization rules (``nnhal.driver.op_packages.rules``)."""
        rules = self.rules()
        if not rules:
            return model
        from nnhal.driver.op_packages.rules import apply_rules

        return apply_rules(model, rules, self)[0]


def package_operand_types(package: OpPackage) -> tuple[OperandTypeInformation, ...]:
    """The extension operand types a package's definition uses (inputs, outputs,
    parameters and every backend's overrides)."""
    used = {dt for op in package.spec.ops for t in (*op.inputs, *op.outputs, *op.params)
            for dt in t.datatypes}  # fmt: skip
    for b in package.spec.backends:
        for tensors in b.overrides.values():
            for o in tensors.values():
                used.update(o.datatypes)
    return tuple(
        OperandTypeInformation(type=c, isTensor=t, byteSize=s)
        for c, t, s in extension_operand_types(used)
    )


class ModelExtensions:
    """One model's extension prefixes resolved against the device's packages."""

    def __init__(self, extensions: ExtensionSet, model: Model) -> None:
        self.extensions = extensions
        self.model = model
        self.names = {e.prefix: e.name for e in model.extensionNameToPrefix}
        self._ops: dict[int, PackageOp] = {}

    def name_of(self, code: int) -> str | None:
        return self.names.get(extension_prefix(code))

    def _unknown(self, name: str) -> str:
        have = ", ".join(sorted(self.extensions.packages)) or "none"
        return f"extension {name!r} is not supported by this device (its extensions: {have})"

    def operation(self, code: int) -> PackageOp | str:
        """The package operation an extension code names, or why there is none."""
        op = self._ops.get(code)
        if op is not None:
            return op
        prefix = extension_prefix(code)
        name = self.names.get(prefix)
        if name is None:
            return f"prefix {prefix} is not in Model.extensionNameToPrefix"
        package = self.extensions.packages.get(name)
        if package is None:
            return self._unknown(name)
        number = code & 0xFFFF
        if number >= len(package.spec.ops):
            ops = ", ".join(f"{i} = {o.name}" for i, o in enumerate(package.spec.ops))
            return f"extension {name!r} has no operation {number} (it has {ops})"
        op = PackageOp(
            package,
            package.spec.ops[number],
            self.extensions.backend,
            prefix,
            code,
            self.extensions.runner,
        )
        self._ops[code] = op
        return op

    def override(self, code: int) -> PackageOp | None:
        entry = self.extensions.overrides.get(code)
        if entry is None:
            return None
        key = -1 - code
        op = self._ops.get(key)
        if op is None:
            package, spec = entry
            op = PackageOp(package, spec, self.extensions.backend, 0, code, self.extensions.runner)
            self._ops[key] = op
        return op


# -- the compiler's hook ---------------------------------------------------------

_COMPILING: contextvars.ContextVar[ModelExtensions | None] = contextvars.ContextVar(
    "nnhal_compiling_extensions", default=None
)


@contextlib.contextmanager
def compiling(model_ext: ModelExtensions | None) -> Iterator[None]:
    token = _COMPILING.set(model_ext)
    try:
        yield
    finally:
        _COMPILING.reset(token)


def kernel_definition(op_type: int, input_types: Sequence[int] = ()) -> OperationDef | None:
    """The OperationDef of an extension operation (or a package override of a built-in
    one) while a device compiles a model; None = use the registry."""
    ext = _COMPILING.get()
    if ext is None:
        return None
    if is_extension_type(op_type):
        op = ext.operation(op_type)
        return None if isinstance(op, str) else op.definition()
    from dataclasses import replace

    from nnhal.driver.ops import registry

    builtin = registry.lookup(op_type)
    override = ext.override(op_type)
    if override is None:
        if builtin is None:
            for plugin in ext.extensions.plugins:
                definition = plugin.definition(op_type)
                if definition is not None:
                    return definition
        return None
    if builtin is None:
        return override.definition()

    def execute(ctx: Any) -> Any:
        query = OpQuery(type=op_type, inputs=tuple(ctx.inputs), outputs=tuple(ctx.outputs))
        if override.check(query) is None:
            impl = override.choose(query)
            if impl is not None and impl.cost_of(query) <= REFERENCE_COST:
                return override._bind(ctx)
        return builtin.execute(ctx)

    return replace(builtin, execute=execute)


# -- the device's hooks ------------------------------------------------------


def extension_query(analysis: Any, number: int, index: int, place: str) -> OpQuery:
    """Validate an extension operation for ``nnhal.driver.device.ModelAnalysis`` and give the
    backend's question (with constant values, for IsStaticTensor / OnlyDefaultSupported).

    As in Android, only an undeclared prefix makes the model invalid (``validate_model``
    refuses it before asking): an extension this device lacks, or an operation number its
    package does not define, gives a question built from the operand descriptions, which
    the support pipeline answers "unsupported" with the reason.
    """
    from nnhal.driver.support import light_query

    from nnhal.errors import InvalidArgument
    from nnhal.types import HalVersion

    model = analysis.model
    subgraph = model.main if number == 0 else model.referenced[number - 1]
    op = subgraph.operations[index]
    code = op.type
    ext: ModelExtensions | None = analysis.extensions
    found = ext.operation(code) if ext is not None else None
    if found is None or isinstance(found, str):
        return light_query(model, number, index, ext)
    n_operands = len(subgraph.operands)
    for i in (*op.inputs, *op.outputs):
        if not 0 <= i < n_operands:
            raise InvalidArgument(f"{found.label} ({place}): operand {i} out of range")
    return OpQuery(
        type=code,
        inputs=tuple(analysis.operand_info(number, i) for i in op.inputs),
        outputs=tuple(analysis.operand_info(number, i) for i in op.outputs),
        relaxed=model.relaxComputationFloat32toFloat16,
        where=place,
        version=HalVersion.V1_3,
        extensions=ext,
    )


def compile_with_extensions(extensions: ExtensionSet | None, model: Model, pool_views: Any) -> Any:
    """``compile_model`` as a device with op packages does it (rules applied, custom kernels
    bound); for callers other than ``Device.prepareModel_1_3`` (e.g. a compilation cache)."""
    from nnhal.driver.executor import compile_model

    if not extensions:
        return compile_model(model, pool_views=pool_views)
    with compiling(extensions.for_model(model)):
        return compile_model(extensions.rewrite(model), pool_views=pool_views)


def fingerprint(extensions: ExtensionSet | None) -> str:
    """What a cache must match: the package backend and each package's name, version, source."""
    if not extensions:
        return ""
    parts = [f"backend={extensions.backend}"]
    parts += [f"{n}@{p.spec.version}:{p.source}" for n, p in sorted(extensions.packages.items())]
    parts += [f"plugin:{getattr(b, 'name', type(b).__name__)}" for b in extensions.plugins]
    return ";".join(parts)
