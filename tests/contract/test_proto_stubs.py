"""The committed stubs in nnhal/_proto match proto/, and the proto enums match nnhal.types."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from repo_paths import REPO_ROOT

from nnhal import types as T

REPO = REPO_ROOT

grpc_tools = pytest.importorskip("grpc_tools", reason="grpcio-tools is in the [test] extra")


def _load_generate_script():
    spec = importlib.util.spec_from_file_location(
        "nnhal_proto_generate", REPO / "proto" / "generate.py"
    )
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def _pinned_grpcio_tools() -> str:
    text = (REPO / "pyproject.toml").read_text()
    match = re.search(r'"grpcio-tools==([0-9.]+)"', text)
    assert match, "pyproject.toml must pin grpcio-tools exactly (the stubs embed its version)"
    return match.group(1)


def test_committed_stubs_are_up_to_date(tmp_path: Path) -> None:
    from importlib.metadata import version

    installed = version("grpcio-tools")
    pinned = _pinned_grpcio_tools()
    assert installed == pinned, (
        f"grpcio-tools {installed} is installed but the stubs are generated with {pinned}: "
        f"pip install grpcio-tools=={pinned}"
    )
    gen = _load_generate_script()
    written = gen.generate(tmp_path)
    committed_dir = REPO / "nnhal" / "_proto"
    fresh = set(gen.generated_files(tmp_path))
    committed = set(gen.generated_files(committed_dir))
    assert set(written) == fresh
    assert fresh == committed, (
        f"missing: {sorted(map(str, fresh - committed))}, "
        f"extra: {sorted(map(str, committed - fresh))}; run python proto/generate.py"
    )
    stale = [
        str(rel)
        for rel in sorted(fresh)
        if (tmp_path / rel).read_bytes() != (committed_dir / rel).read_bytes()
    ]
    assert not stale, f"stale stubs {stale}: run python proto/generate.py"


def test_generated_imports_use_the_nnhal_proto_package() -> None:
    for path in (REPO / "nnhal" / "_proto").rglob("*.py"):
        text = path.read_text()
        assert "from nnhal.v1_3 import" not in text, path
        # message classes must say they live in nnhal._proto (pickle finds them there)
        assert "BuildTopDescriptorsAndMessages(DESCRIPTOR, 'nnhal.v1_3." not in text, path


def _camel_to_snake(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).upper()


_ENUM_PAIRS = [
    ("OperandType", T.OperandType),
    ("OperandTypeRange", T.OperandTypeRange),
    ("OperationType", T.OperationType),
    ("OperationTypeRange", T.OperationTypeRange),
    ("ErrorStatus", T.ErrorStatus),
    ("OperandLifeTime", T.OperandLifeTime),
    ("FusedActivationFunc", T.FusedActivationFunc),
    ("DeviceStatus", T.DeviceStatus),
    ("DeviceType", T.DeviceType),
    ("ExecutionPreference", T.ExecutionPreference),
    ("Priority", T.Priority),
    ("MeasureTiming", T.MeasureTiming),
]


@pytest.mark.parametrize("proto_name,py_enum", _ENUM_PAIRS, ids=[n for n, _ in _ENUM_PAIRS])
def test_proto_enum_matches_hal_numbers(proto_name: str, py_enum) -> None:
    from nnhal._proto.v1_3 import types_pb2

    descriptor = types_pb2.DESCRIPTOR.enum_types_by_name[proto_name]
    prefix = _camel_to_snake(proto_name) + "_"
    proto_values = {v.name: v.number for v in descriptor.values}
    expected = {prefix + m.name: int(m) for m in py_enum.__members__.values()}
    # allow_alias enums: __members__ includes the aliases too
    expected.update({prefix + name: int(m) for name, m in py_enum.__members__.items()})
    extra = {k: v for k, v in proto_values.items() if k not in expected}
    assert extra in ({}, {prefix + "UNSPECIFIED": 0}), extra
    for name, number in expected.items():
        assert proto_values.get(name) == number, (name, proto_values.get(name), number)


def test_hal_constants_in_proto() -> None:
    from nnhal._proto.v1_3 import types_pb2

    assert types_pb2.CONSTANT_BYTE_SIZE_OF_CACHE_TOKEN == T.BYTE_SIZE_OF_CACHE_TOKEN
    assert types_pb2.CONSTANT_MAX_NUMBER_OF_CACHE_FILES == T.MAX_NUMBER_OF_CACHE_FILES
    assert types_pb2.EXTENSION_TYPE_ENCODING_HIGH_BITS_PREFIX == T.EXTENSION_HIGH_BITS_PREFIX
    assert types_pb2.EXTENSION_TYPE_ENCODING_LOW_BITS_TYPE == T.EXTENSION_LOW_BITS_TYPE


_ALL_METHODS = {
    "IDevice": [
        "getCapabilities", "getCapabilities_1_1", "getCapabilities_1_2", "getCapabilities_1_3",
        "getSupportedOperations", "getSupportedOperations_1_1", "getSupportedOperations_1_2",
        "getSupportedOperations_1_3", "prepareModel", "prepareModel_1_1", "prepareModel_1_2",
        "prepareModel_1_3", "prepareModelFromCache", "prepareModelFromCache_1_3", "getStatus",
        "getVersionString", "getType", "getSupportedExtensions", "getNumberOfCacheFilesNeeded",
        "allocate", "explainSupportedOperations",
    ],
    "IPreparedModel": [
        "execute", "execute_1_2", "execute_1_3", "executeSynchronously",
        "executeSynchronously_1_3", "executeFenced", "configureExecutionBurst", "release",
    ],
    "IBuffer": ["copyTo", "copyFrom", "release"],
    "IFencedExecutionCallback": ["getExecutionInfo", "release"],
}  # fmt: skip


@pytest.mark.parametrize("service", sorted(_ALL_METHODS))
def test_services_have_every_hal_method(service: str) -> None:
    from nnhal._proto.v1_3 import device_pb2, prepared_model_pb2

    module = device_pb2 if service == "IDevice" else prepared_model_pb2
    methods = module.DESCRIPTOR.services_by_name[service].methods_by_name
    assert sorted(methods) == sorted(_ALL_METHODS[service])
    for method in methods.values():
        reply = method.output_type
        assert reply.fields_by_name["status"].enum_type.name == "ErrorStatus", method.name
        assert reply.fields_by_name["message"].type == reply.fields_by_name["message"].TYPE_STRING


def test_burst_is_a_bidirectional_stream() -> None:
    from nnhal._proto.v1_3 import prepared_model_pb2

    method = prepared_model_pb2.DESCRIPTOR.services_by_name["IPreparedModel"].methods_by_name[
        "configureExecutionBurst"
    ]
    assert method.client_streaming and method.server_streaming


# ---------------------------------------------------------------------------
# nnhal.convert: every structure survives a trip through its message
# ---------------------------------------------------------------------------


def _sample_model() -> T.Model:
    L = T.OperandLifeTime
    main = T.Subgraph(
        operands=(
            T.Operand(T.OperandType.TENSOR_FLOAT32, (2, 0), 1, lifetime=L.SUBGRAPH_INPUT),
            T.Operand(
                T.OperandType.TENSOR_QUANT8_SYMM_PER_CHANNEL,
                (3, 1),
                1,
                lifetime=L.CONSTANT_REFERENCE,
                location=T.DataLocation(0, 8, 3),
                extraParams=T.SymmPerChannelQuantParams((0.5, 0.25, 2.0), 0),
            ),
            T.Operand(
                T.OperandType.INT32,
                (),
                1,
                lifetime=L.CONSTANT_COPY,
                location=T.DataLocation(0, 0, 4),
            ),
            T.Operand(
                T.OperandType.SUBGRAPH, (), 1, lifetime=L.SUBGRAPH, location=T.DataLocation(0, 1, 0)
            ),
            T.Operand(
                (7 << 16) | 3,
                (4,),
                0,
                scale=0.125,
                zeroPoint=-3,
                lifetime=L.SUBGRAPH_OUTPUT,
                extraParams=b"\x01\x02",
            ),
            T.Operand(T.OperandType.TENSOR_FLOAT32, (), 0, lifetime=L.NO_VALUE),
        ),
        operations=(T.Operation((7 << 16) | 1, (0, 1, 2, 3, 5), (4,)),),
        inputIndexes=(0,),
        outputIndexes=(4,),
    )
    ref = T.Subgraph(
        operands=(T.Operand(T.OperandType.TENSOR_FLOAT32, (1,), 0, lifetime=L.SUBGRAPH_INPUT),),
        operations=(),
        inputIndexes=(0,),
        outputIndexes=(0,),
    )
    return T.Model(
        main=main,
        referenced=(ref, ref),
        operandValues=b"\x00\x00\x00\x01",
        pools=(T.InlineMemory(bytes(range(16))), T.SharedMemory("psm_test", 4096)),
        relaxComputationFloat32toFloat16=True,
        extensionNameToPrefix=(T.ExtensionNameAndPrefix("com.example.ext", 7),),
    )


def _samples() -> list:
    perf = T.PerformanceInfo(0.5, 2.0)
    return [
        _sample_model(),
        T.Request(
            inputs=(
                T.RequestArgument(False, T.DataLocation(0, 0, 8), (2, 1)),
                T.RequestArgument(hasNoValue=True),
            ),
            outputs=(T.RequestArgument(False, T.DataLocation(2, 0, 0), ()),),
            pools=(T.InlineMemory(b"abcdefgh"), T.SharedMemory("psm_x", 64), T.TokenMemory(5)),
        ),
        T.Capabilities(
            perf,
            T.PerformanceInfo(0.25, 0.75),
            (
                T.OperandPerformance(T.OperandType.FLOAT32, perf),
                T.OperandPerformance(T.OperandType.TENSOR_OEM_BYTE, perf),
            ),
            perf,
            T.PerformanceInfo(1.5, 1.0),
        ),
        T.OutputShape((3, 4), False),
        T.Timing(12, 34),
        T.Timing(),
        T.OptionalTimePoint(123456789),
        T.OptionalTimePoint(),
        T.OptionalTimeoutDuration(2_000_000_000),
        T.OptionalTimeoutDuration(),
        T.Extension("com.example.ext", (T.OperandTypeInformation(3, True, 2),)),
        T.BufferDesc((1, 0, 3)),
        T.BufferRole(1, 2, 0.5),
        T.DataLocation(1, 2, 3),
        T.SymmPerChannelQuantParams((1.0,), 2),
        T.ExtensionNameAndPrefix("a.b", 65535),
        T.InlineMemory(b"xyz"),
        T.SharedMemory("psm_y", 1),
        T.TokenMemory(9),
    ]


@pytest.mark.parametrize("value", _samples(), ids=lambda v: type(v).__name__)
def test_convert_round_trip(value) -> None:
    from nnhal import convert

    message = convert.to_pb(value)
    again = type(message).FromString(message.SerializeToString())
    assert convert.from_pb(again) == value


def test_convert_legacy_models() -> None:
    import dataclasses

    from nnhal import convert
    from nnhal import convert_legacy as legacy

    model = _sample_model()
    flat = dataclasses.replace(model, referenced=())
    v1_2 = legacy.model_to_v1_2_pb(flat)
    assert convert.from_pb(v1_2) == flat
    plain = dataclasses.replace(
        flat,
        main=dataclasses.replace(
            flat.main,
            operands=tuple(dataclasses.replace(o, extraParams=None) for o in flat.main.operands),
        ),
        extensionNameToPrefix=(),
    )
    assert legacy.model_from_v1_1_pb(legacy.model_to_v1_1_pb(plain)) == plain
    unrelaxed = dataclasses.replace(plain, relaxComputationFloat32toFloat16=False)
    assert legacy.model_from_v1_0_pb(legacy.model_to_v1_0_pb(unrelaxed)) == unrelaxed
    with pytest.raises(ValueError):
        legacy.model_to_v1_0_pb(model)  # referenced subgraphs
    with pytest.raises(ValueError):
        legacy.model_to_v1_1_pb(dataclasses.replace(flat, extensionNameToPrefix=()))  # extraParams
    request = T.Request((), (), (T.InlineMemory(b"a"), T.SharedMemory("s", 2)))
    assert convert.from_pb(legacy.request_to_v1_0_pb(request)) == request
    with pytest.raises(TypeError):
        legacy.request_to_v1_0_pb(T.Request((), (), (T.TokenMemory(1),)))


def test_convert_keeps_invalid_values_for_validation() -> None:
    from nnhal import convert

    operand = T.Operand(type=-1, dimensions=(1,), lifetime=99)  # as VTS mutations send them
    back = convert.operand_from_pb(convert.operand_to_pb(operand))
    assert back.type == -1 and back.lifetime == 99
    big = T.Operation(type=0xFFFF0001, inputs=(), outputs=())
    assert convert.operation_to_pb(big).type == 0xFFFF0001 - 2**32  # the HAL's int32
    with pytest.raises(TypeError):
        convert.to_pb(object())
