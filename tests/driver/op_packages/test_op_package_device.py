"""Op packages on the device: vendor extensions, support answers, kernels, costs, rules."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
from nnhal.driver.backends.explain import explain_model
from nnhal.driver.device import Device
from nnhal.driver.op_packages.discovery import discover, load_path
from nnhal.driver.profile import builtin_profiles, load_profile
from nnhal.driver.service import create_server
from repo_paths import REPO_ROOT

from nnhal.builder import ModelBuilder
from nnhal.client import connect
from nnhal.errors import InvalidArgument
from nnhal.types import LOOP_TIMEOUT_MAXIMUM_NS
from nnhal.types import OperandType as T
from nnhal.types import OperationType as Op

ROOT = REPO_ROOT
EXAMPLES = ROOT / "examples"
_spec = importlib.util.spec_from_file_location("while_models", EXAMPLES / "while_models.py")
wm = importlib.util.module_from_spec(_spec)
sys.modules["while_models"] = wm
_spec.loader.exec_module(wm)

SOFT_CLIP = "com.example.soft_clip_package"
#: the HAL's longest loop timeout: a loop around a kernel in a worker process that is still
#: starting must not time out on a slow machine
LOOP_LIMIT = LOOP_TIMEOUT_MAXIMUM_NS


def packages(name: str):
    config = EXAMPLES / name / wm.EXAMPLES[name][0]
    return load_path(config)


@pytest.fixture(scope="module")
def xml_pkgs():
    return packages("qnn_xml")


def soft_clip_model(
    type_: int = T.TENSOR_FLOAT32, limit: float | None = 1.0, op: int = 0, extra_input=False
):
    mb = ModelBuilder()
    mb.extension(SOFT_CLIP, 7)
    g = mb.main
    x = g.input(type_, [2, 3])
    y = g.output(type_, [2, 3])
    ins = [x]
    if limit is not None:
        ins.append(g.constant(T.FLOAT32, limit))
    if extra_input:
        ins.append(g.constant(T.FLOAT32, 0.0))
    g.operation((7 << 16) | op, ins, [y])
    return mb.build()


def test_supported_extensions(xml_pkgs) -> None:
    assert Device().getSupportedExtensions() == ()
    (ext,) = Device(op_packages=xml_pkgs).getSupportedExtensions()
    assert ext.name == SOFT_CLIP and ext.operandTypes == ()


@pytest.mark.parametrize("name", sorted(wm.EXAMPLES))
def test_example_while_model_runs_over_grpc(name: str) -> None:
    device = Device(op_packages=packages(name))
    server, address = create_server(device, "127.0.0.1:0")
    try:
        client = connect(address)
        model = wm.model(name)
        assert client.getSupportedOperations_1_3(model) == [True]
        assert [e.name for e in client.getSupportedExtensions()] == [wm.EXAMPLES[name][1]]
        prepared = client.prepareModel_1_3(model)
        result = prepared.execute([wm.X0, np.array([wm.N], np.int32)], loop_timeout_ns=LOOP_LIMIT)
        x, i = wm.expected(name)
        np.testing.assert_allclose(result.outputs[0], x, rtol=1e-6)
        np.testing.assert_array_equal(result.outputs[1], i)
    finally:
        server.stop(None)


def test_two_package_backends_answer_differently(xml_pkgs) -> None:
    """HTP's SupplementalOpDef allows FLOAT_16/UFIXED_POINT_8 only; CPU's FLOAT_32/FLOAT_16."""
    cpu = Device(op_packages=xml_pkgs, package_backend="CPU")
    htp = Device(op_packages=xml_pkgs, package_backend="HTP")
    f32 = soft_clip_model(T.TENSOR_FLOAT32)
    assert cpu.getSupportedOperations_1_3(f32) == [True]
    ok, reasons = htp.explainSupportedOperations(f32)
    assert ok == [False]
    assert reasons[0] == (
        f"operation 0 (SoftClip ({SOFT_CLIP})): input 0 (x) has type TENSOR_FLOAT32; the "
        "definition on backend HTP allows TENSOR_FLOAT16, TENSOR_QUANT8_ASYMM "
        "(FLOAT_16/UFIXED_POINT_8)"
    )
    f16 = soft_clip_model(T.TENSOR_FLOAT16)
    assert cpu.getSupportedOperations_1_3(f16) == [True]
    assert htp.getSupportedOperations_1_3(f16) == [True]
    # OnlyDefaultSupported on HTP: limit must be the Default 1.0
    ok, reasons = htp.explainSupportedOperations(soft_clip_model(T.TENSOR_FLOAT16, limit=2.0))
    assert ok == [False] and "supports only the Default 1.0 (OnlyDefaultSupported)" in reasons[0]
    assert cpu.getSupportedOperations_1_3(soft_clip_model(T.TENSOR_FLOAT16, limit=2.0)) == [True]
    # SupportedOps: HTP does not list AddSoftClip
    mb = ModelBuilder()
    mb.extension(SOFT_CLIP, 7)
    g = mb.main
    a, b = g.input(T.TENSOR_FLOAT32, [2]), g.input(T.TENSOR_FLOAT32, [2])
    g.operation((7 << 16) | 1, [a, b], [g.output(T.TENSOR_FLOAT32, [2])])
    _, reasons = htp.explainSupportedOperations(mb.build())
    assert "does not list AddSoftClip in SupportedOps" in reasons[0]


def test_support_reasons_and_invalid_codes(xml_pkgs) -> None:
    device = Device(op_packages=xml_pkgs)
    # the optional trailing parameter may be left off; one operand too many is unsupported
    assert device.getSupportedOperations_1_3(soft_clip_model(limit=None)) == [True]
    ok, reasons = device.explainSupportedOperations(soft_clip_model(extra_input=True))
    assert ok == [False]
    assert "expected 1 to 2 inputs (x, limit), got 3" in reasons[0]
    # As in Android, a model naming extension operations the device lacks is valid: they
    # are unsupported, with the reason (and prepare refuses them); only an undeclared
    # prefix makes the model invalid.
    mb = ModelBuilder()
    mb.extension("com.other.thing", 7)
    g = mb.main
    x = g.input(T.TENSOR_FLOAT32, [1])
    g.operation(7 << 16, [x], [g.output(T.TENSOR_FLOAT32, [1])])
    other = mb.build()
    for dev, model, why in (
        (device, soft_clip_model(op=9), "has no operation 9 (it has 0 = SoftClip"),
        (device, other, "'com.other.thing' is not supported by this device"),
        (Device(), soft_clip_model(), "this device supports no vendor extensions"),
    ):
        supported, reasons = dev.explainSupportedOperations(model)
        assert supported == [False] and why in reasons[0], reasons
        with pytest.raises(InvalidArgument, match="does not support"):
            dev.prepareModel_1_3(model)
    undeclared = ModelBuilder()
    g = undeclared.main
    x = g.input(T.TENSOR_FLOAT32, [1])
    g.operation(9 << 16, [x], [g.output(T.TENSOR_FLOAT32, [1])])
    with pytest.raises(InvalidArgument, match="0x0009 is not declared in Model.extensionNameToPrefix"):
        device.getSupportedOperations_1_3(undeclared.build())


def test_custom_op_unsupported_inside_while_reports_path(xml_pkgs) -> None:
    htp = Device(op_packages=xml_pkgs, package_backend="HTP")
    ok, reasons = htp.explainSupportedOperations(wm.model("qnn_xml"))
    assert ok == [False]
    assert reasons[0].startswith(
        "operation 0 (WHILE) -> body subgraph 2, operation 1 (SoftClip "
        f"({SOFT_CLIP})): input 0 (x) has type TENSOR_FLOAT32"
    )
    with pytest.raises(InvalidArgument, match="body subgraph 2, operation 1"):
        htp.prepareModel_1_3(wm.model("qnn_xml"))


def test_cheapest_matching_implementation(xml_pkgs) -> None:
    device = Device(op_packages=xml_pkgs)
    x = np.linspace(-3, 3, 6, dtype=np.float32).reshape(2, 3)
    for type_, dtype, chosen in (
        (T.TENSOR_FLOAT16, np.float16, "soft_clip_f16 (specialized for x=FLOAT_16, cost FAST)"),
        (T.TENSOR_FLOAT32, np.float32, "soft_clip (generic, cost GLACIAL)"),
    ):
        model = soft_clip_model(type_, limit=2.0)
        text = "\n".join(explain_model(device, model))
        assert chosen in text
        prepared = device.prepareModel_1_3(model)
        (out,) = prepared.compiled.run([x.astype(dtype)])
        assert out.dtype == dtype
        np.testing.assert_allclose(out, 2 * np.tanh(x / 2), rtol=2e-3)


def test_use_default_translation_overrides_builtin(xml_pkgs) -> None:
    mb = ModelBuilder()
    g = mb.main
    x = g.input(T.TENSOR_FLOAT32, [4])
    g.operation(Op.RELU, [x], [g.output(T.TENSOR_FLOAT32, [4])])
    model = mb.build()
    device = Device(op_packages=xml_pkgs)
    text = "\n".join(explain_model(device, model))
    assert "operation 0 RELU: op-package SoftClipPackage: relu (specialized for x=FLOAT_32" in text
    assert "overrides the built-in kernel" in text
    step = device.prepareModel_1_3(model).compiled.plans[0].steps[0]
    assert step.kernel.implementation.name == "relu"
    x = np.array([-1, 0, 2, -3], np.float32)
    (out,) = device.prepareModel_1_3(model).compiled.run([x])
    np.testing.assert_array_equal(out, [0, 0, 2, 0])
    assert "reference: built-in kernel" in "\n".join(explain_model(Device(), model))


def test_fusion_rule_applied_at_prepare(xml_pkgs) -> None:
    device = Device(op_packages=xml_pkgs)
    lines = explain_model(device, wm.model("qnn_xml"))
    text = "\n".join(lines)
    assert "rule 'fuse ADD + SoftClip' (priority 2000): subgraph 2, operations [0, 1]" in text
    assert "operation 0 AddSoftClip" in text
    prepared = device.prepareModel_1_3(wm.model("qnn_xml"))
    names = [s.name for s in prepared.compiled.plans[2].steps]
    assert names == ["SoftClipPackage.AddSoftClip", "ADD"]
    out = prepared.compiled.run([wm.X0, np.array([wm.N], np.int32)], loop_timeout_ns=LOOP_LIMIT)
    np.testing.assert_allclose(out[0], wm.expected("qnn_xml")[0], rtol=1e-6)


def test_broken_packages_are_skipped_with_source(tmp_path: Path) -> None:
    cfg = tmp_path / "pkg.xml"
    cfg.write_text((EXAMPLES / "qnn_xml" / "soft_clip.xml").read_text())
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "soft_clip.py").write_text("raise RuntimeError('boom')\n")
    bad_cfg = ROOT / "tests" / "data" / "op_packages" / "invalid" / "bad_rank.xml"
    good = EXAMPLES / "snpe_json" / "scale_shift.json"
    found, skipped = discover([cfg, bad_cfg, tmp_path / "missing", good], entry_points=False)
    assert [p.name for p in found] == ["udo.scale_shift_package"]
    assert [s.source for s in skipped] == [str(cfg), str(bad_cfg), str(tmp_path / "missing")]
    assert "RuntimeError: boom" in skipped[0].error
    assert ":8: " in skipped[1].error and "does not exist" in skipped[2].error


def test_kernel_failure_is_general_failure(tmp_path: Path) -> None:
    cfg = tmp_path / "pkg.json"
    cfg.write_text((EXAMPLES / "snpe_json" / "scale_shift.json").read_text())
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "scale_shift.py").write_text(
        "def execute(x, *, scale, shift=0.0):\n    raise ValueError('bad value')\n"
    )
    device = Device(op_packages=load_path(cfg))
    prepared = device.prepareModel_1_3(wm.model("snpe_json"))
    from nnhal.errors import HalError

    with pytest.raises(HalError, match="bad value"):
        prepared.compiled.run([wm.X0, np.array([wm.N], np.int32)], loop_timeout_ns=LOOP_LIMIT)


def _sum_model(n: int, type_: int = T.TENSOR_FLOAT32):
    mb = ModelBuilder()
    mb.extension("ascend.concat_sum", 1)
    g = mb.main
    xs = [g.input(type_, [3]) for _ in range(n)]
    g.operation(1 << 16, xs, [g.output(type_, [3])])
    return mb.build()


def test_dynamic_format_repeated_input_and_cost_function() -> None:
    config = ROOT / "tests" / "data" / "op_packages" / "dynamic" / "concat_sum.ini"
    (package,) = load_path(config)
    op = package.spec.op("ConcatSum")
    assert op.inputs[0].datatypes == ("FLOAT_32", "INT_32")  # from op_select_format
    assert op.metadata["combinations"] == [["FLOAT_32", "FLOAT_32"], ["INT_32", "INT_32"]]
    device = Device(op_packages=[package])
    for n, chosen in ((2, "concat_sum_pair"), (3, "concat_sum")):
        model = _sum_model(n)
        text = "\n".join(explain_model(device, model))
        assert f"{chosen} (generic, cost " in text
        xs = [np.full(3, k + 1, np.float32) for k in range(n)]
        (out,) = device.prepareModel_1_3(model).compiled.run(xs)
        np.testing.assert_array_equal(out, np.full(3, n * (n + 1) / 2, np.float32))
    assert "two_inputs_free() = 0.0" in "\n".join(explain_model(device, _sum_model(2)))
    ok, reasons = device.explainSupportedOperations(_sum_model(2, T.TENSOR_FLOAT16))
    assert ok == [False] and "has type TENSOR_FLOAT16" in reasons[0]


def test_dynamic_format_without_op_select_format_is_skipped(tmp_path: Path) -> None:
    config = ROOT / "tests" / "data" / "op_packages" / "dynamic" / "concat_sum.ini"
    shutil.copy(config, tmp_path / "c.ini")
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "concat_sum_impl.py").write_text("def concat_sum(*xs):\n    pass\n")
    found, skipped = discover([tmp_path / "c.ini"], entry_points=False)
    assert not found
    assert "dynamicFormat.flag: true, but the kernel module defines no op_select_format()" in (
        skipped[0].error
    )


def test_quantized_kernel_reads_scale_and_zero_point(xml_pkgs) -> None:
    mb = ModelBuilder()
    mb.extension(SOFT_CLIP, 7)
    g = mb.main
    x = g.input(T.TENSOR_QUANT8_ASYMM, [4], scale=0.05, zero_point=128)
    y = g.output(T.TENSOR_QUANT8_ASYMM, [4], scale=1 / 128, zero_point=128)
    g.operation(7 << 16, [x, g.constant(T.FLOAT32, 1.0)], [y])
    model = mb.build()
    htp = Device(op_packages=xml_pkgs, package_backend="HTP")
    assert Device(op_packages=xml_pkgs).getSupportedOperations_1_3(model) == [False]  # CPU: no u8
    assert "soft_clip_u8 (specialized for x=UFIXED_POINT_8, cost FAST)" in "\n".join(
        explain_model(htp, model)
    )
    q = np.array([28, 128, 148, 255], np.uint8)
    (out,) = htp.prepareModel_1_3(model).compiled.run([q])
    real = np.tanh((q.astype(np.float32) - 128) * 0.05)
    np.testing.assert_array_equal(out, np.clip(np.round(real * 128) + 128, 0, 255))


def test_rule_not_applied_when_the_replacement_is_unsupported(xml_pkgs) -> None:
    """HTP's SupportedOps lists SoftClip only: ADD + SoftClip (float16) stays as it is."""
    mb = ModelBuilder()
    mb.extension(SOFT_CLIP, 7)
    g = mb.main
    a, b = g.input(T.TENSOR_FLOAT16, [3]), g.input(T.TENSOR_FLOAT16, [3])
    t = g.temporary(T.TENSOR_FLOAT16, [3])
    g.operation(Op.ADD, [a, b, g.constant(T.INT32, 0)], [t])
    g.operation(7 << 16, [t, g.constant(T.FLOAT32, 1.0)], [g.output(T.TENSOR_FLOAT16, [3])])
    model = mb.build()
    htp = Device(op_packages=xml_pkgs, package_backend="HTP")
    text = "\n".join(explain_model(htp, model))
    assert "not applied, the replacement is unsupported: backend 'HTP'" in text
    assert "operation 1 SoftClip" in text
    prepared = htp.prepareModel_1_3(model)
    assert [s.name for s in prepared.compiled.plans[0].steps] == ["ADD", "SoftClipPackage.SoftClip"]
    x = np.array([0.5, -2, 3], np.float16)
    (out,) = prepared.compiled.run([x, x])
    np.testing.assert_allclose(out, np.tanh(2 * x.astype(np.float32)), rtol=2e-3)
    # on CPU, AddSoftClip is FLOAT_32 only: not fused either, for its own reason
    text = "\n".join(explain_model(Device(op_packages=xml_pkgs), model))
    assert "input 0 (a) has type TENSOR_FLOAT16; the definition on backend CPU allows" in text


