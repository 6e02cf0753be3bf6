"""Exposure: what clients name cannot make the server read or write elsewhere.

Cache files (driver/cache_paths.py), shared-memory names (driver/memory.py),
pool offsets and lengths (validation), and op packages (only from explicit
paths and entry points, never from model content). Every attempt must end in
an error status with a message, and the server keeps serving.
"""

from __future__ import annotations

import importlib
import os
import sys
from multiprocessing import shared_memory
from pathlib import Path

import numpy as np
import pytest
from nnhal.driver.cache_paths import confine, open_cache_file
from nnhal.driver.device import Device
from nnhal.driver.security import _CALL_IS_LOCAL, ServerSecurity
from nnhal.driver.server import create_server

from nnhal._client_security import ClientSecurity
from nnhal.builder import ModelBuilder
from nnhal.client import connect
from nnhal.errors import GeneralFailure, InvalidArgument
from nnhal.types import (
    DataLocation,
    DeviceStatus,
    InlineMemory,
    OperandType,
    OperationType,
    Request,
    RequestArgument,
    SharedMemory,
)

F32 = OperandType.TENSOR_FLOAT32
TOKEN = bytes(range(32))
X = np.array([1, 2, 3], np.float32)


def add_model(reference: bool = False):
    """y = a + c (c a constant, in a model pool when ``reference``)."""
    mb = ModelBuilder()
    g = mb.main
    a = g.input(F32, [3])
    c = g.constant(F32, np.array([10, 20, 30], np.float32), reference=reference)
    y = g.output(F32, [3])
    g.operation(OperationType.ADD, [a, c, g.constant(OperandType.INT32, 0)], [y])
    return mb.build()


@pytest.fixture
def roots(tmp_path):
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    allowed.mkdir()
    outside.mkdir()
    return allowed, outside


@pytest.fixture
def confined(roots):
    """A client of a loopback server that confines cache files to ``roots[0]``."""
    server, address = create_server(
        Device(), "127.0.0.1:0", security=ServerSecurity(cache_roots=(str(roots[0]),))
    )
    with connect(address) as dev:
        yield dev
    server.stop(None).wait()


def handles(model_path: Path, data_path: Path):
    for p in (model_path, data_path):
        if not p.exists() and not p.is_symlink():
            p.touch()
    return [[str(model_path)]], [[str(data_path)]]


def save_ok(dev, folder: Path):
    mc, dc = handles(folder / "m", folder / "d")
    dev.prepareModel_1_3(add_model(), modelCache=mc, dataCache=dc, token=TOKEN).release()
    assert (folder / "m").stat().st_size > 0
    return mc, dc


# ---------------------------------------------------------------------------
# Cache files
# ---------------------------------------------------------------------------


def test_confined_cache_inside_the_root_works(confined, roots) -> None:
    mc, dc = save_ok(confined, roots[0])
    prepared = confined.prepareModelFromCache_1_3(mc, dc, TOKEN, model=add_model())
    np.testing.assert_array_equal(prepared.execute([X]).outputs[0], X + [10, 20, 30])


def test_confined_cache_refuses_escapes_when_loading(confined, roots) -> None:
    allowed, outside = roots
    good_mc, good_dc = save_ok(confined, allowed)
    # a valid cache copied outside the root is still refused: the place is what counts
    for src, name in ((good_mc, "m"), (good_dc, "d")):
        (outside / name).write_bytes(Path(src[0][0]).read_bytes())
    (allowed / "link-m").symlink_to(outside / "m")
    (allowed / "linkdir").symlink_to(outside, target_is_directory=True)
    attempts = {
        "outside": ([[str(outside / "m")]], [[str(outside / "d")]], "outside the directories"),
        "dotdot": ([[f"{allowed}/../outside/m"]], good_dc, "'..' component"),
        "relative": ([["m"]], good_dc, "must be an absolute path"),
        "symlink": ([[str(allowed / "link-m")]], good_dc, "outside the directories"),
        "symlinked-dir": ([[str(allowed / "linkdir" / "m")]], good_dc, "outside the directories"),
        "root-itself": ([[str(allowed)]], good_dc, "outside the directories"),
        "etc-passwd": ([["/etc/passwd"]], good_dc, "outside the directories"),
    }
    for why, (mc, dc, fragment) in attempts.items():
        with pytest.raises(InvalidArgument) as info:
            confined.prepareModelFromCache_1_3(mc, dc, TOKEN, model=add_model())
        assert fragment in info.value.message, (why, info.value.message)
        assert "modelCache" in info.value.message
    assert confined.getStatus() == DeviceStatus.AVAILABLE


