"""`nnhal oppkg test`, `nnhal oppkg rules`, and op packages for the in-process driver."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest
from nnhal.tools.cli import main
from repo_paths import REPO_ROOT

EXAMPLES = REPO_ROOT / "examples"

CONFIG = """\
<OpDefCollection PackageName="Twice" Domain="org.test">
  <OpDefList>
    <OpDef><Name>Twice</Name>
      <Input><Name>x</Name>{types}<Shape><Rank>ND</Rank></Shape></Input>
      <Output><Name>y</Name>{types}<Shape><Rank>ND</Rank></Shape></Output>
    </OpDef>
  </OpDefList>
</OpDefCollection>
"""


def _package(tmp_path: Path, types: list[str], kernel: str) -> Path:
    config = tmp_path / "twice.xml"
    config.write_text(
        CONFIG.format(types="".join(f"<Datatype>QNN_DATATYPE_{t}</Datatype>" for t in types))
    )
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "twice.py").write_text(textwrap.dedent(kernel))
    return config


def test_kernel_off_by_1e3_relative_exits_1(tmp_path: Path, capsys) -> None:
    config = _package(
        tmp_path,
        ["FLOAT_32"],
        """\
        import numpy as np
        from nnhal.driver.op_packages.runtime import FAST, GLACIAL, implementation


        @implementation(cost=FAST, types={"x": "FLOAT_32"})
        def twice_fast(x):
            return (x * 2 * np.float32(1.001)).astype(np.float32)


        @implementation(cost=GLACIAL)
        def twice(x):
            return x * 2
        """,
    )
    assert main(["oppkg", "test", str(config), "--examples", "15", "--seed", "3"]) == 1
    out = capsys.readouterr().out
    assert "reference: generic implementation twice" in out
    bad = [line for line in out.splitlines() if "DISAGREEMENT" in line]
    assert bad and all("Twice on CPU, case " in line for line in bad)
    assert all("implementation twice_fast differs from the reference" in line for line in bad)
    assert "x FLOAT_32[" in bad[0]
    assert out.rstrip().endswith(f"{len(bad)} disagreement(s)")


def test_definition_claims_a_type_the_kernel_mishandles_exits_1(tmp_path: Path, capsys) -> None:
    config = _package(
        tmp_path,
        ["FLOAT_32", "INT_32"],
        """\
        from nnhal.driver.op_packages.runtime import implementation


        @implementation()
        def twice(x):
            if x.dtype.kind != "f":
                raise TypeError(f"twice: floats only, got {x.dtype}")
            return x * 2
        """,
    )
    ref = tmp_path / "ref.py"
    ref.write_text("def twice(x):\n    return x * 2\n")
    code = main(["oppkg", "test", str(config), "--reference", str(ref), "--examples", "25"])
    out = capsys.readouterr().out
    assert code == 1
    assert "reference: --reference nnhal_oppkg_reference.twice" in out
    bad = [line for line in out.splitlines() if "DISAGREEMENT" in line]
    assert bad
    assert all("x INT_32[" in line and "Twice on CPU, case" in line for line in bad), bad
    assert any("implementation twice failed" in line and "floats only" in line for line in bad)
    assert any("supported, but running it failed" in line for line in bad)


def test_definition_claims_a_type_the_kernel_silently_mishandles_exits_1(
    tmp_path: Path, capsys
) -> None:
    """The kernel does not fail on INT_32, it computes the wrong thing (halves instead of
    doubling): every disagreement names an INT_32 case and the implementation, with the
    values as integers; the FLOAT_32 cases agree."""
    config = _package(
        tmp_path,
        ["FLOAT_32", "INT_32"],
        """\
        from nnhal.driver.op_packages.runtime import implementation


        @implementation()
        def twice(x):
            return x * 2 if x.dtype.kind == "f" else x // 2
        """,
    )
    ref = tmp_path / "ref.py"
    ref.write_text("def twice(x):\n    return x * 2\n")
    code = main(["oppkg", "test", str(config), "--reference", str(ref), "--examples", "25",
                 "--seed", "0"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 1
    bad = [line for line in out.splitlines() if "DISAGREEMENT" in line]
    assert bad
    for line in bad:
        assert "Twice on CPU, case " in line and "(x INT_32[" in line, line
        assert "implementation twice differs from the reference: output 0 at [" in line, line
        assert re.search(r": -?\d+ vs reference -?\d+ \(tolerance atol 1 \+ rtol 0\)", line), line
    (row,) = [line.split() for line in out.splitlines() if line.startswith("    twice ")]
    agreed, compared = map(int, row[5].split("/"))
    assert compared > len(bad) and agreed == compared - len(bad), row  # FLOAT_32 ones agree


@pytest.mark.parametrize("answer", [True, False])
def test_support_answer_unlike_the_definition_exits_1(
    tmp_path: Path, capsys, monkeypatch, answer: bool
) -> None:
    """A device whose getSupportedOperations does not follow the definition (here one that
    says yes, or no, to everything) is a disagreement per case it gets wrong: a case the
    definition forbids said supported, or one it allows said unsupported (with the
    device's reason)."""
    from nnhal.driver.device import Device

    config = _package(
        tmp_path,
        ["FLOAT_32"],
        """\
        from nnhal.driver.op_packages.runtime import implementation


        @implementation()
        def twice(x):
            return x * 2
        """,
    )
    reasons = {} if answer else {0: "this device says no"}
    monkeypatch.setattr(
        Device, "explainSupportedOperations", lambda self, model, **kw: ([answer], reasons)
    )
    code = main(["oppkg", "test", str(config), "--examples", "30", "--seed", "0"])
    out = capsys.readouterr().out
    assert code == 1
    (head,) = [line for line in out.splitlines() if line.startswith("Twice on CPU: ")]
    cases = int(head.split(": ")[1].split()[0])
    allowed = int(head.split("(")[1].split(" allowed")[0])
    assert 0 < allowed < cases, head  # the definition both allows and forbids some cases
    bad = [line for line in out.splitlines() if "DISAGREEMENT" in line]
    if answer:
        assert len(bad) == cases - allowed, out
        assert all(
            "the definition forbids it (" in line
            and "but getSupportedOperations says supported" in line
            for line in bad
        ), bad
    else:
        assert len(bad) == allowed, out
        assert all(
            "the definition allows it but getSupportedOperations says unsupported: "
            "this device says no" in line
            for line in bad
        ), bad
    assert all(line.startswith("    DISAGREEMENT: Twice on CPU, case ") for line in bad), bad


WIDE_CONFIG = """\
<OpDefCollection PackageName="Shift" Domain="org.test">
  <OpDefList>
    <OpDef><Name>Shift</Name>
      <Input><Name>x</Name><Datatype>QNN_DATATYPE_INT_32</Datatype>
        <Shape><Rank>ND</Rank></Shape></Input>
      <Output><Name>y</Name><Datatype>QNN_DATATYPE_INT_64</Datatype>
        <Shape><Rank>ND</Rank></Shape></Output>
    </OpDef>
  </OpDefList>
</OpDefCollection>
"""


def test_int64_output_compared_exactly_beyond_2_53(tmp_path: Path, capsys) -> None:
    """An INT_64 (extension type) output off by one at 2**58 is a disagreement in every
    case: float64 cannot tell those values apart, so they are compared as integers."""
    config = tmp_path / "shift.xml"
    config.write_text(WIDE_CONFIG)
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "shift.py").write_text(
        "import numpy as np\nfrom nnhal.driver.op_packages.runtime import implementation\n\n\n"
        "@implementation()\ndef shift(x):\n    return (x.astype(np.int64) << 58) + 1\n"
    )
    ref = tmp_path / "ref.py"
    ref.write_text("import numpy as np\n\n\ndef shift(x):\n    return x.astype(np.int64) << 58\n")
    code = main(["oppkg", "test", str(config), "--reference", str(ref), "--examples", "10",
                 "--seed", "0"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 1
    (row,) = [line.split() for line in out.splitlines() if line.startswith("    shift ")]
    compared = int(row[5].split("/")[1])
    assert compared > 0 and row[5] == f"0/{compared}", row
    bad = [line for line in out.splitlines() if "DISAGREEMENT" in line]
    assert len(bad) == compared
    assert all("-> y INT_64): implementation shift differs" in line for line in bad), bad
    assert all(re.search(r"(-?\d+) vs reference (-?\d+) \(tolerance atol 0 ", line) for line in bad)


@pytest.mark.parametrize(
    "config",
    ["qnn_xml/soft_clip.xml", "snpe_json/scale_shift.json", "ascend_ini/square_add.ini"],
)
def test_shipped_examples_pass(config: str, capsys) -> None:
    assert main(["oppkg", "test", str(EXAMPLES / config), "--examples", "15"]) == 0
    out = capsys.readouterr().out
    assert "DISAGREEMENT" not in out and out.rstrip().endswith("0 disagreement(s)")
    assert " supported " in out


@pytest.mark.parametrize("config", ["snpe_json/scale_shift.json", "ascend_ini/square_add.ini"])
def test_shipped_examples_agree_with_their_references(config: str, capsys) -> None:
    path = EXAMPLES / config
    ref = path.parent / "reference.py"
    assert main(["oppkg", "test", str(path), "--reference", str(ref), "--examples", "15"]) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line.startswith("    ")]
    # every backend's kernel ran and was compared with the reference, none disagreeing
    assert rows and all(int(r[4]) > 0 and r[5] == f"{r[4]}/{r[4]}" for r in rows), rows


def test_shipped_reference_checks_quantized_and_override_kernels(capsys) -> None:
    config = EXAMPLES / "qnn_xml" / "soft_clip.xml"
    ref = EXAMPLES / "qnn_xml" / "reference.py"
    assert main(["oppkg", "test", str(config), "--reference", str(ref), "--examples", "25"]) == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line.startswith("    soft_clip_u8")]
    # on HTP the UFIXED_POINT_8 kernel ran and was compared with the reference
    assert any(int(r[4]) > 0 and r[5] == f"{r[4]}/{r[4]}" for r in rows), rows


