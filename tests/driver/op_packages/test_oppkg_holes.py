"""Regression tests: op-package definitions that used to be accepted although invalid,
vendor keys that used to be refused although valid, rules checked at load, extension
operand types through model files, generated docstrings and `validate`'s ok line."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import numpy as np
import pytest
from nnhal.driver.device import Device
from nnhal.driver.op_packages import load_config
from nnhal.driver.op_packages.discovery import discover, load_path
from nnhal.driver.op_packages.generator import kernel_source
from nnhal.driver.op_packages.spec import ConfigError
from nnhal.tools.cli import main

from nnhal.builder import ModelBuilder
from nnhal.types import OperandType as T


def _xml(body: str, supplements: str = "", name: str = "Pkg") -> str:
    return textwrap.dedent(
        f"""\
        <?xml version="1.0" encoding="UTF-8"?>
        <OpDefCollection PackageName="{name}" Domain="org.test" Version="1.0">
          <OpDefList>
            <OpDef>
              <Name>MyOp</Name>
              <Input><Name>x</Name><Datatype>QNN_DATATYPE_FLOAT_32</Datatype></Input>
              <Output><Name>y</Name><Datatype>QNN_DATATYPE_FLOAT_32</Datatype></Output>
        {body}
            </OpDef>
          </OpDefList>
        {supplements}
        </OpDefCollection>
        """
    )


def _param(datatype: str, default: str, rank: str = "SCALAR", enum: str = "") -> str:
    enum_xml = f"<Enumeration>{enum}</Enumeration>" if enum else ""
    return (
        f"      <Parameter><Name>mode</Name><Mandatory>false</Mandatory>\n"
        f"        <Datatype>{datatype}</Datatype><Shape><Rank>{rank}</Rank></Shape>\n"
        f"        <Default>{default}</Default>{enum_xml}</Parameter>"
    )


def _refused(tmp_path: Path, name: str, text: str | bytes) -> ConfigError:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value).startswith(f"{path}:{info.value.line}: "), str(info.value)
    assert info.value.line is not None
    return info.value


# -- definitions that must be refused -------------------------------------------------


def test_backend_specific_without_supplemental_list_refused(tmp_path: Path) -> None:
    text = _xml("").replace(
        "<Input><Name>x</Name><Datatype>QNN_DATATYPE_FLOAT_32</Datatype>",
        "<Input><Name>x</Name><Datatype>BACKEND_SPECIFIC</Datatype>",
    )
    err = _refused(tmp_path, "bs.xml", text)
    assert err.line == 6 and err.element == "MyOp input 'x'"
    assert "BACKEND_SPECIFIC needs a SupplementalOpDefList" in err.detail


def test_backend_specific_backend_without_list_refused(tmp_path: Path) -> None:
    text = _xml(
        "      <SupportedBackend>CPU</SupportedBackend><SupportedBackend>HTP</SupportedBackend>",
        """<SupplementalOpDefList Backend="CPU"><SupplementalOpDef><Name>MyOp</Name>
          <Input><Name>x</Name><Datatype>QNN_DATATYPE_FLOAT_32</Datatype></Input>
          </SupplementalOpDef></SupplementalOpDefList>""",
    ).replace(
        "<Input><Name>x</Name><Datatype>QNN_DATATYPE_FLOAT_32</Datatype></Input>\n      <Out",
        "<Input><Name>x</Name><Datatype>BACKEND_SPECIFIC</Datatype></Input>\n      <Out",
        1,
    )
    err = _refused(tmp_path, "bs2.xml", text)
    assert "there is none for HTP" in err.detail


LAYOUT_SUPPLEMENT = """<SupplementalOpDefList Backend="CPU"><SupplementalOpDef><Name>MyOp</Name>
          <Input><Name>x</Name>{shape}</Input>
          </SupplementalOpDef></SupplementalOpDefList>"""


@pytest.mark.parametrize(
    ("supplement", "fragment"),
    [
        ("", ("Layout BACKEND_SPECIFIC needs a SupplementalOpDefList giving it a Layout, but "
              "there is none for any backend")),
        (LAYOUT_SUPPLEMENT.format(shape=""),
         "Layout BACKEND_SPECIFIC but backend CPU gives no SupplementalOpDef Layout for it"),
    ],
)  # fmt: skip
def test_backend_specific_layout_needs_a_supplement(
    tmp_path: Path, supplement: str, fragment: str
) -> None:
    """The seed: a BACKEND_SPECIFIC Layout "must be used in conjunction with a
    SupplementalOpDef to specify a concrete layout", as a BACKEND_SPECIFIC Datatype."""
    shape = "<Shape><Rank>4D</Rank><Layout>BACKEND_SPECIFIC</Layout></Shape>"

    def config(supplement: str) -> str:
        return _xml("", supplement).replace(
            "<Input><Name>x</Name><Datatype>QNN_DATATYPE_FLOAT_32</Datatype></Input>",
            f"<Input><Name>x</Name><Datatype>QNN_DATATYPE_FLOAT_32</Datatype>{shape}</Input>",
            1,
        )

    err = _refused(tmp_path, "layout.xml", config(supplement))
    assert err.line == 6 and err.element == "MyOp input 'x'"
    assert fragment in err.detail
    # a supplement giving the layout resolves it
    good = tmp_path / "layout_ok.xml"
    good.write_text(config(LAYOUT_SUPPLEMENT.format(shape="<Shape><Layout>NHWC</Layout></Shape>")))
    (spec,) = load_config(good)
    assert spec.resolved("CPU").op("MyOp").inputs[0].layout == "NHWC"


