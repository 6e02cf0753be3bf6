"""Device profiles: the built-in ones load, custom files work, mistakes are named."""

from __future__ import annotations

from pathlib import Path

import pytest
from nnhal.driver.profile import (
    CAPABILITY_OPERAND_TYPES,
    Profile,
    ProfileError,
    builtin_profiles,
    load_profile,
    parse_profile,
)

from nnhal.types import DeviceType, OperandType, OperationType


def _perf(profile: Profile, type_code: int):
    return {p.type: p.info for p in profile.capabilities.operandPerformance}[type_code]


def test_default_profile_loads_and_allows_everything():
    profile = load_profile(None)
    assert profile.name == "default"
    assert load_profile("default") == profile
    assert profile.versionString
    assert profile.type == DeviceType.CPU
    assert profile.exclude_operations == frozenset()
    assert profile.operand_types is None
    assert all(profile.allows_operand_type(t) for t in OperandType)
    assert all(profile.allows_operation(t) for t in OperationType)


def test_every_builtin_profile_loads():
    names = builtin_profiles()
    assert "default" in names
    for name in names:
        profile = load_profile(name)
        assert profile.name
        types = [p.type for p in profile.capabilities.operandPerformance]
        assert types == list(CAPABILITY_OPERAND_TYPES)


def test_example_npu_profile_narrows_support():
    profile = load_profile("example-npu")
    assert profile.type == DeviceType.ACCELERATOR
    assert not profile.allows_operation(OperationType.LSTM)
    assert profile.allows_operation(OperationType.CONV_2D)
    assert not profile.allows_operand_type(OperandType.TENSOR_FLOAT16)
    assert profile.allows_operand_type(OperandType.SUBGRAPH)  # always allowed
    assert _perf(profile, OperandType.TENSOR_QUANT8_ASYMM).execTime == pytest.approx(0.2)


def test_custom_profile_file(tmp_path: Path):
    path = tmp_path / "my-gpu.toml"
    path.write_text(
        """
name = "my-gpu"
versionString = "my-gpu 2.1"
type = "gpu"
exclude_operations = ["FULLY_CONNECTED", "WHILE"]
operand_types = ["TENSOR_FLOAT32", "INT32"]

[capabilities]
default = { execTime = 0.5, powerUsage = 0.25 }
whilePerformance = { execTime = 3, powerUsage = 2.5 }

[capabilities.operandPerformance]
TENSOR_FLOAT32 = { execTime = 0.1, powerUsage = 0.2 }
"""
    )
    profile = load_profile(str(path))
    assert profile.name == "my-gpu"
    assert profile.versionString == "my-gpu 2.1"
    assert profile.type == DeviceType.GPU
    assert profile.exclude_operations == {OperationType.FULLY_CONNECTED, OperationType.WHILE}
    assert profile.operand_types == {OperandType.TENSOR_FLOAT32, OperandType.INT32}
    caps = profile.capabilities
    assert _perf(profile, OperandType.TENSOR_FLOAT32).execTime == pytest.approx(0.1)
    assert _perf(profile, OperandType.TENSOR_INT32).execTime == pytest.approx(0.5)
    assert caps.whilePerformance.execTime == pytest.approx(3.0)
    assert caps.ifPerformance.powerUsage == pytest.approx(0.25)  # from default
    assert caps.relaxedFloat32toFloat16PerformanceTensor.execTime == pytest.approx(0.5)
    assert profile.source == str(path)
    # a Path works as well as a string
    assert load_profile(path) == profile


def test_name_defaults_to_the_file_name(tmp_path: Path):
    path = tmp_path / "tiny.toml"
    path.write_text('type = "OTHER"\n')
    profile = load_profile(path)
    assert profile.name == "tiny"
    assert profile.versionString == "nnhal-tiny"
    assert profile.type == DeviceType.OTHER


