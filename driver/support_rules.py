"""One device's answer to "can you run this operation?": ordered rules, then a backend.

A device builds one ``SupportPipeline`` from its profile, limits, built-in
backend and op packages, once. Every question is an ``OpQuery`` that carries
all it needs, including the model's resolved extension prefixes
(``OpQuery.extensions``), so the same pipeline answers for every model: there
is no per-model binding and no wrapper to look through.

The rules run in this order; the first that refuses gives the reason:

1. ``tensor_limit``: an operand declared above the profile's
   ``max_tensor_bytes`` (getSupportedOperations has no RESOURCE_EXHAUSTED:
   the runtime runs such operations elsewhere);
2. ``sample_rule``: the AOSP sample drivers' ``include_operations`` and
   ``first_input_types`` (``type_input``) profile keys;
3. ``profile_lists``: the profile's ``exclude_operations`` and ``operand_types``.

A rule that could refuse nothing is left out (a profile listing neither;
``tensor_limit`` for a model whose declared sizes passed
``limits.check_declared_tensors`` already: preparation checks those first and
asks a second pipeline without it, ``device_rules(sizes_checked=True)``).

Rules 2 and 3 are about the HAL's own operations: an extension operation is
decided by its op package's definition for the device's backend (its
SupplementalOpDefList), whatever the profile lists. IF and WHILE pass rules 2
and 3's operand checks to ``nnhal.driver.support``, which supports them exactly
when everything they reference is supported.

Then the backend is chosen by the operation: an extension code goes to the
package its prefix names; a HAL operation that a package overrides
(UseDefaultTranslation) to that package when the override accepts it; every
other operation to the built-in backend (``nnhal.driver.backends.reference``),
and, when that declines, to a backend plug-in that has a kernel for it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from nnhal.driver.backends import Backend, OpQuery
from nnhal.driver.backends.reference import ReferenceBackend
from nnhal.driver.extensions import REFERENCE_COST, ExtensionSet
from nnhal.driver.limits import Limits, too_big
from nnhal.driver.profile import Profile

from nnhal.types import extension_prefix, is_extension_type, operation_name, type_name

#: a rule: None when it has nothing against the operation, else why not
Rule = Callable[[OpQuery], "str | None"]


def tensor_limit(limits: Limits) -> Rule:
    def rule(query: OpQuery) -> str | None:
        for kind, infos in (("input", query.inputs), ("output", query.outputs)):
            for k, info in enumerate(infos):
                if info.omitted or not info.dimensions:
                    continue
                why = too_big(f"{kind} {k}", info.type, info.dimensions, limits)
                if why is not None:
                    return why
        return None

    return rule


def sample_rule(profile: Profile) -> Rule | None:
    """The sample drivers' rules, or None when the profile sets none of their keys."""
    if profile.include_operations is None and profile.first_input_types is None:
        return None

    def rule(query: OpQuery) -> str | None:
        if query.is_control_flow or is_extension_type(query.type):
            return None
        types = [None if info.omitted else info.type for info in query.inputs]
        return profile.sample_rule(query.type, types)

    return rule


def profile_lists(profile: Profile) -> Rule | None:
    """The profile's lists, or None when it sets neither (then nothing is refused)."""
    if not profile.exclude_operations and profile.operand_types is None:
        return None

    def rule(query: OpQuery) -> str | None:
        if is_extension_type(query.type):
            return None
        if not profile.allows_operation(query.type):
            return f"excluded by profile {profile.name!r}"
        for kind, infos in (("input", query.inputs), ("output", query.outputs)):
            for i, info in enumerate(infos):
                if info.omitted:  # an omitted optional input carries no data
                    continue
                if not profile.allows_operand_type(info.type):
                    return (
                        f"{kind} {i} has operand type {type_name(info.type)}, which is not in "
                        f"profile {profile.name!r}'s operand_types"
                    )
        return None

    return rule


def device_rules(
    profile: Profile, limits: Limits, *, sizes_checked: bool = False
) -> tuple[Rule, ...]:
    """A device's rules, in the order they are asked (a rule that could refuse nothing
    is left out). ``sizes_checked``: for models whose every declared operand passed
    ``limits.check_declared_tensors`` under ``limits``; ``tensor_limit`` reads the
    same declared sizes, so it could refuse none of their operations and is left out.
    """
    size_rule = None if sizes_checked else tensor_limit(limits)
    rules = (size_rule, sample_rule(profile), profile_lists(profile))
    return tuple(r for r in rules if r is not None)


