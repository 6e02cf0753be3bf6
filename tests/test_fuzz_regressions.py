"""Small explicit cases for the failures the fuzz targets found (fuzz/targets.py).

Each test is the smallest form of one finding, with the documented error the
driver gives now instead of an internal exception.
"""

from __future__ import annotations

import numpy as np
import pytest

from driver.device import Device
from driver.memory import MappedPools
from driver.op_packages.generator import _generated_module, kernel_source
from driver.op_packages.ini_loader import load_ini
from driver.op_packages.json_loader import load_json
from driver.op_packages.spec import ConfigError
from fuzz.models import request_for
from nnhal.builder import ModelBuilder
from nnhal.errors import GeneralFailure, InvalidArgument
from nnhal.types import OperandType, OperationType
from nnhal.validation import validate_model

F32, BOOL8, I32, INT32 = (OperandType.TENSOR_FLOAT32, OperandType.TENSOR_BOOL8,
                          OperandType.TENSOR_INT32, OperandType.INT32)  # fmt: skip


@pytest.fixture(scope="module")
def device() -> Device:
    return Device()


def _execute(device: Device, model, inputs):
    prepared = device.prepareModel_1_3(model)
    request = request_for(model, inputs)
    with MappedPools(request.pools) as mapped:
        return prepared.execute(request, mapped.views)


def test_an_omitted_request_input_read_by_a_required_position_is_invalid(device) -> None:
    # found by `validation`: hasNoValue inputs reached ADD's kernel as None (TypeError)
    mb = ModelBuilder()
    a, b = mb.main.input(F32, [2]), mb.main.input(F32, [2])
    out = mb.main.output(F32, [2])
    mb.main.operation(OperationType.ADD, [a, b, mb.main.constant(INT32, 0)], [out])
    with pytest.raises(InvalidArgument, match=r"input 1 .*has no value.*operation 0 \(ADD\)"):
        _execute(device, mb.build(), [np.ones(2, np.float32), None])


def _if_model(condition_no_value: bool, value_no_value: bool):
    mb = ModelBuilder()
    branch = mb.subgraph()
    x = branch.input(F32, [2])
    y = branch.output(F32, [2])
    branch.operation(OperationType.RELU, [x], [y])
    cond = mb.main.no_value(BOOL8, [1]) if condition_no_value else mb.main.input(BOOL8, [1])
    value = mb.main.no_value(F32, [2]) if value_no_value else mb.main.input(F32, [2])
    out = mb.main.output(F32, [2])
    refs = [mb.main.subgraph_ref(branch), mb.main.subgraph_ref(branch)]
    mb.main.operation(OperationType.IF, [cond, *refs, value], [out])
    return mb.build()


def test_no_value_operands_cannot_be_passed_into_if() -> None:
    # found by `graphs`: a NO_VALUE IF input reached RELU inside the branch as None
    with pytest.raises(InvalidArgument, match=r"input 3 .*is NO_VALUE"):
        validate_model(_if_model(False, True))
    with pytest.raises(InvalidArgument, match=r"input 0 .*is NO_VALUE"):
        validate_model(_if_model(True, False))
    validate_model(_if_model(False, False))


def test_no_value_operands_cannot_be_passed_into_while() -> None:
    mb = ModelBuilder()
    cond, body = mb.subgraph(), mb.subgraph()
    ci = cond.input(I32, [1])
    flag = cond.output(BOOL8, [1])
    cond.operation(OperationType.LESS, [ci, cond.constant(I32, [3], [1])], [flag])
    bi = body.input(I32, [1])
    bo = body.output(I32, [1])
    body.operation(OperationType.ADD, [bi, body.constant(I32, [1], [1]), body.constant(INT32, 0)],
                   [bo])  # fmt: skip
    start = mb.main.no_value(I32, [1])
    out = mb.main.output(I32, [1])
    mb.main.operation(OperationType.WHILE, [mb.main.subgraph_ref(cond),
                                            mb.main.subgraph_ref(body), start], [out])  # fmt: skip
    with pytest.raises(InvalidArgument, match=r"WHILE.*input 2 .*is NO_VALUE"):
        validate_model(mb.build())


def test_broadcast_conflict_known_only_at_run_time_is_a_clean_general_failure(device) -> None:
    # found by `validation`: GREATER_EQUAL on [3] and [4] (declared [0]) failed inside numpy
    mb = ModelBuilder()
    a, b = mb.main.input(F32, [0]), mb.main.input(F32, [0])
    out = mb.main.output(BOOL8, [0])
    mb.main.operation(OperationType.GREATER_EQUAL, [a, b], [out])
    model = mb.build()
    with pytest.raises(GeneralFailure) as info:
        _execute(device, model, [np.ones(3, np.float32), np.ones(4, np.float32)])
    assert "GREATER_EQUAL (subgraph 0, operation 0)" in info.value.message
    assert "broadcast" in info.value.message and "kernel failed" not in info.value.message
    shapes, _ = _execute(device, model, [np.ones(3, np.float32), np.ones(1, np.float32)])
    assert shapes[0].dimensions == (3,)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (b'{"UdoPackage_0": {"UDO_PACKAGE_NAME": "a\x01b"}}', "bad string"),
        (b'{"UdoPackage_0": "\\q"}', "bad string"),
        (b"[" * 5000, "nested more than"),
        (b'{"a":' * 3000, "nested more than"),
    ],
)
def test_json_loader_reports_bad_strings_and_deep_nesting_as_config_errors(text, why) -> None:
    # found by `loaders`: json.JSONDecodeError and RecursionError escaped load_json
    with pytest.raises(ConfigError, match=why):
        load_json("udo.json", text)


_INI = """[{name}]
input0.name=x
input0.dtype=float32
input0.format=ND
attr.list={attr}
attr_{attr}.type=float
attr_{attr}.paramType=optional
attr_{attr}.defaultValue={default}
output0.name=y
output0.dtype=float32
output0.format=ND
"""


@pytest.mark.parametrize(
    ("name", "attr", "default"),
    [
        ("\x00quareAdd", "alpha", "1.0"),  # a NUL in the operation name
        ('Q"); import os #', "alpha", "1.0"),  # quotes: no code from the config may run
        ("Scale", "3alpha", "1.0"),  # a parameter name starting with a digit
        ("Scale", "alpha", "nan"),  # a non-finite default
    ],
)
def test_generated_op_package_sources_compile_whatever_the_names(name, attr, default) -> None:
    # found by `loaders`: NUL bytes, quotes and digit-first names gave invalid Python
    spec = load_ini("ops.ini", _INI.format(name=name, attr=attr, default=default).encode())
    namespace: dict = {}
    exec(compile(_generated_module(spec), "<generated>", "exec"), namespace)  # noqa: S102
    assert namespace["OPERATIONS"] == [name]
    for op in spec.ops:
        kernel: dict = {}
        exec(compile(kernel_source(spec, op, None), "<kernel>", "exec"), kernel)  # noqa: S102
        own = [v for v in kernel.values() if getattr(getattr(v, "__code__", None), "co_filename",
                                                       "") == "<kernel>"]  # fmt: skip
        assert len(own) == 1
        with pytest.raises(NotImplementedError, match="fill in the numpy kernel"):
            own[0](np.zeros(1))
