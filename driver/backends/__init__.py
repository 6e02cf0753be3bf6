"""Backends: who can run an operation, and the question the device asks them.

``Device.getSupportedOperations_1_3`` asks its backend, for each operation,
"can you run this, with these operand types and shapes?" through
``Backend.supports(OpQuery) -> (supported, reason)``. The reason is empty when
supported, and otherwise says why in a few words without repeating the
operation's name (the support rule prefixes "operation 3 (CONV_2D): ").

The numpy reference backend (``nnhal.driver.backends.reference``) is a device's
built-in backend; ``nnhal.driver.support_rules.SupportPipeline`` asks it after the
profile's rules, and sends extension operations to their op packages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from nnhal.driver.ops.registry import OpContext, OperandInfo, OperationDef

from nnhal.types import HalVersion, OperationType


@dataclass(frozen=True, init=False)
class OpQuery:
    """One operation as a backend sees it when deciding support."""

    type: int  # the Operation.type code (may be an extension or OEM code)
    inputs: tuple[OperandInfo, ...]
    outputs: tuple[OperandInfo, ...]
    relaxed: bool = False  # Model.relaxComputationFloat32toFloat16
    where: str = ""  # "subgraph 0, operation 3"
    #: validate_operation's result when the operation was already validated
    #: (the device validates the model first); None = not validated yet
    version: HalVersion | None = None
    #: the model's extension prefixes resolved against the device's op packages
    #: (``nnhal.driver.extensions.ModelExtensions``); None = the device has none
    extensions: Any = None

    def __init__(
        self,
        type: int,
        inputs: tuple[OperandInfo, ...],
        outputs: tuple[OperandInfo, ...],
        relaxed: bool = False,
        where: str = "",
        version: HalVersion | None = None,
        extensions: Any = None,
    ) -> None:
        # frozen: written once, into the instance's dict (one query per operation of
        # every model prepared; object.__setattr__ per field doubled its cost)
        fields = self.__dict__
        fields["type"] = type
        fields["inputs"] = inputs
        fields["outputs"] = outputs
        fields["relaxed"] = relaxed
        fields["where"] = where
        fields["version"] = version
        fields["extensions"] = extensions

    @property
    def is_control_flow(self) -> bool:
        return self.type in (OperationType.IF, OperationType.WHILE)

    def context(self, definition: OperationDef) -> OpContext:
        """The registry's OpContext for this operation."""
        return OpContext(
            op=definition,
            inputs=list(self.inputs),
            outputs=list(self.outputs),
            relaxed=self.relaxed,
            where=self.where,
        )


class Backend(Protocol):
    name: str

    def supports(self, query: OpQuery) -> tuple[bool, str]:
        """(True, "") when this backend can run the operation, else (False, reason)."""
        ...
