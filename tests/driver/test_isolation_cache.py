"""Cache files a client names cannot be weapons (driver/cache_paths.py, docs/security.md).

Each hostile file below is named as a model cache (saving: prepareModel_1_3;
loading: prepareModelFromCache_1_3) on a server with a cache root and on one
without; every time the file must be unchanged, saving must still prepare the
model (the HAL: cache arguments never change the outcome) and loading must be
refused, with the server's memory flat.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from dying_client import add_model
from nnhal.driver.device import Device
from nnhal.driver.security import ServerSecurity
from nnhal.driver.server import create_server

from nnhal.client import connect
from nnhal.errors import GeneralFailure, InvalidArgument

TOKEN = bytes(range(32))
X = np.ones(2, np.float32)


def _rss_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.fixture
def root(tmp_path):
    folder = tmp_path / "root"
    folder.mkdir()
    return folder


@pytest.fixture(params=["rooted", "default"])
def client(request, root):
    roots = (str(root),) if request.param == "rooted" else None
    server, address = create_server(
        Device(), "127.0.0.1:0", security=ServerSecurity(cache_roots=roots)
    )
    with connect(address) as dev:
        yield dev
    server.stop(None).wait()


def _attempt(dev, target: str, data: str) -> None:
    """Save to ``target`` (must still prepare) then load from it (must be refused)."""
    prepared = dev.prepareModel_1_3(
        add_model(), modelCache=[[target]], dataCache=[[data]], token=TOKEN
    )
    np.testing.assert_array_equal(prepared.execute([X, X]).outputs[0], X + X)
    prepared.release()
    with pytest.raises((InvalidArgument, GeneralFailure)):
        dev.prepareModelFromCache_1_3([[target]], [[data]], TOKEN)


def _hostile(root: Path, outside: Path, kind: str) -> tuple[str, Path]:
    """(the path the client names, the file that must stay unchanged)."""
    if kind == "dotfile":
        f = root / ".bashrc"
        f.write_bytes(b"echo hello from a dotfile\n")
        return str(f), f
    if kind == "proc-self-comm":
        return "/proc/self/comm", Path("/proc/self/comm")
    victim = outside / "victim.sh"
    victim.write_bytes(b"#!/bin/sh\necho untouched\n")
    if kind == "hardlink":
        link = root / "hard"
        os.link(victim, link)
        return str(link), victim
    link = root / "soft"
    link.symlink_to(victim)
    return str(link), victim


@pytest.mark.parametrize("kind", ["dotfile", "proc-self-comm", "hardlink", "symlink"])
def test_hostile_cache_files_are_refused_and_unchanged(client, root, tmp_path, kind):
    outside = tmp_path / "outside"
    outside.mkdir()
    target, watched = _hostile(root, outside, kind)
    before = watched.read_bytes()
    data = root / "data"
    _attempt(client, target, str(data))
    assert watched.read_bytes() == before
    if kind == "proc-self-comm":
        assert before.strip()  # the process name, not a cache


def test_a_huge_sparse_cache_file_is_not_read(client, root):
    huge = root / "huge.model"
    with open(huge, "wb") as f:
        f.truncate(6 << 30)  # 6 GiB, sparse: no disk, but a naive read would need the RAM
    data = root / "huge.data"
    data.touch()
    rss = _rss_bytes()
    with pytest.raises((InvalidArgument, GeneralFailure)) as info:
        client.prepareModelFromCache_1_3([[str(huge)]], [[str(data)]], TOKEN)
    assert _rss_bytes() - rss < 100 << 20  # the in-process server read nothing of it
    if client.getNumberOfCacheFilesNeeded() != (0, 0):  # the rooted server
        assert "max_cache_file_bytes" in info.value.message
    assert huge.stat().st_size == 6 << 30


def test_new_files_in_the_root_are_created_and_used(root):
    server, address = create_server(
        Device(), "127.0.0.1:0", security=ServerSecurity(cache_roots=(str(root),))
    )
    try:
        with connect(address) as dev:
            assert dev.getNumberOfCacheFilesNeeded() == (1, 1)
            mc, dc = [[str(root / "new.model")]], [[str(root / "new.data")]]
            dev.prepareModel_1_3(add_model(), modelCache=mc, dataCache=dc, token=TOKEN).release()
            assert (root / "new.model").stat().st_mode & 0o077 == 0  # private to the server
            prepared = dev.prepareModelFromCache_1_3(mc, dc, TOKEN, model=add_model())
            np.testing.assert_array_equal(prepared.execute([X, X]).outputs[0], X + X)
            # saving again over its own cache files works (they are nnhal caches)
            dev.prepareModel_1_3(add_model(), modelCache=mc, dataCache=dc, token=TOKEN).release()
            dev.prepareModelFromCache_1_3(mc, dc, TOKEN, model=add_model()).release()
    finally:
        server.stop(None).wait()


def test_the_cache_size_cap_is_a_profile_limit(tmp_path):
    from nnhal.driver.profile import load_profile

    profile = tmp_path / "small-cache.toml"
    profile.write_text("[limits]\nmax_cache_file_bytes = 64\n")
    device = Device(load_profile(str(profile)))
    mc, dc = [[str(tmp_path / "m")]], [[str(tmp_path / "d")]]
    device.prepareModel_1_3(add_model(), modelCache=mc, dataCache=dc, token=TOKEN)
    assert (tmp_path / "m").stat().st_size > 64
    with pytest.raises(GeneralFailure, match="max_cache_file_bytes"):
        device.prepareModelFromCache_1_3(modelCache=mc, dataCache=dc, token=TOKEN)