def test_override_compared_with_the_builtin_operation(capsys) -> None:
    config = EXAMPLES / "qnn_xml" / "soft_clip.xml"
    assert main(["oppkg", "test", str(config), "--examples", "10"]) == 0
    out = capsys.readouterr().out
    assert "Relu on CPU:" in out and "reference: built-in RELU (the operation it overrides)" in out


def test_bad_reference_module_is_a_usage_error(tmp_path: Path, capsys) -> None:
    config = EXAMPLES / "ascend_ini" / "square_add.ini"
    assert main(["oppkg", "test", str(config), "--reference", "no_such_module_xyz"]) == 2
    assert "nnhal oppkg test: error:" in capsys.readouterr().err
    missing = str(tmp_path / "nope.py")  # a missing file is a file error, as everywhere
    assert main(["oppkg", "test", str(config), "--reference", missing]) == 1
    assert "nope.py: no such file" in capsys.readouterr().err


def test_rules_shows_what_fires(capsys) -> None:
    model = EXAMPLES / "qnn_xml" / "model.json"
    config = EXAMPLES / "qnn_xml" / "soft_clip.xml"
    args = ["oppkg", "rules", str(model), "--op-package", str(config), "--no-entry-points"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "fired: rule 'fuse ADD + SoftClip' (priority 2000): subgraph 2, operations [0, 1]" in out
    assert "subgraph 2: 3 -> 2 operations" in out
    # without the package nothing fires
    assert main(["oppkg", "rules", str(model), "--no-entry-points"]) == 0
    assert "no rule matches this model" in capsys.readouterr().out


def test_in_process_commands_load_op_packages(capsys) -> None:
    model = str(EXAMPLES / "snpe_json" / "model.json")
    config = str(EXAMPLES / "snpe_json" / "scale_shift.json")
    assert main(["supported", model, "--op-package", config]) == 0
    assert json.loads(capsys.readouterr().out)["supported"] == [True]
    assert main(["run", model, "--op-package", config]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "NONE"
    assert main(["vectors", model, "--op-package", config, "--no-progress"]) == 0
    capsys.readouterr()
    # without it the model's extension is unknown to the device: unsupported, with the reason
    assert main(["supported", model]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["supported"] == [False]
    assert "supports no vendor extensions" in doc["reasons"]["0"]


def test_op_package_with_target_is_a_usage_error(capsys) -> None:
    model = str(EXAMPLES / "snpe_json" / "model.json")
    args = ["supported", model, "--target", "127.0.0.1:1", "--op-package", "x.json"]
    assert main(args) == 2
    assert "--op-package and --package-backend configure the in-process driver" in (
        capsys.readouterr().err
    )


def test_oppkg_test_without_hypothesis_exits_1_with_the_install_hint(monkeypatch, capsys) -> None:
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:
        tomllib = pytest.importorskip("tomli")
    monkeypatch.setitem(sys.modules, "hypothesis", None)  # `import hypothesis` fails
    config = str(EXAMPLES / "snpe_json" / "scale_shift.json")
    assert main(["oppkg", "test", config, "--examples", "1"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "nnhal oppkg test: error: needs hypothesis, which is not installed: "
        "pip install 'nnhal[oppkg]' (or pip install hypothesis)\n"
    )
    # the extra the hint names exists and brings hypothesis
    with open(REPO_ROOT / "pyproject.toml", "rb") as fh:
        extras = tomllib.load(fh)["project"]["optional-dependencies"]
    assert any(req.startswith("hypothesis") for req in extras["oppkg"])


SEEDS = REPO_ROOT / "tests" / "data" / "op_packages" / "valid"
#: a kernel for each seed definition (the seeds define operations, not kernels)
SEED_KERNELS = {
    "seed_qnn.xml": ("op_name", "def op_name(x, *, param=None):\n    return x * 2\n"),
    "seed_snpe.xml": ("op_name", "def op_name(x, *, param=None):\n    return x * 2\n"),
    "seed_udo.json": (
        "my_custom_op",
        (
            "def my_custom_op(in_0, in_1, *, scalar_param_1=0, tensor_param_1=None):\n"
            "    return in_0.copy(), in_1 + 1\n"
        ),
    ),
}


@pytest.mark.parametrize("seed_file", sorted(SEED_KERNELS))
def test_seed_definitions_without_kernels_give_one_finding_per_operation(
    seed_file: str, capsys
) -> None:
    assert main(["oppkg", "test", str(SEEDS / seed_file), "--examples", "5"]) == 1
    out = capsys.readouterr().out
    findings = [line for line in out.splitlines() if "DISAGREEMENT" in line]
    backends = {"seed_qnn.xml": 1, "seed_snpe.xml": 1, "seed_udo.json": 3}[seed_file]
    assert len(findings) == backends, out
    assert all("has no kernel implementation of it (no kernels/ directory" in f for f in findings)


@pytest.mark.parametrize("seed_file", sorted(SEED_KERNELS))
def test_seed_definitions_with_kernels_pass(seed_file: str, tmp_path: Path, capsys) -> None:
    """Cases generated from every seed definition are well formed: a tensor parameter with
    an Enumeration gets values inside it, and constants of extension operand types
    (SNPE DSP UINT_8) are built; a kernel and a reference that agree give exit 0."""
    module, source = SEED_KERNELS[seed_file]
    config = tmp_path / seed_file
    config.write_bytes((SEEDS / seed_file).read_bytes())
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / f"{module}.py").write_text(
        "from nnhal.driver.op_packages.runtime import implementation\n\n\n@implementation()\n"
        + source
    )
    reference = tmp_path / "reference.py"
    reference.write_text(source)
    assert main(["oppkg", "test", str(config), "--examples", "15",
                 "--reference", str(reference)]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert out.endswith("0 disagreement(s)\n")
    for line in out.splitlines():
        if " cases (" in line:  # every backend ran allowed cases, all supported
            cases = line.split(": ", 1)[1]
            allowed = int(cases.split("(")[1].split(" allowed")[0])
            assert allowed > 0 and f"{allowed} supported" in cases, line
        if line.startswith(f"    {module}"):
            compared = int(line.split("/")[1].split(" agreed")[0])
            assert compared > 0 and f"{compared}/{compared} agreed" in line, line
