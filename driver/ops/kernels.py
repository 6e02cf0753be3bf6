"""Which implementation runs the convolution kernels: compiled (numba) or numpy.

numpy has no fused multiply-accumulate over the taps of a depthwise filter:
its best form (an einsum over shifted views) stays 2x-3x slower than
onnxruntime; nor a one-pass requantization, or bias and clamp. With the
optional extra ``nnhal[fast]`` (numba), the kernels of ``_jit_conv`` run
instead; the numpy kernels stay the reference and every
test runs both.

- ``"auto"`` (the default): the compiled kernels when numba is installed, else
  numpy. A numba that fails to import or to compile logs one warning and the
  numpy kernels run from then on.
- ``"numpy"``: always the numpy kernels.

Where it is set, first wins: ``set_kernels`` from Python (``nnhal serve``
calls it with the device profiles' ``kernels`` key unless the environment
decides), the environment variable ``NNHAL_KERNELS``, else the default. Like
the thread pools it belongs to the process. The choice is read when a kernel is bound (preparation), so it
applies to models prepared after it changes.

Compilation is lazy: numba is imported and a kernel compiled at its first call
(an execution, never ``prepareModel``), and the machine code is cached on disk
(numba's ``cache=True``), so only the first process on a machine pays the
compile time (about a second per kernel signature).
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import threading
from types import ModuleType

AUTO, NUMPY = "auto", "numpy"
CHOICES = (AUTO, NUMPY)
#: the environment variable that wins over profiles and the default
ENV = "NNHAL_KERNELS"

log = logging.getLogger(__name__)

_choice: str | None = None  # set by set_kernels (None: the environment, else AUTO)
_module: ModuleType | None = None
_broken = False  # numba failed to import or compile: numpy from then on
_present: bool | None = None  # whether numba is installed (looked for once: ~0.1 ms a look)
_lock = threading.Lock()


def parse_kernels(value: str) -> str:
    """``"auto"`` or ``"numpy"`` (any case) -> itself; anything else ValueError."""
    text = value.strip().lower() if isinstance(value, str) else value
    if text not in CHOICES:
        raise ValueError(f"kernels must be 'auto' or 'numpy', got {value!r}")
    return text


def set_kernels(choice: str | None) -> None:
    """Choose the kernels of models prepared from now on (None: back to the environment)."""
    global _choice
    _choice = None if choice is None else parse_kernels(choice)


def current() -> str:
    """The choice now: set_kernels, else ``$NNHAL_KERNELS``, else ``"auto"``."""
    if _choice is not None:
        return _choice
    env = os.environ.get(ENV)
    return parse_kernels(env) if env else AUTO


def serving_kernels(profile_kernels: list[str | None]) -> str | None:
    """What a server sets from its profiles' ``kernels`` (None: leave the environment's).

    The environment variable wins; profiles that disagree are refused (ValueError),
    as for threads: the choice belongs to the process.
    """
    if os.environ.get(ENV):
        return None
    given = {k for k in profile_kernels if k is not None}
    if len(given) > 1:
        raise ValueError(
            f"the served profiles set different kernels ({', '.join(sorted(given))}); "
            f"the choice belongs to the process: set {ENV}"
        )
    return given.pop() if given else None


def jit_wanted() -> bool:
    """Whether kernels bound now should try the compiled path (cheap: numba is only
    looked for, once per process, not imported)."""
    global _present
    if current() != AUTO or _broken:
        return False
    if _present is None:
        _present = importlib.util.find_spec("numba") is not None
    return _present


def jit_module() -> ModuleType | None:
    """``_jit_conv`` imported (numba with it) on first use, or None when that failed."""
    global _module
    if _module is not None or _broken:
        return _module
    with _lock:
        if _module is None and not _broken:
            try:
                _module = importlib.import_module("nnhal.driver.ops._jit_conv")
            except Exception as exc:  # noqa: BLE001 (any import failure: numpy instead)
                failed(exc)
    return _module


def run_failed(exc: BaseException) -> None:
    """A compiled kernel raised during an execution. A MemoryError is raised again:
    running out of memory is the execution's RESOURCE_EXHAUSTED, not a reason to give
    up the compiled kernels. Anything else means it failed to compile: ``failed``."""
    if isinstance(exc, MemoryError):
        raise exc
    failed(exc)


def failed(exc: BaseException) -> None:
    """A compiled kernel could not be imported or compiled: numpy from now on."""
    global _broken, _module
    if not _broken:
        log.warning("compiled kernels disabled, numpy runs them: %s: %s", type(exc).__name__, exc)
    _broken, _module = True, None
