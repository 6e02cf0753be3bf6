"""How many threads the numeric libraries under the kernels may use.

The kernels call numpy, and numpy calls a BLAS (OpenBLAS, MKL, ...) that
starts its own thread pool, by default one thread per core. The executor runs
a model's operations one after another and the server runs concurrent
executions on threads of its own, so a BLAS pool per call mostly competes with
them: on a loaded two-core machine the default pool made kernels 3x to 20x
slower and runs spread up to 9x. The setting here fixes the pool size of every
numeric library threadpoolctl knows (BLAS and OpenMP) for the whole process.

- ``DEFAULT_THREADS`` (1) is what ``nnhal serve`` and ``nnhal bench`` use when
  neither ``--threads`` nor the device profile's ``threads`` key says
  otherwise: one thread gives predictable latency, leaves the other cores to
  concurrent executions, and the per-operation GEMMs of mobile networks are
  too small to gain much from more.
- ``0`` ("auto") leaves the libraries at their own default (every core).

Thread pools belong to the process, not to a device: the last call wins.
"""

from __future__ import annotations

from typing import Any

#: the thread count the CLI applies when nothing else is given
DEFAULT_THREADS = 1
#: the value meaning "leave the libraries at their own default"
AUTO = 0

_limiter: Any = None  # the active threadpoolctl limiter, kept so a later call can restore
_count: int | None = None  # the count set_threads last applied (None: never called)


def parse_threads(value: str | int) -> int:
    """``"auto"`` or ``0`` -> 0; a positive integer -> itself; anything else ValueError."""
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("auto", "default"):
            return AUTO
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"threads must be an integer >= 0 or 'auto', got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"threads must be an integer >= 0 or 'auto', got {value!r}")
    return value


def set_threads(count: int) -> None:
    """Fix the pool size of every numeric library loaded now to ``count`` (0 = their default).

    numpy is imported first so its BLAS is among the loaded libraries.
    """
    global _limiter, _count
    count = parse_threads(count)
    import numpy  # noqa: F401  (loads the BLAS threadpoolctl is to find)
    from threadpoolctl import threadpool_limits

    if _limiter is not None:
        _limiter.restore_original_limits()
        _limiter = None
    if count != AUTO:
        _limiter = threadpool_limits(limits=count)
    _count = count


def single_threaded() -> bool:
    """Whether set_threads fixed the pools at one thread (kernels then size their work
    blocks for one core's caches; with several threads a BLAS call costs a
    synchronization, so they keep blocks large)."""
    return _count == 1


def thread_report() -> str:
    """One line naming each library's pool size now, e.g. ``blas openblas (Haswell): 1``.

    The BLAS's kernel architecture is named because it decides GEMM speed as much as
    the threads: OpenBLAS picks its kernels at load time, and ``OPENBLAS_CORETYPE``
    can pin older ones (Haswell's AVX2 kernels on an AVX-512 core halve sgemm speed).
    """
    from threadpoolctl import threadpool_info

    parts = []
    for info in threadpool_info():
        arch = f" ({info['architecture']})" if info.get("architecture") else ""
        parts.append(
            f"{info.get('user_api')} {info.get('internal_api')}{arch}: {info.get('num_threads')}"
        )
    return ", ".join(parts) or "no thread pools found"


def serving_threads(option: int | None, profile_threads: list[int | None]) -> int:
    """The count a server applies: the option, else the first profile's ``threads``, else 1.

    Thread pools are per process, so several served devices cannot differ: profiles that
    set different counts are refused (ValueError) unless the option decides.
    """
    if option is not None:
        return option
    given = {t for t in profile_threads if t is not None}
    if len(given) > 1:
        raise ValueError(
            f"the served profiles set different threads ({', '.join(map(str, sorted(given)))}); "
            "thread pools belong to the process: give --threads"
        )
    return given.pop() if given else DEFAULT_THREADS
