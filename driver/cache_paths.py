"""Client-given cache files: where they may be, and opening them without being fooled.

nnhal's cache handles are paths on the server's host (``nnhal.driver.cache``). A
client must not make the server read or write anything else through them:

- ``confine(path, roots, what)``: when the server restricts cache files
  (``CompilationCache.allowed_roots`` is not None: set for a server exposed
  beyond loopback, or by ``nnhal serve --cache-root``), the path must be
  absolute, have no ``..`` component, and its real path (symbolic links
  resolved) must lie inside one of the roots; otherwise INVALID_ARGUMENT.
  ``roots == ()`` means no client-given cache file is accepted.
- ``open_cache_file(path, mode, roots)``: opens without following a final
  symbolic link and without blocking (a FIFO would hang the call), refuses
  anything but a regular file (``/dev/zero`` would never end), and, when
  confined, checks the real path of the file actually opened
  (``/proc/self/fd``), so swapping a directory for a symbolic link between the
  check and the open gains nothing.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from nnhal.errors import InvalidArgument

_MODES = {"rb": os.O_RDONLY, "r+b": os.O_RDWR}


def _inside(real: str, roots: Sequence[str]) -> bool:
    for root in roots:
        base = os.path.realpath(root)
        if real != base and os.path.commonpath([real, base]) == base:
            return True
    return False


def confine(path: str, roots: Sequence[str], what: str) -> str:
    """The real path of a client-given cache file inside ``roots`` (else InvalidArgument)."""
    if not roots:
        raise InvalidArgument(
            f"{what}: this server accepts no cache files named by clients (it is exposed beyond "
            "loopback); give a 32-byte token and no handles to use its own cache directory"
        )
    p = Path(path)
    if not p.is_absolute():
        raise InvalidArgument(f"{what}: cache file {path!r} must be an absolute path")
    if ".." in p.parts:
        raise InvalidArgument(f"{what}: cache file {path!r} has a '..' component")
    real = os.path.realpath(p)
    if not _inside(real, roots):
        raise InvalidArgument(
            f"{what}: cache file {path!r} is outside the directories this server allows for "
            f"cache files ({', '.join(map(str, roots))}); symbolic links are followed to check"
        )
    return real


def open_cache_file(path: str, mode: str, roots: Sequence[str] | None = None) -> IO[bytes]:
    """Open a cache file ("rb" or "r+b") as the module docstring says; OSError on failure."""
    flags = _MODES[mode] | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{path} is not a regular file")
        if roots is not None:
            proc = f"/proc/self/fd/{fd}"
            real = os.readlink(proc) if os.path.exists(proc) else os.path.realpath(path)
            if not _inside(real, roots):
                raise OSError(f"{path} resolved outside the allowed cache directories")
        os.set_blocking(fd, True)
        return os.fdopen(fd, mode)
    except BaseException:
        os.close(fd)
        raise