@pytest.mark.parametrize(
    ("param", "fragment"),
    [
        (_param("QNN_DATATYPE_UINT_32", "7", enum="<Enum>a</Enum><Enum>b</Enum>"),
         "Default 7 is not in the Enumeration"),
        (_param("QNN_DATATYPE_UINT_32", "-1", enum="<Enum>a</Enum><Enum>b</Enum>"),
         "Default -1 is not in the Enumeration"),
        (_param("QNN_DATATYPE_INT_32", "1.5"), "Default value 1.5 is not a INT_32 value"),
        (_param("QNN_DATATYPE_UINT_8", "300"), "Default value 300 is not a UINT_8 value"),
        (_param("QNN_DATATYPE_BOOL_8", "2"), "Default value 2 is not a BOOL_8 value"),
        (_param("QNN_DATATYPE_FLOAT_32", "fast"), "Default 'fast' is not a number"),
        (_param("QNN_DATATYPE_FLOAT_32", "[1.0, 2.0]"), "is a list; the Rank is SCALAR"),
        (_param("QNN_DATATYPE_INT_32", "[[1, 2], [3, 4]]", rank="1D"),
         "nested 2 deep; Rank 1D needs 1"),
    ],
)  # fmt: skip
def test_default_checked_against_enum_datatype_rank(
    tmp_path: Path, param: str, fragment: str
) -> None:
    err = _refused(tmp_path, "d.xml", _xml(param))
    assert err.element == "MyOp param 'mode'" and err.line == 8
    assert fragment in err.detail


def test_good_defaults_still_load(tmp_path: Path) -> None:
    for param in (
        _param("QNN_DATATYPE_UINT_32", "1", enum="<Enum>a</Enum><Enum>b</Enum>"),
        _param("QNN_DATATYPE_UINT_32", "b", enum="<Enum>a</Enum><Enum>b</Enum>"),
        _param("QNN_DATATYPE_FLOAT_32", "2"),
        _param("QNN_DATATYPE_BOOL_8", "true"),
        _param("QNN_DATATYPE_INT_32", "[1, 2]", rank="1D"),
    ):
        path = tmp_path / "ok.xml"
        path.write_text(_xml(param))
        (spec,) = load_config(path)
        assert spec.ops[0].params[0].default is not None


def test_snpe_per_core_core_missing_from_core_types(tmp_path: Path) -> None:
    text = textwrap.dedent(
        """\
        {"UdoPackage_0": {"UDO_PACKAGE_NAME": "P", "Operators": [{
          "type": "Op",
          "core_types": ["CPU"],
          "inputs": [{"name": "x",
                      "per_core_data_types": {"CPU": "FLOAT_32", "DSP": "FIXED_8"}}],
          "outputs": [{"name": "y", "data_type": "FLOAT_32"}]
        }]}}
        """
    )
    err = _refused(tmp_path, "p.json", text)
    assert err.line == 5
    assert "core 'DSP' is not in the operator's core_types (CPU)" in err.detail


INI = """\
[MyOp]
input0.name=x
input0.dtype=float16,float
output0.name=y
output0.dtype=float16,float
attr.list=mode
attr_mode.type=int
attr_mode.value=1,3,5
attr_mode.paramType=optional
attr_mode.defaultValue={default}
"""


