"""``nnhal explain``: per operation, which backend and which implementation runs it, and why.

Lists the packages' optimization rules that fire at prepare (the rewritten
graph is what runs), then every operation of every subgraph of the rewritten
model: the backend (``reference`` or ``op-package NAME``), the implementation
chosen (cheapest matching; a package's UseDefaultTranslation override of a
built-in operation when it matches at no more than the reference's cost), or
why the operation is unsupported.
"""

from __future__ import annotations

from typing import Any

from nnhal.driver.op_packages.rules import apply_rules

from nnhal.errors import HalError
from nnhal.types import Model


def explain_model(device: Any, model: Model) -> list[str]:
    lines = [f"device {device.name!r}, op-package backend {device.extensions.backend!r}"]
    for ext in device.getSupportedExtensions():
        lines.append(f"  extension {ext.name}")
    try:
        supported, reasons = device.explainSupportedOperations(model)
    except HalError as exc:
        return [*lines, f"invalid model: {exc.status.name}: {exc.message}"]
    lines.append(
        f"main: {sum(supported)} of {len(supported)} operations supported"
        + "".join(f"\n  {reasons[k]}" for k in sorted(reasons))
    )
    rewritten, log = model, []
    if device.extensions:
        rewritten, log = apply_rules(model, device.extensions.rules(), device.extensions)
    if log:
        lines.append("rewrites at prepare:")
        lines.extend(f"  {entry}" for entry in log)
    try:
        analysis = device.analyze(rewritten)
    except HalError as exc:
        return [*lines, f"the rewritten model is invalid: {exc.message}"]
    support = device.support
    for number, subgraph in enumerate((rewritten.main, *rewritten.referenced)):
        lines.append(f"subgraph {number}{' (main)' if number == 0 else ''}:")
        for k, op in enumerate(subgraph.operations):
            query = analysis.query_for(number, k)
            if query.is_control_flow:
                which, why = "executor", "control flow (its subgraphs are listed separately)"
            else:
                which, why = support.explain(query)
            name = support.operation_name(op.type, analysis.extensions)
            lines.append(f"  operation {k} {name}: {which}: {why}")
    return lines
