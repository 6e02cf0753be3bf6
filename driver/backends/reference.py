"""The numpy reference backend: runs every operation the registry implements.

An ordinary operation is supported when the registry implements its type (it
is registered, not listed by ``registry.not_implemented()``), ``validate_operation``
passes, and the device profile allows the operation and every operand type it
reads or writes. IF and WHILE are run by the executor itself, so this backend
only applies the profile to them; the rule that their subgraphs must be
supported too lives in ``nnhal.driver.support``.
"""

from __future__ import annotations

from nnhal.driver.backends import OpQuery
from nnhal.driver.ops import registry
from nnhal.driver.profile import Profile, load_profile

from nnhal.errors import InvalidArgument
from nnhal.types import (
    OperationType,
    extension_prefix,
    is_extension_type,
    type_name,
)


class ReferenceBackend:
    """The CPU executor's numpy kernels, narrowed by a device profile."""

    name = "reference"

    def __init__(self, profile: Profile | None = None) -> None:
        self.profile = profile if profile is not None else load_profile(None)

    def supports(self, query: OpQuery) -> tuple[bool, str]:
        code = query.type
        if is_extension_type(code):
            return False, f"extension prefix {extension_prefix(code)}: no extensions are supported"
        if code == OperationType.OEM_OPERATION:
            return False, "OEM_OPERATION is not supported by the reference backend"

        definition = None
        if not query.is_control_flow:
            definition = registry.lookup(code)
            if definition is None:
                reason = registry.not_implemented().get(code)
                if reason is not None:
                    # The table's reasons may already say "not implemented ...".
                    if "not implemented" in reason.lower():
                        return False, reason
                    return False, f"not implemented yet ({reason})"
                return False, "not implemented by the reference backend"

        profile = self.profile
        if not profile.allows_operation(code):
            return False, f"excluded by profile {profile.name!r}"
        for kind, infos in (("input", query.inputs), ("output", query.outputs)):
            for i, info in enumerate(infos):
                if info.omitted:  # an omitted optional input carries no data
                    continue
                if not profile.allows_operand_type(info.type):
                    return False, (
                        f"{kind} {i} has operand type {type_name(info.type)}, which is not in "
                        f"profile {profile.name!r}'s operand_types"
                    )

        if definition is not None and query.version is None:
            try:
                registry.validate_operation(query.context(definition))
            except InvalidArgument as exc:
                return False, exc.message
        return True, ""
