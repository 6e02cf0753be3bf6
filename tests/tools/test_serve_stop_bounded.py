"""`nnhal serve` ends on SIGTERM even when something in the process never does.

gRPC's own stop, or a non-daemon thread the interpreter joins at exit, could keep a
stopped server's process alive forever; a supervisor's SIGTERM must still end it.
Each case runs ``_drain`` (the body of the shutdown) in a child process, with a
server stand-in, so that the process's own end is what is observed.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow  # child processes

PRELUDE = """
import signal, threading
from nnhal.tools.cli_security import _drain

class Server:
    in_flight = 0
    def __init__(self, finishes):
        self.finishes = finishes
    def stop(self, grace):
        done = threading.Event()
        if self.finishes:
            done.set()
        return done
"""


def _run(body: str) -> subprocess.CompletedProcess:
    code = PRELUDE + textwrap.dedent(body)
    return subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120
    )


def test_a_grpc_stop_that_never_finishes_ends_the_process() -> None:
    proc = _run("""
        _drain(Server(finishes=False), 0.1, [signal.SIGTERM], lambda: print("closed"),
               margin=0.3)
        print("returned")  # never: the process ends inside _drain
    """)
    assert proc.returncode == 0, proc.stderr
    assert "gRPC's stop did not finish 0.4 s after it; ending the process" in proc.stderr
    assert "thread MainThread:" in proc.stderr  # where each thread was, for the log
    assert proc.stdout.split() == ["closed"]  # the devices were still closed


def test_a_thread_that_never_ends_does_not_keep_the_program_alive() -> None:
    proc = _run("""
        threading.Thread(target=threading.Event().wait, name="stuck").start()
        code = _drain(Server(finishes=True), 0.1, [signal.SIGTERM], lambda: None,
                      margin=0.3, whole_process=True)
        print("returned", code, flush=True)
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["returned", "0"]
    assert "nnhal: stopped" in proc.stderr
    assert "the process did not exit 0.3 s after the server stopped" in proc.stderr
    assert "thread stuck:" in proc.stderr


def test_a_call_of_main_does_not_arm_the_exit_watch() -> None:
    """Without ``whole_process`` (``main([...])`` called from Python, as tests do) the
    caller's process is not ended: the stuck thread keeps it, as any thread would."""
    proc = _run("""
        import time
        stuck = threading.Event()
        threading.Thread(target=stuck.wait, name="stuck").start()
        code = _drain(Server(finishes=True), 0.1, [signal.SIGTERM], lambda: None, margin=0.3)
        time.sleep(1.5)  # well past the margin: nothing ended the process
        print("still here", code, flush=True)
        stuck.set()
    """)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["still", "here", "0"]
    assert "did not exit" not in proc.stderr
