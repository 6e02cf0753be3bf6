"""Compilation caching (driver/cache.py) through the gRPC service and the Device API."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from repo_paths import REPO_ROOT

from nnhal.builder import ModelBuilder
from nnhal.errors import GeneralFailure, InvalidArgument
from nnhal.types import OperandType, OperationType

F32 = OperandType.TENSOR_FLOAT32
TOKEN = bytes(range(32))


def fc_model(seed: int = 0, reference: bool = False):
    """y = relu(x W^T + b), weights as constants (in operandValues or a model pool)."""
    rng = np.random.default_rng(seed)
    mb = ModelBuilder()
    g = mb.main
    x = g.input(F32, [2, 4])
    w = g.constant(F32, rng.standard_normal((3, 4)).astype(np.float32), reference=reference)
    b = g.constant(F32, rng.standard_normal(3).astype(np.float32))
    y = g.output(F32, [2, 3])
    g.operation(OperationType.FULLY_CONNECTED, [x, w, b, g.constant(OperandType.INT32, 1)], [y])
    return mb.build()


X = np.arange(8, dtype=np.float32).reshape(2, 4) / 8 - 0.3


@pytest.fixture(scope="module")
def _rooted_server(tmp_path_factory):
    """A server that accepts client cache files under pytest's temporary directory
    (every ``tmp_path``): without a cache root a server accepts none."""
    from nnhal.driver.device import Device
    from nnhal.driver.security import ServerSecurity
    from nnhal.driver.server import create_server

    root = str(tmp_path_factory.getbasetemp())
    server, address = create_server(
        Device(), "127.0.0.1:0", security=ServerSecurity(cache_roots=(root,))
    )
    try:
        yield address
    finally:
        server.stop(grace=None).wait()


@pytest.fixture
def client_device(_rooted_server):
    from nnhal.client import connect

    device = connect(_rooted_server, timeout=10.0)
    try:
        yield device
    finally:
        device.close()


def handles(folder: Path, prefix: str = "") -> tuple[list[list[str]], list[list[str]]]:
    m, d = folder / f"{prefix}model", folder / f"{prefix}data"
    m.touch()
    d.touch()
    return [[str(m)]], [[str(d)]]


def saved(client_device, folder: Path, model=None, token=TOKEN, prefix=""):
    model = model if model is not None else fc_model()
    mc, dc = handles(folder, prefix)
    prepared = client_device.prepareModel_1_3(model, modelCache=mc, dataCache=dc, token=token)
    expected = prepared.execute([X]).outputs[0]
    prepared.release()
    return model, mc, dc, expected


def test_number_of_cache_files(client_device) -> None:
    assert client_device.getNumberOfCacheFilesNeeded() == (1, 1)


@pytest.mark.parametrize("reference", [False, True], ids=["operandValues", "model-pool"])
def test_save_and_retrieve(client_device, tmp_path, reference) -> None:
    model, mc, dc, expected = saved(client_device, tmp_path, fc_model(reference=reference))
    assert Path(mc[0][0]).stat().st_size > 0 and Path(dc[0][0]).stat().st_size > 0
    prepared = client_device.prepareModelFromCache_1_3(mc, dc, TOKEN, model=model)
    np.testing.assert_array_equal(prepared.execute([X]).outputs[0], expected)
    prepared.release()


def _flip(path: str, at: int) -> None:
    data = bytearray(Path(path).read_bytes())
    data[at % len(data)] ^= 0x10
    Path(path).write_bytes(bytes(data))


@pytest.mark.parametrize(
    "tamper",
    [
        "wrong-token",
        "flip-model-start",
        "flip-model-middle",
        "flip-model-end",
        "flip-data",
        "truncate-model",
        "append-model",
        "append-data",
        "empty-model",
    ],
)
def test_tampered_cache_is_general_failure(client_device, tmp_path, tamper) -> None:
    model, mc, dc, _ = saved(client_device, tmp_path)
    token = TOKEN
    m, d = mc[0][0], dc[0][0]
    size = Path(m).stat().st_size
    if tamper == "wrong-token":
        token = bytes([TOKEN[0] ^ 1]) + TOKEN[1:]
    elif tamper == "flip-model-start":
        _flip(m, 0)
    elif tamper == "flip-model-middle":
        _flip(m, size // 2)
    elif tamper == "flip-model-end":
        _flip(m, size - 1)
    elif tamper == "flip-data":
        _flip(d, Path(d).stat().st_size - 1)
    elif tamper == "truncate-model":
        os.truncate(m, size - 1)
    elif tamper == "append-model":
        with open(m, "ab") as f:
            f.write(b"\x00" * 7)
    elif tamper == "append-data":
        with open(d, "ab") as f:
            f.write(b"\x01")
    elif tamper == "empty-model":
        os.truncate(m, 0)
    with pytest.raises(GeneralFailure, match="cache"):
        client_device.prepareModelFromCache_1_3(mc, dc, token, model=model)


def test_other_models_cache_is_general_failure(client_device, tmp_path) -> None:
    model, mc, dc, _ = saved(client_device, tmp_path)
    other_token = bytes(reversed(TOKEN))
    _, mc2, dc2, _ = saved(client_device, tmp_path, fc_model(seed=1), other_token, prefix="b-")
    # model B's security-sensitive cache in place of model A's
    Path(mc[0][0]).write_bytes(Path(mc2[0][0]).read_bytes())
    with pytest.raises(GeneralFailure):
        client_device.prepareModelFromCache_1_3(mc, dc, TOKEN, model=model)
    # model B's whole cache under model A's token
    with pytest.raises(GeneralFailure):
        client_device.prepareModelFromCache_1_3(mc2, dc2, TOKEN, model=model)


def test_cache_arguments_never_fail_preparation(client_device, tmp_path) -> None:
    mc, dc = handles(tmp_path)
    extra = str(tmp_path / "extra")
    Path(extra).touch()
    readonly = tmp_path / "ro"
    readonly.touch()
    readonly.chmod(0o444)
    cases = [
        (mc + [[extra]], dc, TOKEN),  # one model cache too many
        ([], dc, TOKEN),  # one missing
        ([[mc[0][0], extra]], dc, TOKEN),  # two fds in a handle
        ([[]], dc, TOKEN),  # no fd
        (mc, dc, b"short"),  # bad token
        ([[str(tmp_path / "missing" / "file")]], dc, TOKEN),  # cannot be opened
    ]
    if os.geteuid() != 0:
        cases.append(([[str(readonly)]], dc, TOKEN))  # read-only: not cached
    for model_cache, data_cache, token in cases:
        prepared = client_device.prepareModel_1_3(
            fc_model(), modelCache=model_cache, dataCache=data_cache, token=token
        )
        assert prepared.execute([X]).outputs[0].shape == (2, 3)
        prepared.release()
        if model_cache == mc or model_cache == []:
            assert Path(mc[0][0]).stat().st_size == 0  # nothing was written


def test_load_with_bad_arguments(client_device, tmp_path) -> None:
    _, mc, dc, _ = saved(client_device, tmp_path)
    with pytest.raises(InvalidArgument, match="modelCache"):
        client_device.prepareModelFromCache_1_3(mc + mc, dc, TOKEN)
    with pytest.raises(InvalidArgument, match="exactly one file"):
        client_device.prepareModelFromCache_1_3([[mc[0][0], dc[0][0]]], dc, TOKEN)
    with pytest.raises(InvalidArgument, match="token"):
        client_device.prepareModelFromCache_1_3(mc, dc, TOKEN[:31])
    with pytest.raises(InvalidArgument, match="no cache handles"):
        client_device.prepareModelFromCache_1_3([], [], TOKEN)
    with pytest.raises(GeneralFailure, match="cannot read"):
        client_device.prepareModelFromCache_1_3([[str(tmp_path / "nope")]], dc, TOKEN)


def test_server_side_cache_dir_and_profile_binding(tmp_path) -> None:
    from nnhal.driver.cache import CompilationCache
    from nnhal.driver.device import Device
    from nnhal.driver.memory import MappedPools
    from nnhal.driver.profile import load_profile

    from nnhal.types import DataLocation, InlineMemory, Request, RequestArgument

    device = Device()
    device.cache = CompilationCache(tmp_path / "cache")
    model = fc_model()
    device.prepareModel_1_3(model, token=TOKEN)
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [
        f"{TOKEN.hex()}.data",
        f"{TOKEN.hex()}.model",
    ]
    prepared = device.prepareModelFromCache_1_3(token=TOKEN)
    request = Request(
        inputs=(RequestArgument(location=DataLocation(0, 0, 32)),),
        outputs=(RequestArgument(location=DataLocation(1, 0, 24)),),
        pools=(InlineMemory(X.tobytes()), InlineMemory(bytes(24))),
    )
    with MappedPools(request.pools) as mapped:
        prepared.execute(request, mapped.views)
        got = np.frombuffer(bytes(mapped.views[1]), np.float32)
    assert got.shape == (6,) and np.all(got >= 0)
    # another profile's device must not use this cache
    npu = Device(load_profile("example-npu"))
    npu.cache = device.cache
    with pytest.raises(GeneralFailure, match="another device profile"):
        npu.prepareModelFromCache_1_3(token=TOKEN)


def test_hal_1_2_entry_points_cache_too(client_device, tmp_path) -> None:
    from nnhal import convert_legacy as legacy
    from nnhal._proto.v1_3 import device_pb2 as dpb
    from nnhal._proto.v1_3 import types_pb2 as tpb
    from nnhal.types import ErrorStatus

    model = fc_model()
    mc, dc = handles(tmp_path)
    stub = client_device.stub
    reply = stub.prepareModel_1_2(
        dpb.PrepareModelRequest_1_2(
            model=legacy.model_to_v1_2_pb(model),
            modelCache=[tpb.CacheHandle(paths=h) for h in mc],
            dataCache=[tpb.CacheHandle(paths=h) for h in dc],
            token=TOKEN,
        )
    )
    assert reply.status == ErrorStatus.NONE and Path(mc[0][0]).stat().st_size > 0
    loaded = stub.prepareModelFromCache(
        dpb.PrepareModelFromCacheRequest(
            modelCache=[tpb.CacheHandle(paths=h) for h in mc],
            dataCache=[tpb.CacheHandle(paths=h) for h in dc],
            token=TOKEN,
        )
    )
    assert loaded.status == ErrorStatus.NONE and loaded.preparedModel > 0


def test_serve_cache_dir_option(tmp_path) -> None:
    import argparse

    from nnhal.driver.device import Device
    from nnhal.tools.cli_trace import configure_devices

    device = Device()
    assert configure_devices([device], argparse.Namespace(cache_dir=str(tmp_path))) == "'default'"
    device.prepareModel_1_3(fc_model(), token=TOKEN)
    assert (tmp_path / "default" / f"{TOKEN.hex()}.model").is_file()
    assert device.prepareModelFromCache_1_3(token=TOKEN).model.main == fc_model().main


def test_a_device_with_op_packages_does_not_cache(tmp_path) -> None:
    from nnhal.driver.device import Device
    from nnhal.driver.op_packages.discovery import load_path

    root = REPO_ROOT / "examples" / "qnn_xml"
    configs = sorted(root.glob("*.xml"))
    if not configs:
        pytest.skip("examples/qnn_xml has no op package")
    device = Device(op_packages=load_path(configs[0]))
    mc, dc = handles(tmp_path)
    device.prepareModel_1_3(fc_model(), modelCache=mc, dataCache=dc, token=TOKEN)
    assert Path(mc[0][0]).stat().st_size == 0  # prepared, not cached
    # a cache written by the same-named device without packages is not used either
    Device().prepareModel_1_3(fc_model(), modelCache=mc, dataCache=dc, token=TOKEN)
    with pytest.raises(GeneralFailure, match="op packages"):
        device.prepareModelFromCache_1_3(None, mc, dc, TOKEN)
