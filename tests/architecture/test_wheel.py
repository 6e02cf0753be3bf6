"""What `pip install .` puts in site-packages: only the name `nnhal`, the .proto files
and py.typed with it (a wheel built from the checkout, read without installing it)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile

import pytest
from repo_paths import REPO_ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def wheel_names(tmp_path_factory) -> list[str]:
    out = tmp_path_factory.mktemp("wheel")
    # a copy, so the build leaves nothing in the checkout
    source = out / "source"
    shutil.copytree(REPO_ROOT, source, ignore=shutil.ignore_patterns(
        ".git", "build", "dist", "*.egg-info", "__pycache__", ".*_cache", "fuzz-*"))  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--wheel-dir", str(out), str(source)],
        capture_output=True, text=True, check=False, timeout=540,
    )  # fmt: skip
    if done.returncode != 0 and "No module named" in done.stderr:
        pytest.skip(f"cannot build a wheel here: {done.stderr.strip().splitlines()[-1]}")
    assert done.returncode == 0, done.stderr
    (wheel,) = out.glob("nnhal-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def test_only_nnhal_is_installed_at_the_top(wheel_names):
    tops = {name.split("/")[0] for name in wheel_names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"nnhal"}


def test_every_layer_and_its_data_ships(wheel_names):
    names = set(wheel_names)
    for module in ("nnhal/driver/device.py", "nnhal/cts/suite.py", "nnhal/tools/cli.py",
                   "nnhal/driver/ops/conv.py", "nnhal/runtime/__init__.py",
                   "nnhal/importers/__init__.py", "nnhal/__main__.py"):  # fmt: skip
        assert module in names, module
    assert "nnhal/py.typed" in names
    assert "nnhal/driver/profiles/default.toml" in names
    protos = {n for n in names if n.endswith(".proto")}
    assert "nnhal/proto/nnhal/v1_3/device.proto" in protos and len(protos) == 5