def test_ini_default_outside_value_list(tmp_path: Path) -> None:
    err = _refused(tmp_path, "ops.ini", INI.format(default=4))
    assert err.line == 10 and err.element == "[MyOp] attr_mode.defaultValue"
    assert "4 is not in attr_mode.value (1,3,5)" in err.detail
    path = tmp_path / "ok.ini"
    path.write_text(INI.format(default=3))
    (spec,) = load_config(path)
    assert spec.ops[0].params[0].default == 3


def test_non_utf8_ini_and_json_refused_with_line(tmp_path: Path) -> None:
    ini = INI.format(default=3).replace("output0.name=y", "output0.name=y\xe9").encode("latin-1")
    err = _refused(tmp_path, "latin.ini", ini)
    assert err.line == 4 and "not UTF-8 (byte e9" in err.detail
    js = b'{\n "UdoPackage_0": {\n  "UDO_PACKAGE_NAME": "P\xff"}}'
    err = _refused(tmp_path, "latin.json", js)
    assert err.line == 3 and "not UTF-8 (byte ff" in err.detail


# -- vendor keys that must be accepted -----------------------------------------------


def test_ascend_keys_accepted_with_meaning(tmp_path: Path) -> None:
    path = tmp_path / "more_ops.ini"
    path.write_text(
        textwrap.dedent(
            """\
            [PadIt]
            input0.name=x
            input0.dtype=bfloat16,float
            output0.name=y
            output0.dtype=bfloat16,float
            attr.list=pads
            attr_pads.type=listListInt
            dynamicShapeSupport.flag=true
            dynamicRankSupport.flag=false
            jitCompile.flag=true
            """
        )
    )
    (spec,) = load_config(path)
    op = spec.ops[0]
    assert op.inputs[0].datatypes == ("BFLOAT_16", "FLOAT_32")
    pads = op.params[0]
    assert (pads.rank, pads.datatypes, pads.scalar) == ("2D", ("INT_32",), False)
    assert op.metadata["dynamicShapeSupport"] is True
    assert op.metadata["dynamicRankSupport"] is False
    (ext,) = Device(op_packages=[p for p in load_path(path)]).getSupportedExtensions()
    assert (10, True, 2) in {(t.type, t.isTensor, t.byteSize) for t in ext.operandTypes}
    bad = tmp_path / "bad_flag.ini"
    bad.write_text(path.read_text().replace("jitCompile.flag=true", "jitCompile.flag=maybe"))
    err = _refused(tmp_path, "bad_flag.ini", bad.read_bytes())
    assert err.line == 10 and "'maybe' is not true/false" in err.detail


ASCEND_SEED_KEYS = """\
[AllKeys]
input0.name=x
input0.paramType=required
input0.dtype=float16,float
input0.format=ND,ND
input0.reshapeType=NC
input0.shape=all
input1.name=b
input1.paramType=optional
input1.dtype=float16,float
input1.format=ND,ND
output0.name=y
output0.paramType=required
output0.dtype=float16,float
output0.format=ND,ND
output0.shape=all
attr.list=alpha
attr_alpha.type=float
attr_alpha.value=all
attr_alpha.paramType=optional
attr_alpha.defaultValue=1.0
opFile.value=all_keys_impl
opInterface.value=all_keys_entry
op.pattern=broadcast
dynamicFormat.flag=false
precision_reduce.flag=true
heavyOp=false
"""


def test_every_key_of_the_ascend_seed_loads(tmp_path: Path) -> None:
    """Each key the Ascend op-info seed documents is accepted, its meaning applied or kept
    as metadata (docs/op-packages.md says which)."""
    path = tmp_path / "all_keys.ini"
    path.write_text(ASCEND_SEED_KEYS)
    (spec,) = load_config(path)
    (op,) = spec.ops
    x, b = op.inputs
    assert (x.name, x.mandatory, x.datatypes, x.layout) == ("x", True, ("FLOAT_16", "FLOAT_32"), "ND")
    assert (b.name, b.mandatory) == ("b", False)
    (alpha,) = op.params
    assert (alpha.name, alpha.scalar, alpha.mandatory, alpha.default) == ("alpha", True, False, 1.0)
    assert op.module_name == "all_keys_impl"  # opFile.value: the kernel module's name
    meta = op.metadata
    assert meta["combinations"] == [["FLOAT_16"] * 3, ["FLOAT_32"] * 3]  # dtype columns
    assert (meta["op_interface"], meta["pattern"]) == ("all_keys_entry", "broadcast")
    assert (meta["dynamic_format"], meta["precision_reduce"], meta["heavyOp"]) == (
        False, True, False)  # fmt: skip
    assert meta["tensors"]["x"] == {"reshapeType": "NC", "shape": "all", "format": "ND,ND"}


