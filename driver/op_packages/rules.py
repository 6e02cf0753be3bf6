"""Optimization rules of op packages (DEF_PACKAGE_OPTIMIZATION), applied at prepare.

A kernel module lists ``RULES = [Rule(...)]``. A rule has

- ``priority``: EARLY (2000), MIDDLE (3000), LATE (4000), plus offsets
  (``EARLY + 1``); lower runs first;
- ``pattern``: ``(OP, arg, ...)`` where OP is an NNAPI operation name
  (``"ADD"``) or an operation of the rule's package (``"SoftClip"``), and each
  arg is a variable name (binds that input operand) or a nested pattern (the
  operand is a temporary produced by that operation and used by nothing else);
- ``constraint``: a function of the ``Match`` (``m.is_constant("act", 0)``,
  ``m.same_type("a", "b")``, ``m.rank("x")``...), or None;
- ``replacement``: ``(OP, var, ...)``: one operation replacing the matched
  ones, with the root operation's outputs.

``apply_rules`` rewrites every subgraph until no rule matches (at most a
bounded number of rounds), keeping operation order valid (the replacement
takes the root's position; the absorbed producers are removed). Operands are
left in place (an absorbed temporary simply has no producer or consumer).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from nnhal.types import (
    OPERAND_TYPE_INFO,
    Model,
    Operand,
    OperandLifeTime,
    Operation,
    OperationType,
    Subgraph,
)

EARLY, MIDDLE, LATE = 2000, 3000, 4000
MAX_REWRITES = 10_000

Pattern = tuple  # (op name, arg...)


@dataclass(frozen=True)
class Rule:
    name: str
    priority: int
    pattern: Pattern
    replacement: Pattern
    constraint: Callable[[Match], bool] | None = None


class Match:
    """Variables bound by a pattern in one subgraph."""

    def __init__(self, model: Model, subgraph: Subgraph) -> None:
        self.model = model
        self.subgraph = subgraph
        self.vars: dict[str, int] = {}
        self.ops: list[int] = []  # matched operation indexes, root last

    def operand(self, var: str) -> Operand:
        return self.subgraph.operands[self.vars[var]]

    def value(self, var: str) -> np.ndarray | None:
        operand = self.operand(var)
        info = OPERAND_TYPE_INFO.get(operand.type)
        if operand.lifetime != OperandLifeTime.CONSTANT_COPY or info is None or info.dtype is None:
            return None
        loc = operand.location
        raw = self.model.operandValues[loc.offset : loc.offset + loc.length]
        return np.frombuffer(raw, dtype=info.dtype)

    def is_constant(self, var: str, value: Any = None) -> bool:
        v = self.value(var)
        if v is None:
            return False
        return value is None or bool(np.all(v == value))

    def same_type(self, a: str, b: str) -> bool:
        x, y = self.operand(a), self.operand(b)
        return x.type == y.type and tuple(x.dimensions) == tuple(y.dimensions)

    def rank(self, var: str) -> int:
        return len(self.operand(var).dimensions)

    def dims(self, var: str) -> tuple[int, ...]:
        return tuple(self.operand(var).dimensions)


def _own_name(name: str, spec: Any) -> str:
    """``Pkg::Op`` (the HTP syntax) names ``Op`` when Pkg is the rule's own package."""
    pkg, sep, op = name.partition("::")
    return op if sep and pkg == spec.package_name else name