class _OemBackend:
    """A backend plug-in running OEM_OPERATION as 'double the input'."""

    name = "oem-doubler"

    def supports(self, query):
        if query.type != Op.OEM_OPERATION:
            return False, "only OEM_OPERATION"
        if query.inputs[0].type != T.TENSOR_FLOAT32:
            return False, "float32 only"
        return True, ""

    def definition(self, op_type):
        from nnhal.driver.ops.registry import Arg, OperationDef

        from nnhal.types import HalVersion

        if op_type != Op.OEM_OPERATION:
            return None
        return OperationDef(
            type=Op.OEM_OPERATION,
            inputs=(Arg("x"),),
            outputs=(Arg("y"),),
            types={T.TENSOR_FLOAT32: HalVersion.V1_0},
            execute=lambda ctx: lambda x: x * 2,
        )


def test_backend_plugin_runs_what_the_reference_declines() -> None:
    mb = ModelBuilder()
    g = mb.main
    x = g.input(T.TENSOR_FLOAT32, [2])
    g.operation(Op.OEM_OPERATION, [x], [g.output(T.TENSOR_FLOAT32, [2])])
    model = mb.build()
    ok, reasons = Device().explainSupportedOperations(model)
    assert ok == [False]
    device = Device(op_packages=[_OemBackend()])
    assert device.getSupportedOperations_1_3(model) == [True]
    assert "operation 0 OEM_OPERATION: plug-in oem-doubler" in "\n".join(
        explain_model(device, model)
    )
    (out,) = device.prepareModel_1_3(model).compiled.run([np.array([1.5, -2], np.float32)])
    np.testing.assert_array_equal(out, [3, -4])
    mb = ModelBuilder()
    g = mb.main
    x = g.input(T.TENSOR_INT32, [2])
    g.operation(Op.OEM_OPERATION, [x], [g.output(T.TENSOR_INT32, [2])])
    ok, reasons = device.explainSupportedOperations(mb.build())
    assert ok == [False] and "backend oem-doubler: float32 only" in reasons[0]


