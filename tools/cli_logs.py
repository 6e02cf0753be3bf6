"""The one logging configuration of the command line (``nnhal serve`` and every command).

Every log line carries the time, the level and the logger's name::

    2026-11-25 03:40:12,345 WARNING nnhal.driver.service: ...

Commands log at WARNING and above unless asked for more (``nnhal serve --log-level``).
gRPC's C core writes its own lines straight to stderr, past Python's logging: the
entry point (``nnhal.tools.cli``) quiets it with ``GRPC_VERBOSITY=ERROR`` before grpc
is imported, unless the user set that variable.
"""

from __future__ import annotations

import logging
import sys

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class _Stderr(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time of each line (a test harness
    or a caller may replace it after the handler was made)."""

    @property  # type: ignore[override]
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


_handler: logging.Handler | None = None


def configure(level: str | int = logging.WARNING) -> None:
    """Log to stderr in ``FORMAT`` at ``level`` (a name such as "info", or a number).

    Called again, it only changes the level (one handler, never two).
    """
    global _handler
    if isinstance(level, str):
        level = getattr(logging, level.upper())
    root = logging.getLogger()
    if _handler is None or _handler not in root.handlers:
        _handler = _Stderr()
        _handler.setFormatter(logging.Formatter(FORMAT))
        root.addHandler(_handler)
    root.setLevel(level)