# -- rules checked at load -------------------------------------------------------------


RULE_XML = _xml("").replace("MyOp", "Scale")


def _package_with_rule(tmp_path: Path, rule: str) -> Path:
    config = tmp_path / "rules.xml"
    config.write_text(RULE_XML.replace('PackageName="Pkg"', 'PackageName="RulePkg"'))
    kernels = tmp_path / "kernels"
    kernels.mkdir(exist_ok=True)
    (kernels / "scale.py").write_text(
        textwrap.dedent(
            f"""\
            from nnhal.driver.op_packages.rules import EARLY, Rule
            from nnhal.driver.op_packages.runtime import implementation


            @implementation()
            def scale(x):
                return x * 2


            RULES = [
                Rule(name="r", priority=EARLY, pattern=("RELU", ("Scale", "x")),
                     replacement={rule})
            ]
            """
        )
    )
    return config


@pytest.mark.parametrize(
    ("replacement", "fragment"),
    [
        ('("Scale", ("RELU", "x"))', "replacement argument ('RELU', 'x') is a nested pattern"),
        ('("OtherPkg::MyScale", "x")', "names package 'OtherPkg'; a rule may name NNAPI"),
        ('("Scale", "z")', "replacement variable 'z' is not bound by the pattern"),
        ('("NoSuchOp", "x")', "'NoSuchOp' is neither an NNAPI operation nor one of package"),
        # a cross-package name in the pattern (HTP syntax): refused, not silently unmatched
        ("CROSS", ("pattern operation 'OtherPkg::MyScale' names package 'OtherPkg'; a rule "
                   "may name NNAPI operations and operations of its own package 'RulePkg' only")),
    ],
)  # fmt: skip
def test_bad_rules_refused_when_the_package_loads(
    tmp_path: Path, replacement: str, fragment: str
) -> None:
    cross = replacement == "CROSS"
    config = _package_with_rule(tmp_path, '("Scale", "x")' if cross else replacement)
    if cross:
        kernel = tmp_path / "kernels" / "scale.py"
        kernel.write_text(kernel.read_text().replace('("Scale", "x")),', '("OtherPkg::MyScale", "x")),'))
    with pytest.raises(ConfigError) as info:
        load_path(config)
    assert str(info.value).startswith(f"{tmp_path / 'kernels' / 'scale.py'}:10: RULES: ")
    assert fragment in str(info.value)
    packages, skipped = discover([config], entry_points=False)
    assert packages == [] and fragment in skipped[0].error


def test_own_package_prefix_in_rules_resolves(tmp_path: Path) -> None:
    config = _package_with_rule(tmp_path, '("RulePkg::Scale", "x")')
    (package,) = load_path(config)
    assert len(package.rules) == 1


# -- generated docstrings, validate --------------------------------------------------


def test_generated_docstring_names_extension_types(tmp_path: Path) -> None:
    path = tmp_path / "i64.xml"
    path.write_text(
        _xml("").replace(
            "<Output><Name>y</Name><Datatype>QNN_DATATYPE_FLOAT_32",
            "<Output><Name>y</Name><Datatype>QNN_DATATYPE_INT_64",
        )
    )
    (spec,) = load_config(path)
    text = kernel_source(spec, spec.ops[0], None)
    assert "y: INT_64 -> extension INT_64" in text
    assert "x: FLOAT_32 -> TENSOR_FLOAT32" in text