def test_kernel_results_are_fresh_arrays_of_the_output_type(tmp_path: Path) -> None:
    cfg = tmp_path / "pkg.json"
    cfg.write_text((EXAMPLES / "snpe_json" / "scale_shift.json").read_text())
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "scale_shift.py").write_text(
        "def execute(x, *, scale, shift=0.0):\n    return x if scale > 0 else (x[:, ::-1] * 2).tolist()\n"
    )
    device = Device(op_packages=load_path(cfg))
    prepared = device.prepareModel_1_3(wm.model("snpe_json"))
    kernel = prepared.compiled.plans[2].steps[0].kernel
    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    out = kernel(x)
    assert out is not x and out.base is None and out.dtype == np.float32
    np.testing.assert_array_equal(out, x)


def test_compile_with_extensions_helper(xml_pkgs) -> None:
    from nnhal.driver.executor.operands import map_model_pools
    from nnhal.driver.extensions import compile_with_extensions, fingerprint

    device = Device(op_packages=xml_pkgs)
    model = wm.model("qnn_xml")
    compiled = compile_with_extensions(device.extensions, model, map_model_pools(model))
    assert [s.name for s in compiled.plans[2].steps] == ["SoftClipPackage.AddSoftClip", "ADD"]
    assert fingerprint(device.extensions).startswith(f"backend=CPU;{SOFT_CLIP}@1.0:")
    assert fingerprint(Device().extensions) == ""


