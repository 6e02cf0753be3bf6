"""Progress of long commands (``vectors``, ``bench``, ``stress``) on stderr.

Shown only when stderr is a terminal and neither ``--quiet`` nor ``--no-progress``
was given: piped or redirected output, logs and CI stay free of it. Bars over a
known count use tqdm; ``Status`` is a single line rewritten in place, at most
every ``every`` seconds, for work measured in time (a ``stress`` round).
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TextIO


def add_quiet_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress on stderr (it is shown only when stderr is a terminal)",
    )


def progress_wanted(args: argparse.Namespace, stream: TextIO | None = None) -> bool:
    """Whether to show progress: stderr is a terminal, no --quiet, no --no-progress."""
    if getattr(args, "quiet", False) or getattr(args, "no_progress", False):
        return False
    stream = stream or sys.stderr
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or unusual stream
        return False


class Status:
    """One status line on ``stream``, rewritten in place (``\\r``), throttled to one
    update per ``every`` seconds -- except when the phase (the text before its first
    ":") changes, shown at once; ``close`` clears the line. Disabled: does nothing."""

    def __init__(
        self, enabled: bool, prefix: str, every: float = 1.0, stream: TextIO | None = None
    ) -> None:
        self.enabled = enabled
        self.prefix = prefix
        self.every = every
        self.stream = stream or sys.stderr
        self._last = -float("inf")
        self._phase: str | None = None
        self._shown = False

    def update(self, text: str, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        phase = text.split(":", 1)[0]
        if not force and phase == self._phase and now - self._last < self.every:
            return
        self._last = now
        self._phase = phase
        # \r back to the line's start, \x1b[K clears what a longer earlier line left
        self.stream.write(f"\r{self.prefix}: {text}\x1b[K")
        self.stream.flush()
        self._shown = True

    def close(self) -> None:
        if self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._shown = False