def test_validate_ok_line_does_not_list_operations(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    ops = "".join(
        f"<OpDef><Name>Op{i}</Name>"
        "<Input><Name>x</Name><Datatype>QNN_DATATYPE_FLOAT_32</Datatype></Input>"
        "<Output><Name>y</Name><Datatype>QNN_DATATYPE_FLOAT_32</Datatype></Output></OpDef>"
        for i in range(500)
    )
    path = tmp_path / "big.xml"
    path.write_text(
        '<OpDefCollection PackageName="Big" Domain="org.test">'
        f"<OpDefList>{ops}</OpDefList></OpDefCollection>"
    )
    assert main(["oppkg", "validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert out == f"{path}: ok: extension org.test.big (500 operations; backends -)\n"


# -- the device: enumeration values and extension operand types ------------------------

ENUM_PKG = "org.test.pkg"


def _enum_package(tmp_path: Path):
    config = tmp_path / "enum.xml"
    config.write_text(
        _xml(_param("QNN_DATATYPE_INT_32", "0", enum="<Enum>lo</Enum><Enum>hi</Enum>"))
    )
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "my_op.py").write_text(
        "from nnhal.driver.op_packages.runtime import implementation\n\n\n"
        "@implementation()\ndef my_op(x, *, mode=0):\n    return x * (mode + 1)\n"
    )
    return load_path(config)


def _enum_model(mode: int):
    mb = ModelBuilder()
    mb.extension(ENUM_PKG, 3)
    g = mb.main
    x = g.input(T.TENSOR_FLOAT32, [2])
    y = g.output(T.TENSOR_FLOAT32, [2])
    g.operation((3 << 16) | 0, [x, g.constant(T.INT32, mode)], [y])
    return mb.build()


def test_enumeration_value_in_range_supported(tmp_path: Path) -> None:
    device = Device(op_packages=_enum_package(tmp_path))
    assert device.getSupportedOperations_1_3(_enum_model(1)) == [True]


def test_enumeration_value_out_of_range_unsupported(tmp_path: Path) -> None:
    device = Device(op_packages=_enum_package(tmp_path))
    supported, reasons = device.explainSupportedOperations(_enum_model(7))
    assert supported == [False]
    assert "is 7; its Enumeration allows 0=" in reasons[0]


def test_enumeration_value_given_at_execution_is_checked(tmp_path: Path) -> None:
    """A parameter that is a model input is supported (its value is not known yet); a value
    outside the Enumeration fails that execution naming the operation, the parameter and
    the values, and an allowed one runs."""
    from nnhal.driver.service import create_server

    from nnhal.client import connect
    from nnhal.errors import GeneralFailure

    mb = ModelBuilder()
    mb.extension(ENUM_PKG, 3)
    g = mb.main
    x, mode = g.input(T.TENSOR_FLOAT32, [2]), g.input(T.INT32, [])
    y = g.output(T.TENSOR_FLOAT32, [2])
    g.operation((3 << 16) | 0, [x, mode], [y])
    model = mb.build()
    device = Device(op_packages=_enum_package(tmp_path))
    assert device.getSupportedOperations_1_3(model) == [True]
    server, address = create_server(device, "127.0.0.1:0")
    client = connect(address)
    try:
        prepared = client.prepareModel_1_3(model)
        ones = np.ones(2, np.float32)
        with pytest.raises(GeneralFailure) as info:
            prepared.execute([ones, np.int32(7)])
        assert "Pkg.MyOp (subgraph 0, operation 0): param 'mode' (input 1) is 7; its " \
            "Enumeration allows 0=lo, 1=hi (value given at execution time)" in str(info.value)
        assert prepared.execute([ones, np.int32(1)]).outputs[0].tolist() == [2.0, 2.0]
    finally:
        client.close()
        server.stop(None)
        device.close()


def _two_op_package(tmp_path: Path):
    """Op 0 (INT_64 output, an extension type) on CPU; op 1 only on HTP."""
    config = tmp_path / "i64.xml"
    config.write_text(
        textwrap.dedent(
            """\
            <OpDefCollection PackageName="Wide" Domain="org.test">
              <OpDefList>
                <OpDef><Name>Widen</Name>
                  <Input><Name>x</Name><Datatype>QNN_DATATYPE_INT_32</Datatype></Input>
                  <Output><Name>y</Name><Datatype>QNN_DATATYPE_INT_64</Datatype></Output>
                </OpDef>
                <OpDef><Name>HtpOnly</Name>
                  <Input><Name>x</Name><Datatype>QNN_DATATYPE_INT_32</Datatype></Input>
                  <Output><Name>y</Name><Datatype>QNN_DATATYPE_INT_32</Datatype></Output>
                  <SupportedBackend>HTP</SupportedBackend>
                </OpDef>
              </OpDefList>
            </OpDefCollection>
            """
        )
    )
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "widen.py").write_text(
        "import numpy as np\nfrom nnhal.driver.op_packages.runtime import implementation\n\n\n"
        "@implementation()\ndef widen(x):\n    return x.astype(np.int64) * 3_000_000_000\n"
    )
    (tmp_path / "kernels" / "htp_only.py").write_text(
        "from nnhal.driver.op_packages.runtime import implementation\n\n\n"
        "@implementation()\ndef htp_only(x):\n    return x\n"
    )
    return load_path(config)


def _widen_model():
    mb = ModelBuilder()
    mb.extension("org.test.wide", 5)
    g = mb.main
    x = g.input(T.TENSOR_INT32, [3])
    y = g.output((5 << 16) | 0, [3])
    g.operation((5 << 16) | 0, [x], [y])
    return mb.build()


def test_extension_output_runs_when_every_op_is_supported(tmp_path: Path) -> None:
    device = Device(op_packages=_two_op_package(tmp_path), package_backend="HTP")
    assert device.getSupportedOperations_1_3(_widen_model()) == [True]


def test_extension_output_accepted_when_another_op_is_unsupported(tmp_path: Path) -> None:
    device = Device(op_packages=_two_op_package(tmp_path), package_backend="CPU")
    assert device.getSupportedOperations_1_3(_widen_model()) == [True]


def test_extension_typed_operands_round_trip_through_vectors(tmp_path: Path) -> None:
    from nnhal.vectors import TestModel, load_vectors, save_vectors

    x = np.array([1, -2, 3], np.int32)
    expected = x.astype(np.int64) * 3_000_000_000
    path = tmp_path / "wide.json"
    test = TestModel(name="wide", model=_widen_model(), inputs=[x], expected=[expected],
                     expected_shapes=[(3,)], output_types=[5 << 16], ignored=[False])  # fmt: skip
    save_vectors(path, [test])
    (loaded,) = load_vectors(path)
    assert loaded.expected[0].dtype == np.int64
    np.testing.assert_array_equal(loaded.expected[0], expected)
    assert loaded.model.main.operands[1].type == (5 << 16)


def test_own_package_prefix_rule_fires(tmp_path: Path) -> None:
    from nnhal.driver.extensions import ExtensionSet
    from nnhal.driver.op_packages.rules import apply_rules

    from nnhal.types import OperationType

    config = _package_with_rule(tmp_path, '("RulePkg::Scale", "x")')
    (package,) = load_path(config)
    mb = ModelBuilder()
    mb.extension("org.test.rule_pkg", 4)
    g = mb.main
    x = g.input(T.TENSOR_FLOAT32, [2])
    t = g.temporary(T.TENSOR_FLOAT32, [2])
    y = g.output(T.TENSOR_FLOAT32, [2])
    g.operation((4 << 16) | 0, [x], [t])
    g.operation(OperationType.RELU, [t], [y])
    model, log = apply_rules(mb.build(), package.rules, ExtensionSet([package], "CPU"))
    assert [op.type for op in model.main.operations] == [(4 << 16) | 0]
    assert log == ["rule 'r' (priority 2000): subgraph 0, operations [0, 1] -> RulePkg::Scale"]


def test_extension_output_runs_on_the_device(tmp_path: Path) -> None:
    """The driver computes an extension-typed (INT_64) output in its element type."""
    device = Device(op_packages=_two_op_package(tmp_path), package_backend="HTP")
    x = np.array([1, -2, 3], np.int32)
    (out,) = device.prepareModel_1_3(_widen_model()).compiled.run([x])
    np.testing.assert_array_equal(out, x.astype(np.int64) * 3_000_000_000)


@pytest.fixture
def wide_server(tmp_path: Path):
    """A server whose device runs the INT_64-output package on HTP (all of it supported, so
    getSupportedExtensions lists its operand types), and a client connected to it."""
    from nnhal.driver.service import create_server

    from nnhal.client import connect

    device = Device(op_packages=_two_op_package(tmp_path), package_backend="HTP")
    server, address = create_server(device, "127.0.0.1:0")
    client = connect(address)
    try:
        yield client
    finally:
        client.close()
        server.stop(None)
        device.close()


WIDE_X = np.array([1, -2, 2_000_000_000], np.int32)
# beyond int32, and the last beyond 2**53 (where float64 no longer tells n from n + 1)
WIDE_Y = WIDE_X.astype(np.int64) * 3_000_000_000


@pytest.mark.parametrize("path", ["sync", "async", "shared", "burst", "fenced"])
def test_client_returns_extension_typed_outputs(wide_server, path: str) -> None:
    prepared = wide_server.prepareModel_1_3(_widen_model())
    dtypes = [np.int64]
    if path == "burst":
        with prepared.burst() as burst:
            (out,) = burst.execute([WIDE_X], output_dtypes=dtypes).outputs
    elif path == "fenced":
        (out,), _ = prepared.execute_fenced([WIDE_X], output_dtypes=dtypes)
    else:
        out = prepared.execute(
            [WIDE_X],
            output_dtypes=dtypes,
            memory="shared" if path == "shared" else "inline",
            synchronous=path != "async",
        ).outputs[0]
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, WIDE_Y)