def test_repeated_output() -> None:
    (package,) = load_path(ROOT / "tests" / "data" / "op_packages" / "split" / "split.xml")
    device = Device(op_packages=[package])
    mb = ModelBuilder()
    mb.extension("org.test.split_package", 2)
    g = mb.main
    x = g.input(T.TENSOR_FLOAT32, [3, 2])
    outs = [g.output(T.TENSOR_FLOAT32, [1, 2]) for _ in range(3)]
    g.operation(2 << 16, [x], outs)
    model = mb.build()
    assert device.getSupportedOperations_1_3(model) == [True]
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    got = device.prepareModel_1_3(model).compiled.run([x])
    for k in range(3):
        np.testing.assert_array_equal(got[k], x[k : k + 1])


def test_extension_listed_only_when_every_operation_runs_on_the_backend():
    """hal13 6.2: getSupportedExtensions lists an extension only when all of it is supported."""
    packages = load_path(EXAMPLES / "qnn_xml" / "soft_clip.xml")
    spec = packages[0].spec
    for backend in ("CPU", "HTP"):
        every_op = all(spec.runs_on(backend, op)[0] for op in spec.ops)
        names = [e.name for e in Device(op_packages=packages, package_backend=backend)
                 .getSupportedExtensions()]  # fmt: skip
        assert (spec.extension_name in names) == every_op, backend
    assert all(spec.runs_on("CPU", op)[0] for op in spec.ops)
    assert not all(spec.runs_on("HTP", op)[0] for op in spec.ops)


