"""``nnhal oppkg test``: a package's kernels and support answers checked against its definition.

For every operation and every backend the definition names, hypothesis generates
cases from the definition: operand types (every datatype, Ascend dtype columns),
ranks, shapes, parameter values (every enumeration value, the default, omitted
optional parameters), constants where IsStaticTensor / OnlyDefaultSupported ask for
them; and some the definition forbids (a type it does not list, a wrong rank, an
enumeration value out of range, a non-default value where only the default is
supported, a missing mandatory parameter). Each case is a one-operation model.

The device (a ``Device`` with the package, kernels inline in this process) is
asked ``getSupportedOperations_1_3``; a case the definition allows must be
supported and one it forbids must not. Supported cases are prepared and run:
once on the device as it is (its cheapest matching implementation), and once per
implementation on a device whose package holds only that implementation. Every
implementation's outputs are compared with the reference's (the ``--reference``
module's function for the operation, else the operation's generic implementation,
run the same way) within a tolerance by output type (the conformance tolerances:
float32 1e-5 + 5 ulp, float16 / bfloat16 5 * 2^-10, quantized and INT_32 1, other
integers exact; integers are compared as integers, never through float64).

Reported per operation and implementation: cases, supported, agreed, worst
difference; and every disagreement (support answer vs definition, a supported case
that fails to run, an output outside the tolerance). The exit status is 1 when there
is any disagreement.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import traceback
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from nnhal.driver.op_packages.nnapi_types import EXTENSION, nnapi_types
from nnhal.driver.op_packages.runtime import Implementation, OpPackage
from nnhal.driver.op_packages.spec import OpSpec, TensorSpec

_RANKS = {"1D": 1, "2D": 2, "3D": 3, "4D": 4, "5D": 5}
_QUANT = {  # datatype -> (numpy dtype, zero points to draw from)
    "UFIXED_POINT_8": (np.uint8, (0, 128)),
    "SFIXED_POINT_8": (np.int8, (0, -10)),
    "UFIXED_POINT_16": (np.uint16, (0, 32768)),
    "SFIXED_POINT_16": (np.int16, (0,)),
}
_PLAIN = {
    "FLOAT_32": np.float32,
    "FLOAT_16": np.float16,
    "INT_32": np.int32,
    "BOOL_8": np.bool_,
    **{dt: np.dtype(d).type for dt, (_c, _s, d) in EXTENSION.items()},
}
#: NNAPI types a forbidden case may use for a tensor the definition does not allow them for
_OTHER_TYPES = ("FLOAT_32", "FLOAT_16", "INT_32", "UFIXED_POINT_8", "BOOL_8")
PREFIX = 7  # the extension prefix of every generated model


def tolerance(datatype: str, any_f16: bool) -> tuple[float, float]:
    """(atol, rtol) for an output of this datatype (the vector README's table)."""
    if datatype == "FLOAT_32":
        return (5 * 2**-10, 5 * 2**-10) if any_f16 else (1e-5, 5 * 2**-23)
    if datatype in ("FLOAT_16", "BFLOAT_16"):
        return 5 * 2**-10, 5 * 2**-10
    if datatype == "FLOAT_64":
        return 1e-9, 1e-9
    if datatype in _QUANT or datatype == "INT_32":
        return 1.0, 0.0
    return 0.0, 0.0


@dataclass
class Case:
    """One generated operation: its model, inputs, and what the definition says of it."""

    number: int
    text: str
    model: Any
    inputs: list[np.ndarray]
    forbidden: str | None  # why the definition forbids it (None = allowed)
    out_types: list[str]


@dataclass
class Row:
    cases: int = 0
    supported: int = 0
    agreed: int = 0
    compared: int = 0
    worst: float = 0.0


@dataclass
class OpReport:
    backend: str
    op: str
    reference: str
    cases: int = 0
    allowed: int = 0
    supported: int = 0
    rows: dict[str, Row] = field(default_factory=dict)
    disagreements: list[str] = field(default_factory=list)


# -- generation -------------------------------------------------------------------------


def _values(dt: str, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    if dt in _QUANT:
        d = np.dtype(_QUANT[dt][0])
        info = np.iinfo(d)
        return rng.integers(info.min, int(info.max) + 1, size=shape).astype(d)
    if dt == "BFLOAT_16":
        f = rng.uniform(-4, 4, size=shape).astype(np.float32)
        return (f.view(np.uint32) >> 16).astype(np.uint16)
    d = np.dtype(_PLAIN[dt])
    if d.kind == "f":
        return rng.uniform(-4, 4, size=shape).astype(d)
    if d.kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    lo = 0 if d.kind == "u" else -8
    return rng.integers(lo, 9, size=shape).astype(d)


def _value_list(p: TensorSpec) -> list[Any]:
    """The values an Ascend ``attr_<name>.value`` list allows (empty: any)."""
    from nnhal.driver.op_packages.spec import parse_default

    for c in p.constraints:
        if c.startswith("Value: one of "):
            return [parse_default(v) for v in c.removeprefix("Value: one of ").split(",") if v]
    return []


def _scalar_value(p: TensorSpec, dt: str, draw: Any, st: Any) -> Any:
    if p.enum:
        return draw(st.integers(0, len(p.enum) - 1))
    allowed = _value_list(p)
    if allowed:
        return draw(st.sampled_from(allowed))
    if p.default is not None and draw(st.booleans()):
        return p.default
    if dt in ("FLOAT_32", "FLOAT_16", "FLOAT_64"):
        return draw(st.sampled_from([0.5, 1.0, 1.5, 2.0, 3.0]))
    if dt == "BOOL_8":
        return draw(st.booleans())
    return draw(st.integers(0, 3))


def _constant(code: int, value: np.ndarray) -> Any:
    """A constant's value for ModelBuilder: an extension operand type has no numpy layout
    of its own in the HAL, so its data goes as the bytes of its element type."""
    return np.ascontiguousarray(value).tobytes() if code > 0xFFFF else value


def _type_code(dt: str, scalar: bool) -> int | None:
    codes = nnapi_types(dt, scalar, PREFIX)
    return next(iter(codes)) if codes else None


def _usable(dt: str, scalar: bool) -> bool:
    if _type_code(dt, scalar) is None:
        return False
    return not scalar or dt in ("FLOAT_32", "FLOAT_16", "INT_32", "UINT_32", "BOOL_8")


def generate_case(
    number: int, op: OpSpec, op_index: int, extension: str, only_default: frozenset[str],
    draw: Any, st: Any,
) -> Case | None:  # fmt: skip
    """One case for ``op`` (as one backend sees it), or None if nothing usable was drawn."""
    from nnhal.builder import ModelBuilder

    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kinds = ["allowed"] * 4 + ["type"]
    if any(t.rank in _RANKS for t in op.inputs):
        kinds.append("rank")
    if any(p.enum for p in op.params):
        kinds.append("enum")
    if any(p.name in only_default for p in op.params):
        kinds.append("only_default")
    if any(p.mandatory for p in op.params):
        kinds.append("missing")
    kind = draw(st.sampled_from(kinds))
    forbidden: str | None = None

    # datatypes: an Ascend dtype column, or a lead datatype shared where the lists allow
    tensors = [*op.inputs, *op.outputs]
    combos = op.metadata.get("combinations")
    chosen: dict[str, str] = {}
    if combos:
        column = draw(st.sampled_from(combos))
        chosen = {t.name: dt for t, dt in zip(tensors, column)}
    else:
        every = sorted({d for t in tensors for d in t.datatypes if _usable(d, False)})
        if not every:
            return None
        lead = draw(st.sampled_from(every))
        for t in tensors:
            usable = [d for d in t.datatypes if _usable(d, False)]
            if not usable:
                return None
            chosen[t.name] = lead if lead in usable else draw(st.sampled_from(usable))
    if any(not _usable(d, False) for d in chosen.values()):
        return None
    if kind == "type":
        t = draw(st.sampled_from(op.inputs))
        others = [d for d in _OTHER_TYPES if d not in t.datatypes]
        if not others:
            kind = "allowed"
        else:
            chosen[t.name] = draw(st.sampled_from(others))
            forbidden = f"input {t.name!r} of type {chosen[t.name]}, not one of {t.datatypes}"
    fixed = [t for t in op.inputs if t.rank in _RANKS]
    rank = _RANKS[fixed[0].rank] if fixed else draw(st.integers(1, 4))  # type: ignore[index]
    shape = tuple(draw(st.integers(1, 4)) for _ in range(rank))
    mb = ModelBuilder()
    mb.extension(extension, PREFIX)
    g = mb.main
    ins: list[int] = []
    arrays: list[np.ndarray] = []
    text: list[str] = []
    quant: dict[str, tuple[float, int]] = {}
    for i, t in enumerate(op.inputs):
        dt = chosen[t.name]
        tshape = shape
        if kind == "rank" and t is fixed[0]:
            tshape = shape + (1,)
            forbidden = f"input {t.name!r} of rank {len(tshape)}; the definition says {t.rank}"
        scale, zp = 0.0, 0
        if dt in _QUANT:
            scale = draw(st.sampled_from([0.02, 0.1, 0.5]))
            zp = draw(st.sampled_from(_QUANT[dt][1]))
            quant[t.name] = (scale, zp)
        code = _type_code(dt, False)
        value = _values(dt, tshape, rng)
        if t.static:
            ins.append(g.constant(code, _constant(code, value), tshape, scale, zp))
        else:
            ins.append(g.input(code, tshape, scale, zp))
            arrays.append(value)
        text.append(f"{t.name} {dt}{list(tshape)}" + (f" scale {scale} zp {zp}" if scale else ""))
    n_params = len(op.params)
    if kind == "missing":
        last = max(k for k, p in enumerate(op.params) if p.mandatory)
        n_params = last
        forbidden = f"mandatory parameter {op.params[last].name!r} left off"
    else:
        # trailing optional parameters may be left off (their defaults apply)
        while n_params and not op.params[n_params - 1].mandatory and draw(st.booleans()):
            n_params -= 1
    for p in op.params[:n_params]:
        usable = [d for d in p.datatypes if _usable(d, p.scalar)]
        if not usable:
            return None
        dt = draw(st.sampled_from(usable))
        code = _type_code(dt, p.scalar)
        if p.scalar:
            value = _scalar_value(p, dt, draw, st)
            if p.name in only_default:
                value = p.default
                if kind == "only_default":
                    value = p.default + 1 if not isinstance(p.default, bool) else not p.default
                    forbidden = f"{p.name}={value!r}; the backend supports only the Default"
            if kind == "enum" and p.enum and forbidden is None:
                value = len(p.enum) + draw(st.integers(0, 5))
                forbidden = f"{p.name}={value} outside its Enumeration {list(p.enum)}"
            if dt == "BOOL_8":
                value = bool(value)
            ins.append(g.constant(code, _constant(code, np.asarray(value, _PLAIN[dt]))
                                  if code > 0xFFFF else value))  # fmt: skip
            text.append(f"{p.name}={value!r}")
        else:
            dims = (draw(st.integers(1, 3)),) * max(1, _RANKS.get(p.rank or "", 1))
            if p.default is not None and isinstance(p.default, list):
                value = np.asarray(p.default, dtype=_PLAIN.get(dt, np.float32))
            elif p.enum:  # every element one of the Enumeration's values
                value = rng.integers(0, len(p.enum), size=dims).astype(_PLAIN[dt])
            else:
                value = _values(dt, dims, rng)
            ins.append(g.constant(code, _constant(code, value), value.shape))
            text.append(f"{p.name}={value.tolist()!r}")
    outs = []
    out_types = []
    for t in op.outputs:
        dt = chosen[t.name]
        scale, zp = next(iter(quant.values()), (0.0, 0)) if dt in _QUANT else (0.0, 0)
        if dt in _QUANT and not scale:
            scale, zp = 0.1, _QUANT[dt][1][0]
        outs.append(g.output(_type_code(dt, False), [0] * rank, scale, zp))
        out_types.append(dt)
        text.append(f"-> {t.name} {dt}")
    g.operation((PREFIX << 16) | op_index, ins, outs)
    return Case(number, "; ".join(text), mb.build(), arrays, forbidden, out_types)


# -- running ---------------------------------------------------------------------------


def _device(package: OpPackage, backend: str) -> Any:
    from nnhal.driver.device import Device
    from nnhal.driver.profile import load_profile

    # kernels inline: the same kernels and binding, without a worker pool per device
    profile = replace(load_profile(None), op_package_isolation="inline")
    return Device(profile, op_packages=[package], package_backend=backend)


def _plain_device() -> Any:
    from nnhal.driver.device import Device

    return Device()


def _builtin(op: OpSpec) -> Any:
    """The NNAPI operation a UseDefaultTranslation operation overrides, or None."""
    from nnhal.types import OperationType

    if not op.use_default_translation:
        return None
    norm = op.name.replace("_", "").lower()
    return next((t for t in OperationType if t.name.replace("_", "").lower() == norm), None)


def _as_builtin(case: Case, builtin: Any) -> Case:
    """The case's model with the built-in operation in place of the custom one."""
    model = case.model
    (op,) = model.main.operations
    main = replace(model.main, operations=(replace(op, type=int(builtin)),))
    return replace(case, model=replace(model, main=main, extensionNameToPrefix=()))


def _only(package: OpPackage, op: OpSpec, impl: Implementation) -> OpPackage:
    return replace(package, implementations={**package.implementations, op.name: [impl]})


def _run(device: Any, case: Case) -> tuple[list[np.ndarray] | None, str]:
    try:
        prepared = device.prepareModel_1_3(case.model)
        out = prepared.compiled.run(list(case.inputs))
        return [np.asarray(o) for o in out], ""
    except Exception as exc:  # noqa: BLE001 - any failure of a kernel is a finding
        status = getattr(getattr(exc, "status", None), "name", type(exc).__name__)
        return None, f"{status}: {getattr(exc, 'message', None) or exc}"


def _as_numbers(a: np.ndarray, b: np.ndarray, dt: str) -> tuple[np.ndarray, np.ndarray]:
    """Both outputs in one type their difference is exact in: integers as Python ints
    (float64 cannot tell n from n + 1 beyond 2**53, and INT_64 / UINT_64 go far beyond),
    floating point in float64."""
    if dt == "BFLOAT_16":  # bit patterns in uint16
        return tuple((v.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
                     for v in (a, b))  # type: ignore[return-value]  # fmt: skip
    if a.dtype.kind in "iu" and b.dtype.kind in "iu":
        return a.astype(object), b.astype(object)
    return a.astype(np.float64), b.astype(np.float64)


def compare(got: list[np.ndarray], want: list[np.ndarray], types: list[str], any_f16: bool
            ) -> tuple[bool, float, str]:  # fmt: skip
    """(within tolerance, worst absolute difference, what differs)."""
    worst = 0.0
    for k, (a, b, dt) in enumerate(zip(got, want, types)):
        if a.shape != b.shape:
            return False, float("inf"), f"output {k} shape {list(a.shape)} != {list(b.shape)}"
        x, y = _as_numbers(a, b, dt)
        atol, rtol = tolerance(dt, any_f16)
        if x.dtype == object:
            # (numpy gives a 0-d object array's arithmetic back as a plain int)
            diff = np.asarray(np.abs(x - y), dtype=object)
            bad = np.asarray(diff > atol + rtol * np.abs(y), dtype=bool)
            show = int
        else:
            both_nan = np.isnan(x) & np.isnan(y)
            diff = np.where(both_nan, 0.0, np.abs(x - y))
            diff = np.where(np.isnan(diff), np.inf, diff)
            bad = diff > atol + rtol * np.abs(y)
            show = float
        if diff.size:
            worst = max(worst, float(diff.max()))
        if bad.any():
            i = tuple(int(v) for v in np.argwhere(bad)[0])
            return False, worst, (
                f"output {k} at {list(i)}: {show(x[i])!r} vs reference {show(y[i])!r} "
                f"(tolerance atol {atol:g} + rtol {rtol:g})"
            )
    return True, worst, ""


def _takes_operands(fn: Any) -> bool:
    import inspect

    try:
        return "operands" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _reference_of(module: Any, op: OpSpec) -> Any:
    for name in (op.module_name, op.name, op.metadata.get("op_interface")):
        fn = getattr(module, name, None) if name else None
        if callable(fn):
            return fn
    refs = getattr(module, "REFERENCES", None)
    return refs.get(op.name) if isinstance(refs, dict) else None


def load_reference(ref: str) -> Any:
    if ref.endswith(".py") or Path(ref).is_file():
        spec = importlib.util.spec_from_file_location("nnhal_oppkg_reference", ref)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import {ref}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    return importlib.import_module(ref)


def test_operation(
    package: OpPackage, backend: str, op_index: int, reference: Any, examples: int, seed: int
) -> OpReport:
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as hseed
    from hypothesis import strategies as st

    spec = package.spec
    op_def = spec.ops[op_index]
    resolved = spec.resolved(backend).ops[op_index]
    only_default = spec.only_default(backend, op_def.name)
    impls = package.impls(op_def)
    ref_fn = _reference_of(reference, op_def) if reference is not None else None
    if ref_fn is not None:
        ref_impl: Implementation | None = Implementation(fn=ref_fn, name="reference")
        ref_name = f"--reference {getattr(ref_fn, '__module__', '')}.{ref_fn.__name__}"
    else:
        ref_impl = next((i for i in impls if i.generic), None)
        ref_name = f"generic implementation {ref_impl.name}" if ref_impl else "none"
    builtin = _builtin(op_def) if ref_impl is None else None
    if builtin is not None:  # a UseDefaultTranslation override: the built-in kernel
        ref_name = f"built-in {builtin.name} (the operation it overrides)"
    ref_takes_operands = builtin is not None or (
        ref_impl is not None and _takes_operands(ref_impl.fn)
    )
    report = OpReport(backend, op_def.name, ref_name)
    runs, why_not = spec.runs_on(backend, op_def)
    if not runs:
        report.reference = f"not run on this backend ({why_not})"
        return report
    if not impls and builtin is None:
        # nothing can run: one finding, not one per generated case
        notes = "; ".join(package.notes) or "none registered"
        report.reference = "not run (no kernel implementation)"
        report.disagreements.append(
            f"{op_def.name} on {backend}: the definition offers it, but package "
            f"{spec.package_name!r} has no kernel implementation of it ({notes}): "
            "getSupportedOperations can never say supported"
        )
        return report
    device = _device(package, backend)
    one = {i.name: _device(_only(package, op_def, i), backend) for i in impls}
    ref_device = _device(_only(package, op_def, ref_impl), backend) if ref_impl else None
    if builtin is not None:
        ref_device = _plain_device()
    for i in impls:
        report.rows[i.name] = Row()
    counter = [0]

    @hseed(seed)
    @settings(max_examples=examples, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(st.data())
    def body(data: Any) -> None:
        counter[0] += 1
        case = generate_case(counter[0], resolved, op_index, spec.extension_name, only_default,
                             data.draw, st)  # fmt: skip
        if case is None:
            return
        report.cases += 1
        where = f"{op_def.name} on {backend}, case {case.number} ({case.text})"
        try:
            supported, reasons = device.explainSupportedOperations(case.model)
        except Exception as exc:  # noqa: BLE001
            supported, reasons = [False], {0: f"{type(exc).__name__}: {exc}"}
        ok = bool(supported[0])
        if case.forbidden is not None:
            if ok:
                report.disagreements.append(
                    f"{where}: the definition forbids it ({case.forbidden}) but "
                    "getSupportedOperations says supported"
                )
            return
        report.allowed += 1
        if not ok:
            report.disagreements.append(
                f"{where}: the definition allows it but getSupportedOperations says "
                f"unsupported: {next(iter(reasons.values()), '')}"
            )
            return
        report.supported += 1
        _, failure = _run(device, case)
        if failure:
            report.disagreements.append(f"{where}: supported, but running it failed: {failure}")
        want = None
        quantized = any(dt in _QUANT for dt in case.out_types)
        if ref_device is not None and not (quantized and not ref_takes_operands):
            # (a reference without operands= cannot see scale / zeroPoint: it is no
            # reference for quantized outputs, and those cases are run but not compared)
            want, _ = _run(ref_device, case if builtin is None else _as_builtin(case, builtin))
        any_f16 = "FLOAT_16" in str(case.text)
        for impl in impls:
            row = report.rows[impl.name]
            row.cases += 1
            dev = one[impl.name]
            if not dev.getSupportedOperations_1_3(case.model)[0]:
                continue  # this implementation's types do not cover the case
            row.supported += 1
            got, failure = _run(dev, case)
            if failure:
                report.disagreements.append(
                    f"{where}: implementation {impl.name} failed: {failure}"
                )
                continue
            if want is None or impl is ref_impl:
                continue
            row.compared += 1
            same, worst, what = compare(got, want, case.out_types, any_f16)
            row.worst = max(row.worst, worst)
            if same:
                row.agreed += 1
            else:
                report.disagreements.append(
                    f"{where}: implementation {impl.name} differs from the reference: {what}"
                )

    body()
    return report


def _backends(package: OpPackage, chosen: list[str] | None) -> list[str]:
    if chosen:
        return chosen
    names = [b.name for b in package.spec.backends]
    names += [b for op in package.spec.ops for b in op.supported_backends]
    return list(dict.fromkeys(names)) or ["CPU"]


def format_report(reports: list[OpReport]) -> list[str]:
    lines = []
    for r in reports:
        lines.append(
            f"{r.op} on {r.backend}: {r.cases} cases ({r.allowed} allowed by the definition, "
            f"{r.supported} supported); reference: {r.reference}"
        )
        for name, row in r.rows.items():
            agreed = (
                "is the reference" if row.compared == 0 and row.supported and
                r.reference.endswith(f" {name}") else f"{row.agreed}/{row.compared} agreed"
            )  # fmt: skip
            lines.append(
                f"    {name:<24} cases {row.cases:>4}  supported {row.supported:>4}  "
                f"{agreed:<18} worst difference {row.worst:.3g}"
            )
        for d in r.disagreements:
            lines.append(f"    DISAGREEMENT: {d}")
    return lines


#: why ``nnhal oppkg test`` cannot run, and how to make it (exit status 1)
MISSING_HYPOTHESIS = (
    "needs hypothesis, which is not installed: pip install 'nnhal[oppkg]' (or pip install "
    "hypothesis)"
)


def run_package_test(
    path: str, reference: str | None = None, examples: int = 40, seed: int = 0,
    backends: list[str] | None = None, out: Any = None,
) -> int:  # fmt: skip
    """``nnhal oppkg test``: 0 when every answer and output agrees, 1 otherwise (also when
    hypothesis, the ``oppkg`` extra, is missing), 2 on bad use."""
    from nnhal.driver.op_packages.discovery import load_path
    from nnhal.driver.op_packages.spec import ConfigError

    out = out or sys.stdout
    prog = "nnhal oppkg test"
    try:
        import hypothesis  # noqa: F401
    except ImportError:  # an optional dependency: the `oppkg` extra (pyproject.toml)
        print(f"{prog}: error: {MISSING_HYPOTHESIS}", file=sys.stderr)
        return 1
    if examples < 1:
        print(f"{prog}: error: --examples must be >= 1", file=sys.stderr)
        return 2
    try:
        packages = load_path(path)
        module = load_reference(reference) if reference else None
    except ConfigError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # noqa: BLE001 - a broken kernel or reference module
        tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
        print(f"{prog}: error: {tb}", file=sys.stderr)
        return 2
    failures = 0
    print(f"{prog} {path}: seed {seed}, {examples} examples per operation and backend", file=out)
    for package in packages:
        for note in package.notes:
            print(f"note: {note}", file=out)
        reports = []
        for backend in _backends(package, backends):
            for k in range(len(package.spec.ops)):
                reports.append(test_operation(package, backend, k, module, examples, seed))
        for line in format_report(reports):
            print(line, file=out)
        failures += sum(len(r.disagreements) for r in reports)
    print(f"{failures} disagreement(s)", file=out)
    return 1 if failures else 0
