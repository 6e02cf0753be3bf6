"""The thread setting of a benchmark run, applied to both sides and stated in its output.

``--threads N`` fixes the numeric-library pools of this process
(``nnhal.driver.ops.threads``) and onnxruntime's intra-op pool to N; ``auto``
(0) leaves both at their own default (every core). Every benchmark prints
``threads_line()`` so its figures always come with the setting they were
measured under.
"""

from __future__ import annotations

import os

from nnhal.driver.ops.threads import (
    AUTO,
    DEFAULT_THREADS,
    parse_threads,
    set_threads,
    thread_report,
)

_current = DEFAULT_THREADS


def add_threads_option(parser) -> None:
    parser.add_argument(
        "--threads",
        type=_arg,
        default=None,
        metavar="N|auto",
        help=f"numeric-library threads on both sides, nnhal (BLAS) and onnxruntime (intra-op) "
        f"(default {DEFAULT_THREADS}; --suite models: both 1 and auto; auto = each "
        "library's default)",
    )


def _arg(text: str) -> int:
    import argparse

    try:
        return parse_threads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def apply(count: int | None) -> None:
    """Fix this process's pools to ``count`` (None: the default, 1) and remember it for
    onnxruntime sessions."""
    global _current
    count = DEFAULT_THREADS if count is None else count
    set_threads(count)
    _current = count


def ort_threads() -> int:
    """onnxruntime's intra_op_num_threads for the current setting (0 = its default)."""
    return _current


def current() -> int:
    return _current


def threads_line() -> str:
    """E.g. ``threads: 1 (blas openblas: 1; onnxruntime intra-op 1; 2 cpus)``."""
    shown = "auto" if _current == AUTO else str(_current)
    ort = "default" if _current == AUTO else str(_current)
    return (
        f"threads: {shown} ({thread_report()}; onnxruntime intra-op {ort}; "
        f"{os.cpu_count()} cpus)"
    )