def check_rule(rule: Any, spec: Any) -> str | None:
    """Why a rule of package ``spec`` cannot work, or None; checked when the package loads.

    The pattern is ``(OP, arg...)`` with each arg a variable name or a nested pattern; the
    replacement is flat ``(OP, var...)`` using only variables the pattern binds; every OP
    is an NNAPI operation name or an operation of the rule's own package (``Op`` or
    ``OwnPackage::Op``). Rules cannot name other packages' operations: which prefix
    another package gets is the model's choice, and the package may not be loaded.
    """
    if not isinstance(rule, Rule):
        return f"{rule!r} is a {type(rule).__name__}, not a Rule"
    label = f"rule {rule.name!r}"
    if not isinstance(rule.priority, int) or isinstance(rule.priority, bool):
        return f"{label}: priority {rule.priority!r} is not an integer (EARLY, MIDDLE, LATE + n)"
    if rule.constraint is not None and not callable(rule.constraint):
        return f"{label}: constraint {rule.constraint!r} is not callable"

    def op_name(name: Any, where: str) -> str | None:
        if not isinstance(name, str) or not name:
            return f"{label}: {where} operation {name!r} is not a name"
        if name in OperationType.__members__:
            return None
        pkg, sep, op = name.partition("::")
        if sep and pkg != spec.package_name:
            return (
                f"{label}: {where} operation {name!r} names package {pkg!r}; a rule may name "
                f"NNAPI operations and operations of its own package {spec.package_name!r} only"
            )
        if spec.op(op if sep else name) is None:
            ops = ", ".join(o.name for o in spec.ops)
            return (
                f"{label}: {where} operation {name!r} is neither an NNAPI operation nor one "
                f"of package {spec.package_name!r} ({ops})"
            )
        return None

    bound: set[str] = set()

    def walk(pattern: Any, where: str) -> str | None:
        if not isinstance(pattern, tuple) or not pattern:
            return f"{label}: {where} {pattern!r} is not a tuple (OP, arg, ...)"
        why = op_name(pattern[0], where)
        if why:
            return why
        for arg in pattern[1:]:
            if isinstance(arg, tuple):
                why = walk(arg, where)
                if why:
                    return why
            elif isinstance(arg, str) and arg:
                bound.add(arg)
            else:
                return f"{label}: {where} argument {arg!r} is neither a variable name nor a pattern"
        return None

    why = walk(rule.pattern, "pattern")
    if why:
        return why
    rep = rule.replacement
    if not isinstance(rep, tuple) or not rep:
        return f"{label}: replacement {rep!r} is not a tuple (OP, var, ...)"
    why = op_name(rep[0], "replacement")
    if why:
        return why
    for arg in rep[1:]:
        if isinstance(arg, tuple):
            return (
                f"{label}: replacement argument {arg!r} is a nested pattern; a replacement is "
                "one operation (OP, var, ...) whose arguments are pattern variables"
            )
        if arg not in bound:
            return (
                f"{label}: replacement variable {arg!r} is not bound by the pattern "
                f"(it binds {', '.join(sorted(bound)) or 'nothing'})"
            )
    return None


def _codes(name: str, package: Any, model: Model) -> int | None:
    """The operation code of a pattern's OP in this model (None = not usable here)."""
    if name in OperationType.__members__:
        return int(OperationType[name])
    spec = package.spec
    name = _own_name(name, spec)
    if spec.op(name) is None:
        return None
    for entry in model.extensionNameToPrefix:
        if entry.name == spec.extension_name:
            return (entry.prefix << 16) | spec.op_code(name)
    return None


class _Matcher:
    def __init__(self, model: Model, subgraph: Subgraph, package: Any) -> None:
        self.model = model
        self.subgraph = subgraph
        self.package = package
        self.producer: dict[int, int] = {}
        self.uses: dict[int, int] = {}
        for k, op in enumerate(subgraph.operations):
            for o in op.outputs:
                self.producer[o] = k
            for i in op.inputs:
                self.uses[i] = self.uses.get(i, 0) + 1
        self.outputs = set(subgraph.outputIndexes)

    def match(self, pattern: Pattern, op_index: int, m: Match) -> bool:
        code = _codes(pattern[0], self.package, self.model)
        op = self.subgraph.operations[op_index]
        if code is None or op.type != code or len(op.inputs) != len(pattern) - 1:
            return False
        for arg, operand in zip(pattern[1:], op.inputs):
            if isinstance(arg, tuple):
                src = self.producer.get(operand)
                o = self.subgraph.operands[operand]
                if (
                    src is None
                    or o.lifetime != OperandLifeTime.TEMPORARY_VARIABLE
                    or self.uses.get(operand, 0) != 1
                    or operand in self.outputs
                    or len(self.subgraph.operations[src].outputs) != 1
                    or not self.match(arg, src, m)
                ):
                    return False
            elif arg in m.vars and m.vars[arg] != operand:
                return False
            else:
                m.vars[arg] = operand
        m.ops.append(op_index)
        return True