def test_confined_cache_never_writes_outside(confined, roots) -> None:
    allowed, outside = roots
    precious = outside / "precious"
    precious.write_bytes(b"precious bytes")
    (allowed / "trap").symlink_to(precious)
    data = allowed / "d"
    data.touch()
    for target in (str(precious), str(allowed / "trap"), f"{allowed}/../outside/precious"):
        prepared = confined.prepareModel_1_3(
            add_model(), modelCache=[[target]], dataCache=[[str(data)]], token=TOKEN
        )  # the HAL: a cache that cannot be written never fails the preparation
        np.testing.assert_array_equal(prepared.execute([X]).outputs[0], X + [10, 20, 30])
        prepared.release()
        assert precious.read_bytes() == b"precious bytes"


@pytest.mark.parametrize("host", ["127.0.0.1", "0.0.0.0"], ids=["loopback", "exposed"])
def test_without_a_cache_root_client_cache_files_are_refused(tmp_path, host) -> None:
    """No --cache-root: no client-named file, on loopback too; --cache-dir still works."""
    from nnhal.driver.cache import CompilationCache

    device = Device()
    device.cache = CompilationCache(tmp_path / "server-cache")
    server, address = create_server(
        [device], f"{host}:0", security=ServerSecurity(allow_insecure=True)
    )
    try:
        assert device.cache.allowed_roots == ()
        port = address.rpartition(":")[2]
        with connect(f"127.0.0.1:{port}") as dev:
            assert dev.getNumberOfCacheFilesNeeded() == (0, 0)  # the HAL's "no caching"
            precious = tmp_path / ".profile"
            precious.write_bytes(b"echo precious\n")
            with pytest.raises(InvalidArgument, match="accepts no cache files named by clients"):
                dev.prepareModelFromCache_1_3([[str(precious)]], [[str(precious)]], TOKEN)
            prepared = dev.prepareModel_1_3(
                add_model(), modelCache=[[str(precious)]], dataCache=[[str(precious)]], token=TOKEN
            )  # prepared, not cached, the file unchanged
            prepared.release()
            assert precious.read_bytes() == b"echo precious\n"
            # the server's own directory (token, no handles) still works
            dev.prepareModel_1_3(add_model(), token=TOKEN).release()
            prepared = dev.prepareModelFromCache_1_3(token=TOKEN, model=add_model())
            np.testing.assert_array_equal(prepared.execute([X]).outputs[0], X + [10, 20, 30])
    finally:
        server.stop(None).wait()
    with pytest.raises(InvalidArgument, match="accepts no cache files named by clients"):
        confine("/tmp/x", (), "prepareModelFromCache_1_3: modelCache")


def test_special_files_never_hang_or_flood(confined, roots) -> None:
    """Inside the root: still only regular files (in-process Device API: the same)."""
    allowed = roots[0]
    fifo = allowed / "fifo"
    os.mkfifo(fifo)
    (allowed / "dir").mkdir()
    data = allowed / "d"
    data.touch()
    in_process = Device()
    for special in (str(fifo), str(allowed / "dir")):
        with pytest.raises(GeneralFailure, match="cannot read the model cache"):
            confined.prepareModelFromCache_1_3([[special]], [[str(data)]], TOKEN)
        confined.prepareModel_1_3(
            add_model(), modelCache=[[special]], dataCache=[[str(data)]], token=TOKEN
        ).release()
    for special in ("/dev/zero", str(fifo), str(allowed / "dir")):
        with pytest.raises(GeneralFailure, match="cannot read the model cache"):
            in_process.prepareModelFromCache_1_3(
                modelCache=[[special]], dataCache=[[str(data)]], token=TOKEN
            )
    assert confined.getStatus() == DeviceStatus.AVAILABLE


def test_open_cache_file_checks_what_was_opened(roots) -> None:
    allowed, outside = roots
    (outside / "f").write_bytes(b"x")
    (allowed / "sub").symlink_to(outside, target_is_directory=True)
    with pytest.raises(OSError, match="resolved outside"):
        open_cache_file(str(allowed / "sub" / "f"), "rb", (str(allowed),))
    (allowed / "final").symlink_to(outside / "f")
    with pytest.raises(OSError):  # O_NOFOLLOW: a final symbolic link is never opened
        open_cache_file(str(allowed / "final"), "rb", None)
    (allowed / "ok").write_bytes(b"y")
    with open_cache_file(str(allowed / "ok"), "rb", (str(allowed),)) as f:
        assert f.read() == b"y"


# ---------------------------------------------------------------------------
# Shared memory names and callers
# ---------------------------------------------------------------------------