@pytest.mark.parametrize("profile", builtin_profiles())
def test_package_operations_are_supported_under_every_builtin_profile(xml_pkgs, profile) -> None:
    """The profile's rules (sample-driver first_input_types and include_operations, the
    exclude and operand-type lists) are about the HAL's own operations: a package's
    operation is decided by its definition, under every profile, and runs."""
    device = Device(load_profile(profile), op_packages=xml_pkgs)
    model = soft_clip_model()
    supported, reasons = device.explainSupportedOperations(model)
    assert supported == [True], reasons
    prepared = device.prepareModel_1_3(model)
    x = np.array([[-2, -0.5, 0], [0.5, 2, 3]], np.float32)
    (out,) = prepared.compiled.run([x])
    np.testing.assert_allclose(out, np.tanh(x), rtol=1e-6)


@pytest.mark.parametrize("profile", ["nnapi-sample_quant", "nnapi-sample_minimal"])
def test_profile_rules_still_refuse_builtin_operations_beside_a_package(xml_pkgs, profile) -> None:
    """The same profiles keep refusing the HAL operations their rules exclude (MUL on
    float32: not in minimal's include_operations, not a quant first input)."""
    mb = ModelBuilder()
    g = mb.main
    a, b = g.input(T.TENSOR_FLOAT32, [2]), g.input(T.TENSOR_FLOAT32, [2])
    y = g.output(T.TENSOR_FLOAT32, [2])
    g.operation(Op.MUL, [a, b, g.constant(T.INT32, 0)], [y])
    device = Device(load_profile(profile), op_packages=xml_pkgs)
    supported, reasons = device.explainSupportedOperations(mb.build())
    assert supported == [False]
    assert f"profile {profile!r}" in reasons[0]


def test_package_kernels_declare_purity(xml_pkgs, monkeypatch) -> None:
    """@implementation(pure=False) on any implementation makes the operation impure for
    the executor (never hoisted out of a loop); the default is pure."""
    from dataclasses import replace as dc_replace

    from nnhal.driver.extensions import ExtensionSet
    from nnhal.driver.op_packages.runtime import implementation

    model = soft_clip_model()
    code = model.main.operations[0].type
    ext = ExtensionSet(xml_pkgs, "CPU").for_model(model)
    assert ext.operation(code).definition().pure
    package = ext.operation(code).package
    name = ext.operation(code).op.name
    impls = package.implementations[name]
    monkeypatch.setitem(
        package.implementations, name, [impls[0], dc_replace(impls[-1], pure=False)]
    )
    assert not ExtensionSet(xml_pkgs, "CPU").for_model(model).operation(code).definition().pure
    assert implementation(pure=False)(lambda x: x)._nnhal_impl.pure is False
