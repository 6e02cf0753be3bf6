"""The numeric-library thread setting: parsing, applying, the profile key, serve and bench."""

from __future__ import annotations

import subprocess
import sys

import pytest
from nnhal.driver.ops.threads import (
    AUTO,
    DEFAULT_THREADS,
    parse_threads,
    serving_threads,
    set_threads,
    thread_report,
)
from nnhal.driver.profile import ProfileError, parse_profile
from threadpoolctl import threadpool_info


@pytest.mark.parametrize(
    "text, count", [("1", 1), ("4", 4), ("0", 0), ("auto", 0), (" Auto ", 0), (3, 3)]
)
def test_parse_threads_accepts(text, count):
    assert parse_threads(text) == count


@pytest.mark.parametrize("bad", ["-1", "x", "1.5", "", -2, True, 2.0])
def test_parse_threads_refuses(bad):
    with pytest.raises(ValueError, match="threads must be"):
        parse_threads(bad)


def _blas_threads() -> set[int]:
    return {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}


def test_set_threads_fixes_the_blas_pool_and_auto_restores_it():
    set_threads(AUTO)  # whatever an earlier test set in this process: the library default
    default = _blas_threads()
    if not default:
        pytest.skip("numpy's BLAS exposes no thread pool here")
    try:
        set_threads(1)
        assert _blas_threads() == {1}
        assert "blas" in thread_report() and ": 1" in thread_report()
    finally:
        set_threads(AUTO)
    assert _blas_threads() == default


def test_profile_threads_key():
    assert parse_profile({"name": "t"}).threads is None
    assert parse_profile({"name": "t", "threads": 2}).threads == 2
    assert parse_profile({"name": "t", "threads": "auto"}).threads == AUTO
    with pytest.raises(ProfileError, match="threads"):
        parse_profile({"name": "t", "threads": -1})
    with pytest.raises(ProfileError, match="threads"):
        parse_profile({"name": "t", "threads": "many"})


def test_serving_threads_precedence_and_conflict():
    assert serving_threads(None, [None]) == DEFAULT_THREADS
    assert serving_threads(None, [None, 2]) == 2
    assert serving_threads(3, [2]) == 3
    assert serving_threads(0, [2, 4]) == 0
    with pytest.raises(ValueError, match="different threads"):
        serving_threads(None, [2, 4])


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "nnhal.tools.cli", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_serve_refuses_a_bad_threads_option():
    proc = _cli("serve", "--address", "127.0.0.1:0", "--threads", "lots")
    assert proc.returncode == 2
    assert "--threads" in proc.stderr and "Traceback" not in proc.stderr


def test_serve_refuses_profiles_that_disagree_on_threads(tmp_path):
    a = tmp_path / "a.toml"
    b = tmp_path / "b.toml"
    a.write_text('name = "a"\nthreads = 1\n')
    b.write_text('name = "b"\nthreads = 2\n')
    proc = _cli("serve", "--address", "127.0.0.1:0", "--profile", str(a), "--profile", str(b))
    assert proc.returncode != 0
    assert "different threads" in proc.stderr and "Traceback" not in proc.stderr


def test_bench_states_its_thread_setting():
    proc = _cli("bench", "control-flow", "--n", "3", "--repeat", "1", "--no-grpc", "--threads", "1")
    assert proc.returncode == 0, proc.stderr
    first = proc.stdout.splitlines()[0]
    assert first.startswith("threads: 1 (") and "onnxruntime intra-op 1" in first
