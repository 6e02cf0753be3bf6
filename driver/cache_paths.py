"""Client-given cache files: where they may be, and opening them without being fooled.

nnhal's cache handles are paths on the server's host (``nnhal.driver.cache``). A
client must not make the server read or write anything else through them:

- ``confine(path, roots, what)``: when the server restricts cache files
  (``CompilationCache.allowed_roots`` is not None: every server sets it, to
  ``nnhal serve --cache-root`` or to nothing), the path must be
  absolute, have no ``..`` component, and its real path (symbolic links
  resolved) must lie inside one of the roots; otherwise INVALID_ARGUMENT.
  ``roots == ()`` means no client-given cache file is accepted: what a server
  does unless started with ``--cache-root`` (on loopback too).
- ``open_cache_file`` / ``read_cache_file`` (loading) and ``create_cache_file``
  (saving) open without following a final symbolic link and without blocking
  (a FIFO would hang the call), refuse anything but a regular file
  (``/dev/zero`` would never end) and a file with more than one hard link (a
  link inside the root to a file outside it), and, when confined, check the
  real path of the file actually opened (``/proc/self/fd``), so swapping a
  directory for a symbolic link between the check and the open gains nothing.
  Reading is capped (``max_cache_file_bytes``, a profile limit) before a byte
  is read; saving creates the file exclusively, and writes into an existing
  one only when it is empty or already an nnhal cache of this user.
"""

from __future__ import annotations

import contextlib
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
            f"{what}: this server accepts no cache files named by clients (start it with "
            "--cache-root DIR to accept files under DIR); give a 32-byte token and no handles "
            "to use its own cache directory (--cache-dir)"
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


def _check_opened(fd: int, path: str, roots: Sequence[str] | None) -> os.stat_result:
    """What every opened cache file must be: a regular file with one name, inside the
    roots when confined (the real path of the file actually opened)."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise OSError(f"{path} is not a regular file")
    if info.st_nlink != 1:
        # a hard link inside the root may name a file anywhere on the same filesystem
        raise OSError(f"{path} has {info.st_nlink} hard links; a cache file must have one")
    if roots is not None:
        proc = f"/proc/self/fd/{fd}"
        real = os.readlink(proc) if os.path.exists(proc) else os.path.realpath(path)
        if not _inside(real, roots):
            raise OSError(f"{path} resolved outside the allowed cache directories")
    return info


def _open(path: str, flags: int, mode: int = 0o600) -> int:
    return os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0), mode)


def open_cache_file(
    path: str, mode: str, roots: Sequence[str] | None = None, max_bytes: int | None = None
) -> IO[bytes]:
    """Open a cache file ("rb" or "r+b") as the module docstring says; OSError on failure.

    ``max_bytes``: a file larger than this is refused before anything is read."""
    fd = _open(path, _MODES[mode])
    try:
        info = _check_opened(fd, path, roots)
        if max_bytes is not None and info.st_size > max_bytes:
            raise OSError(
                f"{path} has {info.st_size} bytes; cache files are read up to {max_bytes} "
                "(limit max_cache_file_bytes)"
            )
        os.set_blocking(fd, True)
        return os.fdopen(fd, mode)
    except BaseException:
        os.close(fd)
        raise


def read_cache_file(path: str, roots: Sequence[str] | None, max_bytes: int) -> bytes:
    """The whole content of a cache file, never more than ``max_bytes`` read into memory."""
    with open_cache_file(path, "rb", roots, max_bytes) as f:
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:  # it grew after the size check
        raise OSError(f"{path} has more than {max_bytes} bytes (limit max_cache_file_bytes)")
    return data


def create_cache_file(path: str, magic: bytes, roots: Sequence[str] | None = None) -> IO[bytes]:
    """Open a cache file for writing a new cache (write-only, positioned at 0, empty).

    The file is created exclusively. An existing file is taken only when this
    server could have made it for caching: a regular file with one link, owned
    by this user, inside the roots, and either empty (the HAL's flow: the
    runtime creates the cache files, the driver fills them) or an nnhal cache
    already (``magic``). Anything else -- a dotfile, ``/proc/self/comm``, a
    link to a file elsewhere -- is refused (OSError) and left unchanged.
    """
    flags = os.O_RDWR
    try:
        fd = _open(path, flags | os.O_CREAT | os.O_EXCL)
        created = True
    except FileExistsError:
        fd = _open(path, flags)
        created = False
    try:
        info = _check_opened(fd, path, roots)
        if not created:
            if hasattr(os, "geteuid") and info.st_uid != os.geteuid():
                raise OSError(f"{path} belongs to another user; not a cache file of this server")
            head = os.pread(fd, len(magic), 0)  # /proc files say size 0 yet have content
            if head and head != magic[: len(head)]:
                raise OSError(
                    f"{path} exists and is not an nnhal cache file: it is left unchanged "
                    "(give a new or empty file)"
                )
            os.ftruncate(fd, 0)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "r+b")
    except BaseException:
        os.close(fd)
        if created:
            with contextlib.suppress(OSError):
                os.unlink(path)
        raise