@pytest.mark.parametrize(
    ("dtypes", "fragment"),
    [
        (None, "has no numpy layout: pass output_dtypes=[...] with its element dtype at index 0"),
        ([np.int32], ("8 byte(s) per element as the device lists it (getSupportedExtensions); "
                      "output_dtypes[0] int32 has 4")),
        (["no-such-type"], "output_dtypes[0]: 'no-such-type' is not a numpy dtype"),
        ([object], "output_dtypes[0]: object is not a fixed-size number type"),
        ([np.int64, np.int64], "the model has 1 outputs; output_dtypes has 2 entries"),
        ("int64", "output_dtypes is not a sequence"),
    ],
)  # fmt: skip
def test_client_refuses_a_bad_output_dtype_request(wide_server, dtypes, fragment: str) -> None:
    prepared = wide_server.prepareModel_1_3(_widen_model())
    with pytest.raises(ValueError) as info:
        prepared.execute([WIDE_X], output_dtypes=dtypes)
    assert fragment in str(info.value)
    # the device is untouched by a refused request: the right one still runs
    np.testing.assert_array_equal(
        prepared.execute([WIDE_X], output_dtypes=[np.int64]).outputs[0], WIDE_Y
    )


def test_client_refuses_a_dtype_for_an_nnapi_output(wide_server) -> None:
    mb = ModelBuilder()
    g = mb.main
    a, b = g.input(T.TENSOR_FLOAT32, [2]), g.input(T.TENSOR_FLOAT32, [2])
    y = g.output(T.TENSOR_FLOAT32, [2])
    g.operation(0, [a, b, g.constant(T.INT32, 0)], [y])  # ADD
    prepared = wide_server.prepareModel_1_3(mb.build())
    x = np.ones(2, np.float32)
    with pytest.raises(ValueError, match=r"is TENSOR_FLOAT32, read as float32; "
                       r"output_dtypes\[0\] asks for float64"):  # fmt: skip
        prepared.execute([x, x], output_dtypes=[np.float64])
    assert prepared.execute([x, x], output_dtypes=[None]).outputs[0].tolist() == [2.0, 2.0]


