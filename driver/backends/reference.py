"""The numpy reference backend: runs every operation the registry implements.

An ordinary operation is supported when the registry has its type and
``validate_operation`` passes. IF and WHILE are run by the executor itself, so
this backend accepts them; the rule that their subgraphs must be supported too
lives in ``nnhal.driver.support``, and the device profile's rules in
``nnhal.driver.support_rules``.
"""

from __future__ import annotations

from nnhal.driver.backends import OpQuery
from nnhal.driver.ops import registry

from nnhal.errors import InvalidArgument
from nnhal.types import (
    OperationType,
    extension_prefix,
    is_extension_type,
)


class ReferenceBackend:
    """The CPU executor's numpy kernels."""

    name = "reference"

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
                return False, "not implemented by the reference backend"

        if definition is not None and query.version is None:
            try:
                registry.validate_operation(query.context(definition))
            except InvalidArgument as exc:
                return False, exc.message
        return True, ""
