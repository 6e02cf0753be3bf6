"""Family "extensions": vendor extensions (hal13.md §6).

- ``undeclared-extension`` (always): a model using an operation of an
  extension the target does not list must not be reported supported
  (INVALID_ARGUMENT or false) and must not prepare;
- ``declared`` (when getSupportedExtensions lists some; skipped otherwise):
  names unique and well formed, operand types unique within an extension,
  byteSize > 0 for scalar types.
"""

from __future__ import annotations

import re
from dataclasses import replace

from nnhal.cts.core import TestCase, check, fail

from nnhal.builder import ModelBuilder
from nnhal.errors import HalError
from nnhal.types import ExtensionNameAndPrefix, Model, OperandType

FAMILY = "extensions"
UNDECLARED = "com.example.nnhal_cts_undeclared"
_NAME = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_]+)+$")


def undeclared_model() -> Model:
    mb = ModelBuilder()
    g = mb.main
    x, y = g.input(OperandType.TENSOR_FLOAT32, [2]), g.output(OperandType.TENSOR_FLOAT32, [2])
    g.operation((1 << 16) | 0, [x], [y])
    return replace(mb.build(), extensionNameToPrefix=(ExtensionNameAndPrefix(UNDECLARED, 1),))


def _undeclared(target) -> str:
    names = {e.name for e in target.device.getSupportedExtensions()}
    if UNDECLARED in names:
        fail(f"the target declares the test's made-up extension {UNDECLARED!r}")
    model = undeclared_model()
    try:
        flags = target.device.getSupportedOperations_1_3(model)
        check(
            flags == [False],
            f"getSupportedOperations_1_3 of an operation of an undeclared "
            f"extension: {flags}, expected [false] or INVALID_ARGUMENT",
        )
        how = "reported unsupported"
    except HalError as e:
        check(e.status.name == "INVALID_ARGUMENT", f"getSupportedOperations_1_3: {e}")
        how = "rejected as invalid"
    try:
        prepared = target.device.prepareModel_1_3(model)
    except HalError:
        target.assert_serving()
        return f"{how}, and not prepared"
    prepared.release()
    fail("prepareModel_1_3 prepared a model using an undeclared extension's operation")


def _declared(target) -> str:
    extensions = target.require("extensions").detail
    names = [e.name for e in extensions]
    check(len(set(names)) == len(names), f"extension names repeat: {names}")
    for e in extensions:
        check(_NAME.match(e.name), f"extension name {e.name!r} is not a lowercase dotted name")
        types = [t.type for t in e.operandTypes]
        check(len(set(types)) == len(types), f"{e.name}: operand types repeat: {types}")
        for t in e.operandTypes:
            check(
                t.isTensor or t.byteSize > 0,
                f"{e.name}: scalar operand type {t.type} has byteSize 0",
            )
    return f"{len(extensions)} extensions: {', '.join(names)}"


def collect(library, options) -> list[TestCase]:
    return [
        TestCase(f"{FAMILY}/undeclared-extension", FAMILY, _undeclared),
        TestCase(f"{FAMILY}/declared", FAMILY, _declared),
    ]