def test_partly_supported_package_runs_extension_outputs_over_grpc(tmp_path: Path) -> None:
    """On the CPU backend the package's HTP-only operation is unsupported, so the package
    is not listed by getSupportedExtensions; its INT_64 output is still accepted for the
    supported operation: prepared and run over gRPC, read with output_dtypes (the client
    checks only the dtype itself then), and a too-small dtype is refused by the device."""
    from nnhal.driver.service import create_server

    from nnhal.client import connect
    from nnhal.errors import OutputInsufficientSize

    device = Device(op_packages=_two_op_package(tmp_path), package_backend="CPU")
    server, address = create_server(device, "127.0.0.1:0")
    client = connect(address)
    try:
        assert list(client.getSupportedExtensions()) == []
        assert client.getSupportedOperations_1_3(_widen_model()) == [True]
        prepared = client.prepareModel_1_3(_widen_model())
        for memory in ("inline", "shared"):
            out = prepared.execute([WIDE_X], output_dtypes=[np.int64], memory=memory).outputs[0]
            assert out.dtype == np.int64
            np.testing.assert_array_equal(out, WIDE_Y)
        with pytest.raises(OutputInsufficientSize, match="needs 24 bytes for dimensions"):
            prepared.execute([WIDE_X], output_dtypes=[np.int32])
    finally:
        client.close()
        server.stop(None)
        device.close()


def test_vectors_run_extension_typed_outputs(tmp_path: Path) -> None:
    """A model file with an INT_64 output runs through `nnhal vectors` (the vector runner
    passes the expected value's dtype), and a result off by one fails it, also beyond
    2**53."""
    from nnhal.tools.local import local_device

    from nnhal.vector_runner import run_test_model
    from nnhal.vectors import TestModel, load_vectors, save_vectors

    packages = _two_op_package(tmp_path)
    path = tmp_path / "wide.json"
    tests = [
        TestModel(name=name, model=_widen_model(), inputs=[WIDE_X], expected=[y],
                  expected_shapes=[(3,)], output_types=[5 << 16], ignored=[False])
        for name, y in (("right", WIDE_Y), ("wrong", WIDE_Y + [0, 0, 1]))
    ]  # fmt: skip
    save_vectors(path, tests)
    right, wrong = load_vectors(path)
    with local_device(None, op_packages=packages, package_backend="HTP") as dev:
        assert run_test_model(dev, right).result == "passed"
        failed = run_test_model(dev, wrong)
    assert failed.result == "failed", failed
    assert "1 of 3 elements outside exact; worst at [2]: expected 6000000000000000001, got " \
        "6000000000000000000" in failed.error