def shm_request(name: str, size: int = 24, offset: int = 0) -> Request:
    return Request(
        inputs=(RequestArgument(location=DataLocation(0, offset, 12)),),
        outputs=(RequestArgument(location=DataLocation(0, offset + 12, 12)),),
        pools=(SharedMemory(name=name, size=size),),
    )


BAD_NAMES = ["../../etc/passwd", "a/b", "/a/b", "..", "/..", ".", "x" * 256, "nul\0", "sp ace", ""]


@pytest.mark.parametrize("name", BAD_NAMES, ids=lambda n: repr(n[:12]))
def test_bad_segment_names_are_refused(client_device, name) -> None:
    prepared = client_device.prepareModel_1_3(add_model())
    try:
        with pytest.raises(InvalidArgument) as info:
            prepared.execute_request(shm_request(name))
        assert "shared memory" in info.value.message and ("segment name" in info.value.message), (
            info.value.message
        )
    finally:
        prepared.release()


def test_bad_segment_name_in_a_burst_slot(client_device) -> None:
    prepared = client_device.prepareModel_1_3(add_model())
    try:
        with prepared.burst() as burst:
            with pytest.raises(InvalidArgument, match="not a segment name"):
                burst.register(SharedMemory(name="../../dev/shm/other", size=24))
            np.testing.assert_array_equal(burst.execute([X]).outputs[0], X + [10, 20, 30])
    finally:
        prepared.release()


def test_bad_segment_name_in_a_model_pool(client_device) -> None:
    import dataclasses

    model = add_model(reference=True)
    model = dataclasses.replace(model, pools=(SharedMemory(name="../../dev/zero", size=12),))
    with pytest.raises(InvalidArgument, match="not a segment name"):
        client_device.prepareModel_1_3(model)


def test_segment_bounds(client_device) -> None:
    segment = shared_memory.SharedMemory(create=True, size=24)
    prepared = client_device.prepareModel_1_3(add_model())
    try:
        segment.buf[:12] = X.tobytes()
        prepared.execute_request(shm_request(segment.name))  # the pool as given: fine
        out = np.frombuffer(bytes(segment.buf[12:24]), np.float32)
        np.testing.assert_array_equal(out, X + [10, 20, 30])
        with pytest.raises(InvalidArgument, match="the segment has"):
            prepared.execute_request(shm_request(segment.name, size=1 << 20))
        with pytest.raises(InvalidArgument, match="outside pool"):
            prepared.execute_request(shm_request(segment.name, offset=4))
    finally:
        prepared.release()
        segment.close()
        segment.unlink()


def test_remote_callers_cannot_name_segments() -> None:
    from nnhal.driver.memory import attach_shared_memory

    mark = _CALL_IS_LOCAL.set(False)  # as the interceptor marks a call from another host
    try:
        with pytest.raises(InvalidArgument, match="need a client on the server's host"):
            attach_shared_memory("psm_anything", 8)
    finally:
        _CALL_IS_LOCAL.reset(mark)


def test_remote_caller_end_to_end(tmp_path) -> None:
    """Through a TLS server on this host's non-loopback address: shared memory refused,
    inline data fine."""
    from certs import make_pki
    from test_security import non_loopback_ip

    ip = non_loopback_ip()
    if ip is None:
        pytest.skip("this host has no non-loopback IPv4 address")
    pki = make_pki(tmp_path / "pki", extra_ips=(ip,))
    security = ServerSecurity.from_files(tls_cert=pki["server_cert"], tls_key=pki["server_key"])
    server, address = create_server(Device(), f"{ip}:0", security=security)
    try:
        with connect(address, security=ClientSecurity.from_files(tls_ca=pki["ca"])) as dev:
            prepared = dev.prepareModel_1_3(add_model())
            with pytest.raises(InvalidArgument, match="need a client on the server's host"):
                prepared.execute([X], memory="shared")
            np.testing.assert_array_equal(prepared.execute([X]).outputs[0], X + [10, 20, 30])
            segment = shared_memory.SharedMemory(create=True, size=24)
            try:  # a burst attaches segments in its stream: refused there too
                with prepared.burst() as burst:
                    with pytest.raises(InvalidArgument, match="need a client on the server's"):
                        burst.register(SharedMemory(name=segment.name, size=24))
                    out = burst.execute([X]).outputs[0]
                    np.testing.assert_array_equal(out, X + [10, 20, 30])
            finally:
                segment.close()
                segment.unlink()
    finally:
        server.stop(None).wait()


# ---------------------------------------------------------------------------
# Offsets and lengths
# ---------------------------------------------------------------------------