def _compact(subgraph: Subgraph) -> Subgraph:
    """Drop temporaries nothing reads or writes any more; recount consumers."""
    used: set[int] = set(subgraph.inputIndexes) | set(subgraph.outputIndexes)
    consumers: dict[int, int] = {}
    for op in subgraph.operations:
        used.update(op.inputs)
        used.update(op.outputs)
        for i in op.inputs:
            consumers[i] = consumers.get(i, 0) + 1
    keep = [
        i
        for i, o in enumerate(subgraph.operands)
        if i in used or o.lifetime != OperandLifeTime.TEMPORARY_VARIABLE
    ]
    new_index = {old: new for new, old in enumerate(keep)}
    operands = tuple(
        replace(subgraph.operands[i], numberOfConsumers=consumers.get(i, 0)) for i in keep
    )
    ops = tuple(
        replace(
            op,
            inputs=tuple(new_index[i] for i in op.inputs),
            outputs=tuple(new_index[i] for i in op.outputs),
        )
        for op in subgraph.operations
    )
    return replace(
        subgraph,
        operands=operands,
        operations=ops,
        inputIndexes=tuple(new_index[i] for i in subgraph.inputIndexes),
        outputIndexes=tuple(new_index[i] for i in subgraph.outputIndexes),
    )


#: (rewritten model, subgraph number, index of the replacement) -> None, or why it cannot run
Accept = Callable[[Model, int, int], "str | None"]


def _rewrite_once(
    model: Model, number: int, rule: Rule, package: Any, accept: Accept, rejected: dict[str, None]
) -> tuple[Model, str] | None:
    subgraph = model.main if number == 0 else model.referenced[number - 1]
    matcher = _Matcher(model, subgraph, package)
    for k in range(len(subgraph.operations)):
        m = Match(model, subgraph)
        if not matcher.match(rule.pattern, k, m):
            continue
        if rule.constraint is not None and not rule.constraint(m):
            continue
        code = _codes(rule.replacement[0], package, model)
        if code is None or any(v not in m.vars for v in rule.replacement[1:]):
            continue  # (check_rule refuses unbound variables when the package loads)
        root = subgraph.operations[k]
        new_op = Operation(code, tuple(m.vars[v] for v in rule.replacement[1:]), root.outputs)
        absorbed = set(m.ops[:-1])
        ops = [
            new_op if i == k else op
            for i, op in enumerate(subgraph.operations)
            if i not in absorbed
        ]
        new_sub = _compact(replace(subgraph, operations=tuple(ops)))
        if number == 0:
            new_model = replace(model, main=new_sub)
        else:
            refs = list(model.referenced)
            refs[number - 1] = new_sub
            new_model = replace(model, referenced=tuple(refs))
        text = (
            f"rule {rule.name!r} (priority {rule.priority}): subgraph {number}, operations "
            f"{sorted(m.ops)} -> {rule.replacement[0]}"
        )
        why = accept(new_model, number, k - sum(1 for i in absorbed if i < k))
        if why is not None:  # the device could not run the replacement: keep the original
            rejected.setdefault(f"{text}: not applied, the replacement is unsupported: {why}")
            continue
        return new_model, text
    return None


def apply_rules(model: Model, rules: list[Any], extensions: Any) -> tuple[Model, list[str]]:
    """Apply the rules (by priority) until none matches; returns the model and a log."""
    owned = []
    for package in extensions.packages.values():
        for rule in package.rules:
            owned.append((rule.priority, len(owned), rule, package))
    owned.sort(key=lambda r: (r[0], r[1]))
    log: list[str] = []
    rejected: dict[str, None] = {}

    def accept(new_model: Model, number: int, index: int) -> str | None:
        from nnhal.driver.support import light_query

        from nnhal.types import is_extension_type

        sub = new_model.main if number == 0 else new_model.referenced[number - 1]
        code = sub.operations[index].type
        if not is_extension_type(code):
            return None
        op = extensions.for_model(new_model).operation(code)
        return op if isinstance(op, str) else op.check(light_query(new_model, number, index))

    for _ in range(MAX_REWRITES):
        for _prio, _i, rule, package in owned:
            done = None
            for number in range(len(model.referenced) + 1):
                done = _rewrite_once(model, number, rule, package, accept, rejected)
                if done is not None:
                    break
            if done is not None:
                model, text = done
                log.append(text)
                break
        else:
            return model, log + list(rejected)
    return model, log + list(rejected)
