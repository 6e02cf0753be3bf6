"""Mapping HAL memory pools (model and request pools) to writable memoryviews.

- ``InlineMemory``: a private ``bytearray`` copy of the bytes that came in the
  message (the service sends the new contents back when outputs live there).
- ``SharedMemory``: the client's POSIX shared-memory segment, attached by name
  and mapped in place (zero copy, like the HAL's ashmem / mmap_fd pools).
  The server never unlinks it: the segment belongs to the client. Its name
  must be one portable file name (``check_segment_name``: letters, digits,
  ``._-``, at most 255 bytes, an optional leading "/"), and a call from another
  host may not name one at all (``nnhal.driver.security.call_is_local``): a remote
  client has no segment here, so whatever it names belongs to someone else.
- ``TokenMemory``: driver-managed buffers (IDevice::allocate) are mapped by
  ``nnhal.driver.buffers.TokenPools`` (checked against the buffer's roles) and
  handed to ``MappedPools`` as ``premapped`` views; a token reaching
  ``map_pool`` is a GENERAL_FAILURE.

A view of a shared segment owns its mapping: the mmap stays alive as long as
the view (or any numpy array made from it) does, and is unmapped when the last
of them goes, so a view can outlive the call that made it (a prepared model
keeps its CONSTANT_REFERENCE pools).
"""

from __future__ import annotations

import logging
import re
import sys
import traceback
from collections.abc import Mapping, Sequence
from multiprocessing import resource_tracker
from multiprocessing import shared_memory as _shm
from types import TracebackType
from typing import TYPE_CHECKING

from nnhal.errors import GeneralFailure, InvalidArgument
from nnhal.types import InlineMemory, MemoryPool, SharedMemory, TokenMemory

if TYPE_CHECKING:
    from typing_extensions import Self

log = logging.getLogger("nnhal.driver.memory")

__all__ = [
    "MappedPools",
    "attach_shared_memory",
    "check_segment_name",
    "drop_frames",
    "map_pool",
]

_SEGMENT_NAME = re.compile(r"/?[A-Za-z0-9._-]{1,255}")

# Python 3.13 added SharedMemory(track=False); before it, attaching registers the
# segment with this process's resource tracker, which would unlink the client's
# segment (and warn about a "leak") when the server exits.
_HAS_TRACK_ARG = sys.version_info >= (3, 13)


def _open_segment(name: str) -> _shm.SharedMemory:
    if _HAS_TRACK_ARG:
        return _shm.SharedMemory(name=name, create=False, track=False)
    segment = _shm.SharedMemory(name=name, create=False)
    # Undo the registration made by the constructor: the segment is the client's.
    # (nnhal.client re-registers its own segments before unlinking them, so a client
    # and a server in one process keep the tracker's bookkeeping balanced.)
    resource_tracker.unregister(segment._name, "shared_memory")
    return segment


def check_segment_name(name: str) -> None:
    """INVALID_ARGUMENT unless ``name`` may name a client's segment (module docstring)."""
    from nnhal.driver.security import call_is_local

    if not name:
        raise InvalidArgument("shared memory pool without a segment name")
    if not _SEGMENT_NAME.fullmatch(name) or name.lstrip("/") in (".", ".."):
        raise InvalidArgument(
            f"shared memory {name[:80]!r}: not a segment name (one name of letters, digits, "
            "'.', '_', '-', at most 255 characters, optionally after one '/')"
        )
    if not call_is_local():
        raise InvalidArgument(
            f"shared memory {name!r}: shared memory pools need a client on the server's host "
            "(this call comes from another host); send the data inline"
        )


def attach_shared_memory(name: str, size: int) -> memoryview:
    """Map ``size`` bytes of the client's segment ``name``; the view owns the mapping."""
    check_segment_name(name)
    if size < 0:
        raise InvalidArgument(f"shared memory {name!r}: negative size {size}")
    try:
        segment = _open_segment(name)
    except FileNotFoundError:
        raise InvalidArgument(f"shared memory {name!r}: no such segment") from None
    except (OSError, ValueError) as exc:  # e.g. permission, or an empty segment (mmap of 0 bytes)
        raise InvalidArgument(f"shared memory {name!r}: cannot attach: {exc}") from None
    try:
        if segment.size < size:
            raise InvalidArgument(
                f"shared memory {name!r}: the pool claims {size} bytes but the segment "
                f"has {segment.size}"
            )
        # Take over the mmap: a memoryview of it keeps it alive on its own, so the
        # SharedMemory object can be closed now (that only closes its file descriptor).
        mapping = segment._mmap
        view = memoryview(mapping)[:size]
        segment._buf.release()
        segment._buf = None
        segment._mmap = None
    finally:
        segment.close()
    return view


def map_pool(pool: MemoryPool) -> memoryview:
    """A writable view of one pool (see the module docstring for each form)."""
    if isinstance(pool, InlineMemory):
        return memoryview(bytearray(pool.data))
    if isinstance(pool, SharedMemory):
        return attach_shared_memory(pool.name, int(pool.size))
    if isinstance(pool, TokenMemory):
        raise GeneralFailure(
            f"memory token {pool.token}: a driver buffer cannot be used here (only as a "
            "request pool)"
        )
    raise InvalidArgument(f"not a memory pool: {type(pool).__name__}")


def drop_frames(exc: BaseException) -> None:
    """Clear the local variables of the finished frames in ``exc``'s traceback (and in
    those of the exceptions it chains), so what they referenced is freed at once."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [exc]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if current.__traceback__ is not None:
            traceback.clear_frames(current.__traceback__)  # skips frames still running
        pending += [current.__cause__, current.__context__]


class MappedPools:
    """Maps a sequence of pools for the duration of a ``with`` block.

    ``views[i]`` is the view of ``pools[i]``. On exit the views are released
    (which unmaps shared segments once nothing else refers to them); when the
    block ends with an error, its traceback's finished frames are cleared first,
    so arrays of the failed execution do not keep the mappings. A view
    that still has exports (a numpy array made from it and kept elsewhere)
    cannot be released; its mapping then goes with the last reference.
    """

    def __init__(
        self, pools: Sequence[MemoryPool], premapped: Mapping[int, memoryview] | None = None
    ) -> None:
        self.pools = tuple(pools)
        self.views: list[memoryview] = []
        premapped = premapped or {}
        views = self.views
        try:
            for p, pool in enumerate(self.pools):
                if p in premapped:
                    views.append(premapped[p])
                elif type(pool) is InlineMemory:  # map_pool's first case, the common one
                    views.append(memoryview(bytearray(pool.data)))
                else:
                    views.append(map_pool(pool))
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is not None:
            # The error's traceback keeps the frames of the execution alive, and with
            # them arrays viewing these pools: the views could not be released, and
            # the mapping (and every intermediate tensor) would stay until the cyclic
            # garbage collector happened to run. The frames are finished: clear them.
            drop_frames(exc)
        self.close()

    def close(self) -> None:
        for view in self.views:
            try:
                view.release()
            except BufferError:
                log.debug("a pool view is still exported; it is unmapped when released")
        self.views = []