def inline_request(in_loc: DataLocation, out_loc: DataLocation, size: int = 24) -> Request:
    return Request(
        inputs=(RequestArgument(location=in_loc),),
        outputs=(RequestArgument(location=out_loc),),
        pools=(InlineMemory(bytes(size)),),
    )


U32 = (1 << 32) - 1
BAD_LOCATIONS = {
    "offset-beyond": (DataLocation(0, 24, 12), DataLocation(0, 12, 12), "outside pool"),
    "end-beyond": (DataLocation(0, 16, 12), DataLocation(0, 0, 12), "outside pool"),
    "u32-wrap": (DataLocation(0, U32, 12), DataLocation(0, 12, 12), "outside pool"),
    "huge-length": (DataLocation(0, 0, U32), DataLocation(0, 12, 12), ""),
    "no-such-pool": (DataLocation(1, 0, 12), DataLocation(0, 12, 12), "pool"),
    "output-beyond": (DataLocation(0, 0, 12), DataLocation(0, 20, 12), "outside pool"),
}


@pytest.mark.parametrize("case", sorted(BAD_LOCATIONS))
def test_bad_request_locations(client_device, case) -> None:
    in_loc, out_loc, fragment = BAD_LOCATIONS[case]
    prepared = client_device.prepareModel_1_3(add_model())
    try:
        with pytest.raises(InvalidArgument) as info:
            prepared.execute_request(inline_request(in_loc, out_loc))
        assert fragment in info.value.message, info.value.message
        good = prepared.execute_request(
            inline_request(DataLocation(0, 0, 12), DataLocation(0, 12, 12))
        )
        assert len(good.pools[0]) == 24  # the server still serves the same prepared model
    finally:
        prepared.release()


def test_bad_constant_reference_locations(client_device) -> None:
    import dataclasses

    model = add_model(reference=True)
    main = model.main
    k = next(i for i, o in enumerate(main.operands) if o.location.length == 12)
    for loc in (DataLocation(0, 4, 12), DataLocation(0, U32, 12), DataLocation(0, 0, U32)):
        operands = list(main.operands)
        operands[k] = dataclasses.replace(operands[k], location=loc)
        bad = dataclasses.replace(model, main=dataclasses.replace(main, operands=tuple(operands)))
        with pytest.raises(InvalidArgument, match="CONSTANT_REFERENCE location|constant location"):
            client_device.prepareModel_1_3(bad)
    assert client_device.getStatus() == DeviceStatus.AVAILABLE


# ---------------------------------------------------------------------------
# Op packages come from explicit paths and entry points only
# ---------------------------------------------------------------------------


def test_model_naming_an_extension_imports_nothing(client_device, tmp_path, monkeypatch) -> None:
    # a directory that *would* run code if anything imported from it
    pkg = tmp_path / "evilpkg"
    (pkg / "kernels").mkdir(parents=True)
    marker = tmp_path / "imported"
    code = f"open({str(marker)!r}, 'w').write('ran')\n"
    for f in (pkg / "__init__.py", pkg / "kernels" / "__init__.py", pkg / "kernels" / "op.py"):
        f.write_text(code)
    (pkg / "spec.json").write_text('{"spec": {}}')
    monkeypatch.syspath_prepend(str(tmp_path))
    calls = []
    from nnhal.driver.op_packages import discovery, runtime

    for mod, name in (
        (discovery, "discover"),
        (discovery, "load_path"),
        (discovery, "_entry_points"),
        (runtime, "load_kernels"),
    ):
        original = getattr(mod, name)
        monkeypatch.setattr(
            mod, name, lambda *a, _n=name, _o=original, **k: calls.append(_n) or _o(*a, **k)
        )
    real_import = importlib.import_module
    monkeypatch.setattr(
        importlib, "import_module", lambda n, *a: calls.append(n) or real_import(n, *a)
    )
    before = set(sys.modules)
    for name in ("evilpkg", str(pkg), f"{pkg}/kernels/op.py", "os.system", "evilpkg.kernels.op"):
        mb = ModelBuilder()
        mb.extension(name, 3)
        g = mb.main
        x = g.input(F32, [1])
        g.operation(3 << 16, [x], [g.output(F32, [1])])
        model = mb.build()
        supported, reasons = client_device.explainSupportedOperations(model)
        assert supported == [False] and "supports no vendor extensions" in reasons[0]
        with pytest.raises(InvalidArgument):
            client_device.prepareModel_1_3(model)
    assert not marker.exists()
    assert calls == []
    assert not {m for m in set(sys.modules) - before if "evil" in m or "oppkg" in m}
