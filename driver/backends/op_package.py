"""The op-package backend: "can you run this custom operation?" and "run it".

``PackageOp`` is one operation of one loaded package as seen by one device
backend (the SupplementalOpDefList named by the device, e.g. ``HTP`` or
``CPU``). ``supports(query)`` applies the definition: SupportedOps /
SupportedBackend, the operand count (inputs then parameters, as
DEF_PACKAGE_PARAM_ORDER orders them; trailing optional parameters may be left
off), each operand's NNAPI type from its datatypes (after the backend's
supplement), ranks, IsStaticTensor (must be a constant), OnlyDefaultSupported
(a constant equal to the Default), Ascend dtype columns, and that some kernel
implementation matches the types. ``definition()`` is the registry-style
``OperationDef`` the executor binds: its ``execute`` picks the cheapest
matching implementation and binds parameters by name; with a ``runner``
(``nnhal.driver.op_packages.supervisor.KernelSupervisor``) the kernel runs in one of
the device's worker processes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from nnhal.driver.backends import OpQuery
from nnhal.driver.op_packages.nnapi_types import nnapi_types
from nnhal.driver.op_packages.runtime import Implementation, OpPackage
from nnhal.driver.op_packages.spec import OpSpec, TensorSpec
from nnhal.driver.ops.registry import Arg, OpContext, OperationDef

from nnhal.types import OPERAND_TYPE_INFO, HalVersion, type_name

_RANKS = {"1D": 1, "2D": 2, "3D": 3, "4D": 4, "5D": 5}


class OpCode(int):
    """An operation code with a ``name`` (what OpContext.name shows)."""

    name: str

    def __new__(cls, code: int, name: str) -> OpCode:
        obj = super().__new__(cls, code)
        obj.name = name
        return obj


def _datatype_of(code: int, t: TensorSpec, prefix: int) -> str | None:
    for dt in t.datatypes:
        if code in nnapi_types(dt, t.scalar, prefix):
            return dt
    return None


class PackageOp:
    """One custom operation of a package, for one device backend and one model prefix."""

    def __init__(
        self,
        package: OpPackage,
        op: OpSpec,
        backend: str | None,
        prefix: int,
        code: int,
        runner: Any = None,
    ):
        self.package = package
        #: the device's KernelSupervisor (None: kernels run inline, in this process)
        self.runner = runner
        self.backend = backend
        self.prefix = prefix
        self.code = code
        spec = package.spec.resolved(backend)
        self.op = spec.op(op.name) or op
        self.only_default = package.spec.only_default(backend, op.name)
        self.runs, self.why_not = package.spec.runs_on(backend, op)
        self.label = f"{package.spec.package_name}.{op.name}"

    # -- mapping operands -----------------------------------------------------

    def layout(self, n_in: int) -> list[tuple[TensorSpec, int]] | str:
        """(tensor spec, repeat index) per NNAPI input operand, or why the count is wrong."""
        op = self.op
        params = op.params
        fixed_inputs = op.inputs
        out: list[tuple[TensorSpec, int]] = []
        if fixed_inputs and fixed_inputs[0].repeated:
            n_rep = n_in - (len(fixed_inputs) - 1) - len(params)
            if n_rep < 1:
                return (
                    f"expected at least {len(fixed_inputs) + len(params)} inputs (the Repeated "
                    f"input {fixed_inputs[0].name!r} at least once, then the rest and all "
                    f"{len(params)} parameters), got {n_in}"
                )
            out.extend((fixed_inputs[0], k) for k in range(n_rep))
            fixed_inputs = fixed_inputs[1:]
        out.extend((t, 0) for t in fixed_inputs)
        needed = len(out) + len(params)
        minimum = len(out) + len(params)
        while minimum > len(out) and not params[minimum - len(out) - 1].mandatory:
            minimum -= 1
        if not minimum <= n_in <= needed:
            want = str(needed) if minimum == needed else f"{minimum} to {needed}"
            names = ", ".join(t.name for t in (*op.inputs, *params))
            return f"expected {want} inputs ({names}), got {n_in}"
        out.extend((p, 0) for p in params[: n_in - len(out)])
        return out

    def output_specs(self, n_out: int) -> list[TensorSpec] | str:
        """The spec of each NNAPI output operand, or why the count is wrong."""
        outputs = self.op.outputs
        if outputs[0].repeated:  # the spec allows it only as the single output
            if n_out < 1:
                return f"expected at least 1 output (Repeated {outputs[0].name!r}), got {n_out}"
            return [outputs[0]] * n_out
        min_out = len(outputs)
        while min_out and not outputs[min_out - 1].mandatory:
            min_out -= 1
        if not min_out <= n_out <= len(outputs):
            want = str(min_out) if min_out == len(outputs) else f"{min_out} to {len(outputs)}"
            return f"expected {want} outputs, got {n_out}"
        return list(outputs[:n_out])

    def check(self, query: OpQuery) -> str | None:
        """None when the definition allows this operation, else why not."""
        if not self.runs:
            return self.why_not
        layout = self.layout(len(query.inputs))
        if isinstance(layout, str):
            return layout
        op = self.op
        n_out = len(query.outputs)
        out_specs = self.output_specs(n_out)
        if isinstance(out_specs, str):
            return out_specs
        chosen: list[str] = []
        pairs = [
            (t, info, f"input {i}") for i, ((t, _), info) in enumerate(zip(layout, query.inputs))
        ]
        pairs += [
            (t, info, f"output {i}") for i, (t, info) in enumerate(zip(out_specs, query.outputs))
        ]
        for t, info, label in pairs:
            label = f"{label} ({t.name})"
            if info.omitted:
                if t.mandatory:
                    return f"{label} is mandatory but has no value"
                continue
            if t.datatypes:
                dt = _datatype_of(info.type, t, self.prefix)
                if dt is None:
                    allowed = sorted(
                        {
                            type_name(c)
                            for d in t.datatypes
                            for c in nnapi_types(d, t.scalar, self.prefix)
                        }
                    )
                    where = f" on backend {self.backend}" if self.backend else ""
                    return (
                        f"{label} has type {type_name(info.type)}; the definition{where} allows "
                        f"{', '.join(allowed) or 'no NNAPI type'} ({'/'.join(t.datatypes)})"
                    )
                chosen.append(dt)
            rank = _RANKS.get(t.rank or "")
            if rank is not None and info.dimensions is not None and len(info.dimensions) != rank:
                return f"{label} has rank {len(info.dimensions)}; the definition says {t.rank}"
            if t.kind == "input" and t.static and info.value is None:
                return f"{label} is IsStaticTensor: it must be a constant operand"
            if t.enum and info.value is not None:
                why = _outside_enumeration(info.value, t.enum)
                if why is not None:
                    return f"{label} {why}"
            if t.name in self.only_default and not _is_default(info.value, t.default):
                return (
                    f"{label}: backend {self.backend} supports only the Default "
                    f"{t.default!r} (OnlyDefaultSupported), as a constant"
                )
        combos = op.metadata.get("combinations")
        if combos and len(chosen) == len(combos[0]) and list(chosen) not in combos:
            return (
                f"dtypes {', '.join(chosen)} are not one of the definition's dtype columns: "
                + "; ".join(",".join(c) for c in combos)
            )
        if not self.package.impls(op):
            return (
                f"package {self.package.spec.package_name!r} has no kernel implementation of "
                f"{op.name} ({'; '.join(self.package.notes) or 'none registered'})"
            )
        if self.choose(query) is None:
            return f"no kernel implementation of {op.name} matches these operand types"
        return None

    # -- implementations ---------------------------------------------------

    def matches(self, impl: Implementation, query: OpQuery) -> bool:
        layout = self.layout(len(query.inputs))
        if isinstance(layout, str):
            return False
        by_name: dict[str, int] = {}
        for (t, _), info in zip(layout, query.inputs):
            by_name.setdefault(t.name, info.type)
        outs = self.output_specs(len(query.outputs))
        for t, info in zip(outs if not isinstance(outs, str) else (), query.outputs):
            by_name.setdefault(t.name, info.type)
        for tname, dts in impl.types.items():
            code = by_name.get(tname)
            if code is None:
                return False
            t = self.op.tensor(tname)
            scalar = bool(t and t.scalar)
            if not any(code in nnapi_types(d, scalar, self.prefix) for d in dts):
                return False
        return True

    def ranked(self, query: OpQuery) -> list[tuple[float, int, Implementation]]:
        impls = self.package.impls(self.op)
        return sorted(
            (impl.cost_of(query), i, impl)
            for i, impl in enumerate(impls)
            if self.matches(impl, query)
        )

    def choose(self, query: OpQuery) -> Implementation | None:
        ranked = self.ranked(query)
        return ranked[0][2] if ranked else None

    def explain(self, query: OpQuery) -> str:
        ranked = self.ranked(query)
        if not ranked:
            return "no implementation matches"
        impl = ranked[0][2]
        others = ", ".join(f"{i.name} ({i.cost_text(query)})" for _, _, i in ranked[1:])
        kind = (
            "generic"
            if impl.generic
            else "specialized for "
            + ", ".join(f"{k}={'/'.join(sorted(v))}" for k, v in impl.types.items())
        )
        text = f"{impl.name} ({kind}, cost {impl.cost_text(query)})"
        return text + (f"; also matching: {others}" if others else "")

    # -- the executor's view ------------------------------------------------

    def definition(self) -> OperationDef:
        op = self.op
        args = []
        for t in (*op.inputs, *op.params):
            accepted = frozenset(
                c for d in t.datatypes for c in nnapi_types(d, t.scalar, self.prefix)
            )
            args.append(Arg(t.name, accepted, optional=not t.mandatory))
        outs = tuple(
            Arg(
                t.name,
                frozenset(c for d in t.datatypes for c in nnapi_types(d, False, self.prefix)),
                optional=not t.mandatory,
            )
            for t in op.outputs
        )
        first = args[0].type if args else frozenset()
        return OperationDef(
            type=OpCode(self.code, self.label),  # type: ignore[arg-type]
            inputs=tuple(args),
            outputs=outs,
            types={t: HalVersion.V1_3 for t in first},  # type: ignore[union-attr]
            execute=self._bind,
            variadic=bool(op.inputs and op.inputs[0].repeated),
            variadic_outputs=bool(op.outputs[0].repeated),  # the only output (spec rule)
            pure=all(impl.pure for impl in self.package.impls(op)),
        )

    def _bind(self, ctx: OpContext) -> Any:
        query = OpQuery(type=self.code, inputs=tuple(ctx.inputs), outputs=tuple(ctx.outputs))
        impl = self.choose(query)
        if impl is None:
            raise ctx.fail("no kernel implementation matches these operand types")
        layout = self.layout(len(ctx.inputs))
        assert not isinstance(layout, str)
        fn = impl.fn
        if _takes_operands(fn):  # quantized kernels read scale / zeroPoint from here
            params_extra = {
                "operands": {"inputs": tuple(ctx.inputs), "outputs": tuple(ctx.outputs)}
            }
        else:
            params_extra = {}
        n_in = sum(1 for t, _ in layout if t.kind == "input")
        # Which NNAPI inputs reach the kernel as arguments (tensor-typed), as the compiler does.
        tensor_positions = [p for p, info in enumerate(ctx.inputs) if not _is_scalar(info.type)]
        params: dict[str, Any] = {}
        for p in self.op.params:
            if p.default is not None:
                params[p.name] = _default(p)
        scalar_values: dict[int, Any] = {}
        for pos, ((t, _), info) in enumerate(zip(layout, ctx.inputs)):
            if _is_scalar(info.type) and not info.omitted:
                scalar_values[pos] = ctx.scalar(pos)
                # a constant outside its Enumeration is refused by the support check; a
                # value that arrives only with the request is checked here, when it binds
                why = _outside_enumeration(scalar_values[pos], t.enum) if t.enum else None
                if why is not None:
                    raise ctx.fail(f"{t.kind} {t.name!r} (input {pos}) {why}")
        dtypes = [_dtype(info.type) for info in ctx.outputs]
        single = len(ctx.outputs) == 1
        # Where each argument comes from, decided once: the k-th tensor the executor
        # passes, or a value bound now (scalars; None when omitted); parameters by name.
        tensor_index = {p: k for k, p in enumerate(tensor_positions)}
        arg_plan: list[tuple[int, Any]] = []
        kw_fixed = dict(params, **params_extra)
        kw_tensor: list[tuple[str, int]] = []
        for pos in range(len(layout)):
            name = layout[pos][0].name
            k = tensor_index.get(pos, -1)
            if pos < n_in:
                arg_plan.append((k, scalar_values.get(pos)))
            elif k >= 0:
                kw_tensor.append((name, k))
            elif scalar_values.get(pos) is not None:
                kw_fixed[name] = scalar_values[pos]
        direct = not kw_tensor and [k for k, _ in arg_plan] == list(range(len(tensor_positions)))
        if self.runner is not None:  # op_package_isolation = "process": call a worker
            remote = self.runner.bind(fn, self.label, kw_fixed)
            if remote is not None:  # the worker keeps the fixed keywords; calls carry tensors
                fn, kw_fixed = remote, {}

        d0 = dtypes[0] if single else None
        ndarray = np.ndarray

        def finish(result: Any, tensors: tuple) -> Any:
            if (  # the common case, checked inline: one fresh array of the right type
                single
                and type(result) is ndarray
                and result.dtype == d0
                and result.base is None
                and result.flags.c_contiguous
            ):
                for t in tensors:
                    if result is t:
                        break
                else:
                    return result
            results = (result,) if single and not isinstance(result, tuple) else tuple(result)
            if len(results) != len(dtypes):
                raise ValueError(
                    f"kernel {impl.name} returned {len(results)} results for {len(dtypes)} outputs"
                )
            out = tuple(_fresh(r, d, tensors) for r, d in zip(results, dtypes))
            return out[0] if single else out

        if direct:

            def kernel(*tensors: Any) -> Any:
                return finish(fn(*tensors, **kw_fixed), tensors)

        else:

            def kernel(*tensors: Any) -> Any:
                args = [tensors[k] if k >= 0 else v for k, v in arg_plan]
                kw = dict(kw_fixed)
                for name, k in kw_tensor:
                    if tensors[k] is not None:  # an omitted optional tensor keeps its default
                        kw[name] = tensors[k]
                return finish(fn(*args, **kw), tensors)

        kernel.implementation = impl  # type: ignore[attr-defined]
        return kernel


def _fresh(r: Any, dtype: np.dtype | None, inputs: tuple) -> np.ndarray:
    """The kernel's result as a C-contiguous array of the output type that owns its data
    (the executor's contract: never one of the inputs or a view of one)."""
    if (
        type(r) is np.ndarray
        and (dtype is None or r.dtype == dtype)
        and r.flags.c_contiguous
        and r.base is None
        and not any(r is t for t in inputs)
    ):
        return r
    arr = np.asarray(r, dtype=dtype) if dtype is not None else np.asarray(r)
    return np.array(arr, order="C", copy=True)


def _takes_operands(fn: Any) -> bool:
    import inspect

    try:
        return "operands" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _is_scalar(code: int) -> bool:
    info = OPERAND_TYPE_INFO.get(code)
    return info is not None and info.is_scalar


def _dtype(code: int) -> np.dtype | None:
    info = OPERAND_TYPE_INFO.get(code)
    if info is not None and info.dtype is not None:
        return np.dtype(info.dtype)
    from nnhal.driver.op_packages.nnapi_types import extension_dtype

    return extension_dtype(code & 0xFFFF) if code > 0xFFFF else None


def _default(p: TensorSpec) -> Any:
    if p.scalar:
        return p.default
    return np.asarray(p.default)


def _is_default(value: Any, default: Any) -> bool:
    """A constant operand equal to the definition's Default."""
    if value is None or default is None:
        return False
    arr = np.asarray(value)
    return bool(np.array_equal(arr, np.asarray(default, dtype=arr.dtype)))


def _outside_enumeration(value: Any, names: tuple[str, ...]) -> str | None:
    """Why a constant parameter is not one of its Enumeration's values (None: it is)."""
    values = np.asarray(value).ravel()
    allowed = ", ".join(f"{i}={n}" for i, n in enumerate(names))
    for v in values.tolist():
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v < len(names):
            return f"is {v}; its Enumeration allows {allowed}"
    return None