def test_cts_takes_op_packages_and_extension_typed_outputs(tmp_path: Path, capsys) -> None:
    """`nnhal cts` without --target loads --op-package for its in-process driver; a model
    file with an INT_64 output passes its vectors family; the request layout of the other
    families (cts.paths.layout) reads that output as int64."""
    from nnhal.cts.paths import layout

    from nnhal.vectors import TestModel, load_vectors, save_vectors

    _two_op_package(tmp_path)
    path = tmp_path / "wide.json"
    save_vectors(path, [TestModel(name="wide", model=_widen_model(), inputs=[WIDE_X],
                                  expected=[WIDE_Y], expected_shapes=[(3,)],
                                  output_types=[5 << 16], ignored=[False])])  # fmt: skip
    args = ["cts", "--families", "vectors", "--vectors", str(path), "--no-corpus"]
    config = ["--op-package", str(tmp_path / "i64.xml"), "--package-backend", "HTP"]
    assert main([*args, *config, "--", "-q"]) == 0
    summary = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.match(r"1 passed(, \d+ warnings?)? in ", summary), summary
    assert main([*args, "--", "-q"]) == 0  # without the package: the device lacks the extension
    summary = capsys.readouterr().out.strip().splitlines()[-1]
    assert re.match(r"1 skipped(, \d+ warnings?)? in ", summary), summary
    (test,) = load_vectors(path)
    plan = layout(test, outputs="specified")
    try:
        assert plan is not None
        ((_, dims, dtype, size, _),) = plan.outputs
        assert (dims, dtype, size) == ((3,), np.dtype(np.int64), 24)
    finally:
        plan.close()


def test_nnhal_run_prints_extension_typed_outputs(tmp_path: Path, capsys) -> None:
    import json

    from nnhal.vectors import TestModel, save_vectors

    _two_op_package(tmp_path)
    path = tmp_path / "wide.json"
    save_vectors(path, [TestModel(name="wide", model=_widen_model(), inputs=[WIDE_X],
                                  expected=[WIDE_Y], expected_shapes=[(3,)],
                                  output_types=[5 << 16], ignored=[False])])  # fmt: skip
    config = ["--op-package", str(tmp_path / "i64.xml"), "--package-backend", "HTP"]
    assert main(["run", str(path), *config]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["status"] == "NONE" and doc["outputs"] == [WIDE_Y.tolist()]


def test_io_plan_lays_out_scalar_and_tensor_extension_outputs() -> None:
    """With the device's table (getSupportedExtensions), a scalar extension type (INT_64 +
    16) gets one element and empty request dimensions; a tensor one its dimensions."""
    from nnhal._client_io import IoPlan, extension_type_table
    from nnhal.types import Extension, OperandTypeInformation

    mb = ModelBuilder()
    mb.extension("org.test.wide", 5)
    g = mb.main
    x = g.input(T.TENSOR_INT32, [3])
    y = g.output((5 << 16) | 0, [3])
    s = g.output((5 << 16) | 16, [])
    g.operation((5 << 16) | 0, [x], [y, s])
    model = mb.build()
    listed = [Extension("org.test.wide", (OperandTypeInformation(0, True, 8),
                                          OperandTypeInformation(16, False, 8)))]  # fmt: skip
    table = extension_type_table(listed, model.extensionNameToPrefix)
    assert table == {(5 << 16): (True, 8), (5 << 16) | 16: (False, 8)}
    plan = IoPlan(model, [WIDE_X], None, "inline", [np.int64, np.uint64], table)
    (_, y_dims, y_dtype, y_size, _), (_, s_dims, s_dtype, s_size, _) = plan.outputs
    assert (y_dims, y_dtype, y_size) == ((3,), np.dtype(np.int64), 24)
    assert (s_dims, s_dtype, s_size) == ((), np.dtype(np.uint64), 8)
    assert [a.dimensions for a in plan.request.outputs] == [(), ()]
    # without the table a scalar extension output is not known to be one: its shape is asked
    with pytest.raises(ValueError, match=r"output 1 \(operand 2\) has unknown dimensions \[\]"):
        IoPlan(model, [WIDE_X], None, "inline", [np.int64, np.uint64])
    plan = IoPlan(model, [WIDE_X], [None, ()], "inline", [np.int64, np.uint64])
    assert plan.outputs[1][1:4] == ((), np.dtype(np.uint64), 8)
