"""Op-package configs: the three loaders, the invalid corpus, type mapping, the generator, CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from nnhal.driver.op_packages import load_config
from nnhal.driver.op_packages.generator import GENERATED_MARK, generate
from nnhal.driver.op_packages.nnapi_types import extension_operand_types, nnapi_types, refused
from nnhal.driver.op_packages.spec import ConfigError, PackageSpec, canonical_datatype
from nnhal.tools.cli import main
from repo_paths import REPO_ROOT

from nnhal.types import OperandType as T

ROOT = REPO_ROOT
DATA = ROOT / "tests" / "data" / "op_packages"
EXAMPLES = ROOT / "examples"
INVALID = json.loads((DATA / "invalid" / "expected.json").read_text())


@pytest.mark.parametrize("name", sorted(INVALID))
def test_invalid_corpus_gives_located_message(name: str) -> None:
    line, fragment = INVALID[name]
    path = DATA / "invalid" / name
    with pytest.raises(ConfigError) as info:
        load_config(path)
    text = str(info.value)
    assert text.startswith(f"{path}:{line}: "), text
    assert fragment in text
    assert info.value.line == line


def test_corpus_covers_every_invalid_file() -> None:
    files = {p.name for p in (DATA / "invalid").iterdir() if p.name != "expected.json"}
    assert files == set(INVALID)


def test_validate_cli_one_line_per_error_no_traceback(capsys: pytest.CaptureFixture) -> None:
    bad = [str(DATA / "invalid" / n) for n in ("bad_rank.xml", "duplicate_key.ini")]
    good = str(EXAMPLES / "snpe_json" / "scale_shift.json")
    assert main(["oppkg", "validate", *bad, good]) == 1
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"nnhal oppkg validate: error: {bad[0]}:8: ")
    assert f"{bad[1]}:4: [MyOp] input0.dtype: duplicate key" in lines[1]
    assert "ok: extension udo.scale_shift_package" in out


def test_seed_examples_load() -> None:
    (qnn,) = load_config(DATA / "valid" / "seed_qnn.xml")
    (snpe,) = load_config(DATA / "valid" / "seed_snpe.xml")
    for spec, backend in ((qnn, "HTP"), (snpe, "DSP_V68")):
        op = spec.op("OpName")
        assert [t.name for t in op.inputs] == ["in[0]"]
        assert [t.name for t in op.outputs] == ["out[0]"]
        assert op.params[0].name == "param" and not op.params[0].mandatory
        assert op.inputs[0].datatypes == ("FLOAT_32",) and op.inputs[0].rank == "1D"
        assert op.supported_backends == (backend,)
        assert spec.backend(backend).supported_ops == ("OpName",)
        assert spec.extension_name == "example.example_package"
    assert snpe.op("OpName").params[0].datatypes == ("INT_32",)
    (udo,) = load_config(DATA / "valid" / "seed_udo.json")
    op = udo.op("MyCustomOp")
    assert [t.name for t in op.operands] == ["in_0", "in_1", "scalar_param_1", "tensor_param_1"]
    assert op.params[0].scalar and not op.params[1].scalar
    assert udo.resolved("DSP").op("MyCustomOp").inputs[0].datatypes == ("UINT_8",)
    assert udo.resolved("CPU").op("MyCustomOp").inputs[0].datatypes == ("FLOAT_32",)
    assert op.metadata["dsp_arch_types"] == ["v66", "v68", "v69", "v73"]


def test_xml_supplements_and_spec_round_trip() -> None:
    (spec,) = load_config(EXAMPLES / "qnn_xml" / "soft_clip.xml")
    assert spec.extension_name == "com.example.soft_clip_package"
    assert [o.name for o in spec.ops] == ["SoftClip", "AddSoftClip", "Relu"]
    assert spec.resolved("HTP").op("SoftClip").inputs[0].datatypes == (
        "FLOAT_16",
        "UFIXED_POINT_8",
    )
    assert spec.only_default("HTP", "SoftClip") == {"limit"}
    assert spec.op("Relu").use_default_translation
    assert PackageSpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec


def test_ini_columns_and_defaults() -> None:
    (spec,) = load_config(EXAMPLES / "ascend_ini" / "square_add.ini")
    op = spec.op("SquareAdd")
    assert op.metadata["combinations"] == [["FLOAT_16"] * 3, ["FLOAT_32"] * 3]
    assert op.metadata["op_file"] == "square_add" and op.metadata["pattern"] == "broadcast"
    assert op.params[0].default == 1.0 and not op.params[0].mandatory
    assert spec.extension_name == "ascend.square_add"


def test_type_mapping() -> None:
    assert canonical_datatype("QNN_DATATYPE_FLOAT_32") == "FLOAT_32"
    assert canonical_datatype("FIXED_8") == "UFIXED_POINT_8"
    assert canonical_datatype("NOPE") is None
    assert nnapi_types("FLOAT_32", False, 1) == {T.TENSOR_FLOAT32}
    assert nnapi_types("FLOAT_32", True, 1) == {T.FLOAT32}
    assert nnapi_types("UFIXED_POINT_8", False, 1) == {T.TENSOR_QUANT8_ASYMM}
    assert nnapi_types("SFIXED_POINT_8", False, 1) == {T.TENSOR_QUANT8_ASYMM_SIGNED}
    assert nnapi_types("SFIXED_POINT_16", False, 1) == {T.TENSOR_QUANT16_SYMM}
    assert nnapi_types("BOOL_8", True, 1) == {T.BOOL}
    assert nnapi_types("INT_64", False, 5) == {(5 << 16) | 0}
    assert nnapi_types("INT_64", True, 5) == {(5 << 16) | 16}
    assert refused("SFIXED_POINT_4") and refused("STRING") and refused("FLOAT_32") is None
    assert extension_operand_types({"INT_64", "FLOAT_32"}) == [(0, True, 8), (16, False, 8)]


def test_generate_keeps_edited_kernels(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    config = str(EXAMPLES / "qnn_xml" / "soft_clip.xml")
    out = tmp_path / "pkg"
    assert main(["oppkg", "generate", config, "--out", str(out)]) == 0
    mod = out / "soft_clip_package"
    kernel = mod / "kernels" / "soft_clip.py"
    text = kernel.read_text()
    assert "def soft_clip(x, *, limit=1.0):" in text and "NotImplementedError" in text
    assert "limit: FLOAT_32 -> FLOAT32; rank SCALAR; optional; default 1.0" in text
    assert (mod / "_generated.py").read_text().startswith(GENERATED_MARK)
    spec_doc = json.loads((mod / "spec.json").read_text())
    assert spec_doc["spec"]["package_name"] == "SoftClipPackage"
    kernel.write_text(text.replace("raise NotImplementedError", "return x  # edited\n    raise"))
    (mod / "_generated.py").write_text("stale")
    capsys.readouterr()
    assert main(["oppkg", "generate", config, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "# edited" in kernel.read_text()
    assert f"kept {kernel}" in printed
    assert (mod / "_generated.py").read_text().startswith(GENERATED_MARK)
    assert main(["oppkg", "generate", config, "--out", str(out), "--force"]) == 0
    assert "# edited" not in kernel.read_text()
    ns: dict = {}
    exec((mod / "_generated.py").read_text(), ns)  # noqa: S102 - the generated helper works
    assert ns["bind_params"]("SoftClip", {}) == {"limit": 1.0}
    with pytest.raises(ValueError, match="unknown parameters"):
        ns["bind_params"]("SoftClip", {"bogus": 1})


def test_generate_backend_filters_kernels(tmp_path: Path) -> None:
    config = str(EXAMPLES / "qnn_xml" / "soft_clip.xml")
    specs = load_config(config)
    generate(specs, tmp_path, backend="HTP")
    kernels = sorted(p.name for p in (tmp_path / "soft_clip_package" / "kernels").iterdir())
    assert kernels == ["__init__.py", "soft_clip.py"]
    assert main(["oppkg", "generate", config, "--out", str(tmp_path), "--backend", "NPU"]) == 2


def test_generate_bad_config_no_traceback(tmp_path: Path) -> None:
    bad = str(DATA / "invalid" / "columns_mismatch.ini")
    proc = subprocess.run(
        [sys.executable, "-m", "nnhal.tools.cli", "oppkg", "generate", bad, "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert f"{bad}:7: [MyOp] output0.dtype" in proc.stderr
    assert not any(tmp_path.iterdir())


def test_generated_skeletons_compile_and_import(tmp_path: Path) -> None:
    configs = [
        DATA / "valid" / "seed_qnn.xml",
        DATA / "valid" / "seed_udo.json",
        DATA / "dynamic" / "concat_sum.ini",
        EXAMPLES / "qnn_xml" / "soft_clip.xml",
        EXAMPLES / "ascend_ini" / "square_add.ini",
    ]
    specs = [s for c in configs for s in load_config(c)]
    report = generate(specs, tmp_path)
    kernels = [Path(p) for p in report.written if "/kernels/" in p and "__init__" not in p]
    assert len(kernels) == 7
    for path in kernels:
        compile(path.read_text(), str(path), "exec")
    text = (tmp_path / "concat_sum" / "kernels" / "concat_sum_impl.py").read_text()
    assert "def concat_sum_impl(*xs):" in text
    text = (tmp_path / "my_custom_udo_package" / "kernels" / "my_custom_op.py").read_text()
    assert "def my_custom_op(in_0, in_1, *, scalar_param_1, tensor_param_1):" in text
    pyproject = (tmp_path / "pyproject.toml").read_text()
    assert '"com.example.soft_clip_package" = "soft_clip_package:nnhal_op_package"' in pyproject
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    tomllib.loads(pyproject)
