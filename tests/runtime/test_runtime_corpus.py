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