@pytest.mark.parametrize(
    ("text", "key", "why"),
    [
        ('nmae = "x"\n', "nmae", "unknown key"),
        (
            "[capabilities]\nfast = { execTime = 1.0, powerUsage = 1.0 }\n",
            "capabilities.fast",
            "unknown key",
        ),
        (
            "[capabilities.operandPerformance]\nSUBGRAPH = { execTime = 1.0, powerUsage = 1.0 }\n",
            "capabilities.operandPerformance.SUBGRAPH",
            "unknown key",
        ),
        (
            "[capabilities]\ndefault = { execTime = 1.0, powerUsage = 1.0, extra = 2 }\n",
            "capabilities.default.extra",
            "unknown key",
        ),
        ('type = "TPU"\n', "type", "must be one of"),
        ("type = 2\n", "type", "must be one of"),
        ("name = 3\n", "name", "must be a string"),
        ('versionString = ""\n', "versionString", "must not be empty"),
        (
            'exclude_operations = ["FULLY_CONECTED"]\n',
            "exclude_operations[0]",
            "unknown OperationType",
        ),
        ('exclude_operations = "ADD"\n', "exclude_operations", "must be a list"),
        ('operand_types = ["TENSOR_FLOAT64"]\n', "operand_types[0]", "unknown OperandType"),
        (
            "[capabilities]\ndefault = { execTime = 0.0, powerUsage = 1.0 }\n",
            "capabilities.default.execTime",
            "positive",
        ),
        (
            "[capabilities]\nifPerformance = { execTime = -1.0, powerUsage = 1.0 }\n",
            "capabilities.ifPerformance.execTime",
            "positive",
        ),
        (
            '[capabilities]\nifPerformance = { execTime = "fast", powerUsage = 1.0 }\n',
            "capabilities.ifPerformance.execTime",
            "positive",
        ),
        (
            "[capabilities]\nifPerformance = { execTime = nan, powerUsage = 1.0 }\n",
            "capabilities.ifPerformance.execTime",
            "positive",
        ),
        (
            "[capabilities]\nwhilePerformance = { execTime = 1.0 }\n",
            "capabilities.whilePerformance.powerUsage",
            "required",
        ),
        ("capabilities = 3\n", "capabilities", "must be a table"),
    ],
)
def test_bad_key_or_value_names_file_and_key(tmp_path: Path, text: str, key: str, why: str):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ProfileError) as info:
        load_profile(str(path))
    message = str(info.value)
    assert str(path) in message
    assert repr(key) in message
    assert why in message
    assert isinstance(info.value, ValueError)  # the CLI catches ValueError


def test_invalid_toml_names_file(tmp_path: Path):
    path = tmp_path / "broken.toml"
    path.write_text("name = \n")
    with pytest.raises(ProfileError, match="invalid TOML") as info:
        load_profile(path)
    assert str(path) in str(info.value)


def test_missing_file_and_unknown_name(tmp_path: Path):
    missing = tmp_path / "nowhere.toml"
    with pytest.raises(ProfileError, match="not found") as info:
        load_profile(str(missing))
    assert str(missing) in str(info.value)
    with pytest.raises(ProfileError, match="unknown profile 'no-such-profile'") as info:
        load_profile("no-such-profile")
    assert "default" in str(info.value)  # lists the built-in names


def test_parse_profile_from_data():
    profile = parse_profile({"name": "p", "exclude_operations": ["ADD"]}, source="inline")
    assert not profile.allows_operation(OperationType.ADD)
    with pytest.raises(ProfileError, match="profile inline: key 'name'"):
        parse_profile({"name": ""}, source="inline")
    with pytest.raises(ProfileError, match="key 'name': required"):
        parse_profile({}, source="inline")


def test_op_package_backend_key(tmp_path):
    from nnhal.driver.device import Device

    path = tmp_path / "htp.toml"
    path.write_text('name = "htp"\nop_package_backend = "HTP"\n')
    profile = load_profile(str(path))
    assert profile.op_package_backend == "HTP"
    assert Device(profile).extensions.backend == "HTP"
    assert Device(profile, package_backend="DSP").extensions.backend == "DSP"
    assert load_profile(None).op_package_backend is None
    path.write_text('name = "bad"\nop_package_backend = 3\n')
    with pytest.raises(ProfileError, match="op_package_backend.*must be a string"):
        load_profile(str(path))