class SupportPipeline:
    """The rules, then the backend the operation belongs to (thread-safe, built once)."""

    def __init__(
        self, rules: Sequence[Rule], builtin: Backend, extensions: ExtensionSet | None = None
    ) -> None:
        self.rules = tuple(rules)
        self.builtin = builtin
        self.extensions = extensions if extensions is not None else ExtensionSet()

    def runs_every_checked_operation(self) -> bool:
        """Whether this pipeline answers yes for every operation the device's checks
        passed: no rules, no op packages or plug-ins, and the numpy reference backend
        (which runs every operation the registry defines, once its checks passed)."""
        return (
            not self.rules
            and type(self.builtin) is ReferenceBackend
            and not self.extensions.packages
            and not self.extensions.plugins
        )

    def supports(self, query: OpQuery) -> tuple[bool, str]:
        """(True, "") when the device runs the operation, else (False, reason)."""
        for rule in self.rules:
            why = rule(query)
            if why is not None:
                return False, why
        if query.extensions is None and not is_extension_type(query.type):
            # ``route``'s answer for a model without packages: the built-in backend's
            # (a backend plug-in may still take what it refuses)
            ok, why = self.builtin.supports(query)
            if ok or not self.extensions.plugins:
                return ok, why
        where, why = self.route(query)
        return where is not None, why

    def route(self, query: OpQuery) -> tuple[Any, str]:
        """(who runs the operation, "") or (None, why nobody does): the backend choice alone.

        Who runs it is a ``PackageOp`` (an extension operation or a package's override of
        a built-in one), the built-in backend, or a backend plug-in.
        """
        code = query.type
        ext = query.extensions
        if is_extension_type(code):
            if ext is None:
                return None, (
                    f"extension prefix {extension_prefix(code)}: this device supports no "
                    "vendor extensions"
                )
            op = ext.operation(code)
            if isinstance(op, str):
                return None, op
            why = op.check(query)
            return (op, "") if why is None else (None, why)
        if ext is not None:
            override = ext.override(code)
            if override is not None and override.check(query) is None:
                return override, ""
        ok, why = self.builtin.supports(query)
        if ok:
            return self.builtin, ""
        if self.extensions.plugins:
            plugin, more = self.extensions.plugin_for(query)
            if plugin is not None:
                return plugin, ""
            why = f"{why}; {more}" if more else why
        return None, why

    def operation_name(self, code: int, ext: Any = None) -> str:
        """``SoftClip (com.example.soft_clip_package)`` for a package's operation."""
        if is_extension_type(code) and ext is not None:
            op = ext.operation(code)
            if not isinstance(op, str):
                return f"{op.op.name} ({op.package.name})"
        return operation_name(code)

    def explain(self, query: OpQuery) -> tuple[str, str]:
        """(backend, implementation and why) of one operation, for ``nnhal explain``."""
        for rule in self.rules:
            why = rule(query)
            if why is not None:
                return "-", f"unsupported: {why}"
        ext = query.extensions
        if is_extension_type(query.type):
            where, why = self.route(query)
            if where is None:
                known = ext is not None and not isinstance(ext.operation(query.type), str)
                return "-", f"unsupported: {why}" if known else why
            return f"op-package {where.package.spec.package_name}", where.explain(query)
        override = ext.override(query.type) if ext is not None else None
        if override is not None:
            why = override.check(query)
            if why is None:
                impl = override.choose(query)
                if impl is not None and impl.cost_of(query) <= REFERENCE_COST:
                    return (
                        f"op-package {override.package.spec.package_name}",
                        override.explain(query)
                        + " — overrides the built-in kernel (UseDefaultTranslation; reference "
                        "cost GLACIAL)",
                    )
            else:
                return self.builtin.name, (
                    f"built-in kernel (package override does not apply: {why})"
                )
        where, why = self.route(query)
        if where is self.builtin:
            return self.builtin.name, "built-in kernel"
        if where is not None:
            _, declined = self.builtin.supports(query)
            return f"plug-in {where.name}", "the reference backend declines: " + declined
        return "-", f"unsupported: {why}"
