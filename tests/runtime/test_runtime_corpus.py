"""The shared corpus through the runtime, against a served device whose profile excludes
every other operation type: every model passes, with the outputs of a direct run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from nnhal.runtime.reference import reference_device
from nnhal.runtime.vectors import run_test_model
from repo_paths import REPO_ROOT
from runtime_helpers import alternate_profile, served

from nnhal.errors import HalError
from nnhal.vectors import find_vector_files, load_vectors

CORPUS = Path(REPO_ROOT).parent / "shared" / "nnapi-vectors"
if not CORPUS.is_dir():  # a worktree next to the main checkout
    CORPUS = Path("/work/shared/nnapi-vectors")


def _direct(test):
    """The same model run directly (one prepared model) on the reference driver."""
    from nnhal.runtime.reference import ReferenceStep

    prepared = ReferenceStep(reference_device().driver.prepareModel_1_3(test.model))
    return prepared.run(test.inputs, test.expected_shapes).outputs


def _check(files):
    tests = [t for f in files for t in load_vectors(f)]
    failures, spanning = [], 0
    with served(alternate_profile()) as (_, devices):
        for t in tests:
            r = run_test_model(devices, t)
            if r.result.result != "passed":
                failures.append(f"{t.name}: {r.result.error}")
                continue
            spanning += len(r.devices_used) > 1
            if t.expectFailure or t.expectedMultinomialDistributionTolerance > 0:
                continue
            try:
                direct = _direct(t)
            except HalError as e:
                failures.append(f"{t.name}: the direct run failed: {e}")
                continue
            for k, (a, b) in enumerate(zip(r.outputs, direct)):
                if not t.ignored[k] and not np.array_equal(a, b, equal_nan=a.dtype.kind == "f"):
                    failures.append(f"{t.name}: output {k} differs from the direct run")
    return tests, failures, spanning


@pytest.mark.skipif(not CORPUS.is_dir(), reason="the shared corpus is not here")
def test_some_multi_operation_files_through_the_runtime():
    names = ("bbox_graph", "box_with_nms_limit_hard", "roi_align", "lstm", "svdf")
    files = [f for f in find_vector_files([CORPUS]) if f.name.split(".")[0] in names]
    assert files
    tests, failures, _spanning = _check(files)
    assert not failures, failures[:20]
    assert tests


@pytest.mark.slow
@pytest.mark.skipif(not CORPUS.is_dir(), reason="the shared corpus is not here")
def test_the_whole_corpus_through_the_runtime():
    tests, failures, spanning = _check(find_vector_files([CORPUS]))
    assert len(tests) == 5978
    assert not failures, f"{len(failures)} failures: {failures[:20]}"
    assert spanning > 1000  # nearly every model with several operations spans both devices


def _profile_toml(profile) -> str:
    import json

    caps = profile["capabilities"]["default"]
    return "\n".join([
        f'name = "{profile["name"]}"',
        f'type = "{profile["type"]}"',
        f"exclude_operations = {json.dumps(profile['exclude_operations'])}",
        "[capabilities.default]",
        f"execTime = {caps['execTime']}",
        f"powerUsage = {caps['powerUsage']}",
        "",
    ])  # fmt: skip


@pytest.mark.slow
@pytest.mark.skipif(not CORPUS.is_dir(), reason="the shared corpus is not here")
def test_the_whole_corpus_through_the_cli_against_nnhal_serve(tmp_path, capsys):
    """`nnhal vectors CORPUS --runtime --target ADDR` against a real `nnhal serve` process
    whose profile excludes every other operation type: every model passes, and every output
    equals the direct run's (`nnhal vectors CORPUS`, the in-process driver), bit for bit."""
    import subprocess
    import sys
    import tempfile

    from nnhal.tools.cli import main

    profile = tmp_path / "half-npu.toml"
    profile.write_text(_profile_toml(alternate_profile()))
    # not a pipe: a full pipe would block the server
    log = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 (lives as long as the server)
    server = subprocess.Popen(
        [sys.executable, "-m", "nnhal.tools.cli", "serve", "--address", "127.0.0.1:0",
         "--profile", str(profile)],
        stdout=subprocess.PIPE, stderr=log, text=True,
    )  # fmt: skip
    try:
        line = server.stdout.readline().strip()
        assert line.startswith("nnhal: serving device 'half-npu'"), line
        address = line.rsplit(" on ", 1)[1]
        through, direct = tmp_path / "runtime", tmp_path / "direct"
        args = ["vectors", str(CORPUS), "--no-progress"]
        assert main([*args, "--runtime", "--target", address, "--dump-outputs", str(through)]) == 0
        summary = capsys.readouterr().out.strip().splitlines()[-1]
        assert summary.startswith("5978 passed, 0 failed, 0 skipped"), summary
        assert main([*args, "--dump-outputs", str(direct)]) == 0
        capsys.readouterr()
    finally:
        server.terminate()
        server.communicate(timeout=60)
        log.close()
    names = sorted(p.name for p in direct.iterdir())
    assert names == sorted(p.name for p in through.iterdir()) and len(names) > 5000
    differ = []
    for name in names:
        with np.load(through / name) as a, np.load(direct / name) as b:
            same = sorted(a.files) == sorted(b.files) and all(
                a[k].dtype == b[k].dtype
                and np.array_equal(a[k], b[k], equal_nan=a[k].dtype.kind in "fc")
                for k in a.files
            )
        if not same:
            differ.append(name)
    assert not differ, differ[:20]
