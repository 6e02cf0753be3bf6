"""The op-package kernel worker: a child process that runs custom kernels (and the wire).

``nnhal.driver.op_packages.supervisor`` starts it as a fresh interpreter
(``python -c ...``, see ``command``) with two pipes: requests come in on one,
replies go out on the other. The child's stdout and stderr stay the
parent's, so a kernel's prints and warnings show where they always did.

Messages (both ways) are pickles with out-of-band buffers (protocol 5): a
numpy array's data travels as its own frame, written straight from the
array's memory and read straight into a fresh ``bytearray``: no copy besides
the pipe's own. Frame layout:
``<I`` frame count, one ``<Q`` length per frame, then the frames; frame 0 is
the pickle, the others its buffers.

Worker protocol:

- child -> parent, once: ``("ready", pid)``;
- parent -> child: ``("call", kid, definition | None, args, kwargs)``;
  ``definition`` is ``(ref, static_kwargs)``, sent the first time a worker
  sees kernel ``kid`` (the worker keeps the last ``CACHE_SIZE``; for one it
  has dropped it answers ``("unknown", kid)`` and the parent sends it again);
  ``ref`` is ``("file", path, module_name, qualname)`` or
  ``("module", module_name, qualname)``;
- child -> parent: ``("ok", result)``, ``("error", type_name, message)``
  (the exception's type name and text only: no traceback crosses) or
  ``("unsendable", why)`` (a result pickle cannot carry).

The worker exits when its request pipe closes, on ``("stop",)``, or when
its parent process goes away (a watchdog thread), so it never outlives the
server even if the server is killed with SIGKILL. It leads its own process
group and ends it as it exits (the supervisor kills the group too), so
processes a kernel forked die with it. Its data memory is limited
(``RLIMIT_DATA``, the ``max_worker_memory_bytes`` limit): a kernel's
MemoryError names that limit.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import pickle
import select
import signal
import struct
import sys
import threading
import time
from collections import OrderedDict
from typing import Any

#: kernels (definition + static keyword arguments) a worker keeps
CACHE_SIZE = 256
_COUNT = struct.Struct("<I")
_LENGTH = struct.Struct("<Q")
#: largest frame count / frame a peer may announce (a corrupted stream fails fast)
_MAX_FRAMES = 1 << 16
#: what one read takes at most (a small message whole)
_CHUNK = 1 << 16


class WireTimeout(TimeoutError):
    """Nothing (or not all of a message) arrived before the end time."""


# -- the wire ----------------------------------------------------------------


def _write_all(fd: int, data: Any) -> None:
    view = memoryview(data).cast("B")
    while view:
        n = os.write(fd, view)
        view = view[n:]


def send_message(fd: int, obj: Any) -> None:
    """Write one message (raises OSError, e.g. BrokenPipeError when the peer is gone).

    One ``writev`` for the whole message: each write wakes the reader, and a
    small call is all fixed cost."""
    buffers: list[pickle.PickleBuffer] = []
    header = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    frames = [memoryview(header), *(b.raw() for b in buffers)]
    prefix = _COUNT.pack(len(frames)) + b"".join(_LENGTH.pack(f.nbytes) for f in frames)
    parts = [memoryview(prefix), *frames]
    written = os.writev(fd, parts)
    for part in parts:  # a partial writev (a large message into a full pipe): the rest
        if written >= part.nbytes:
            written -= part.nbytes
            continue
        _write_all(fd, part[written:])
        written = 0


def wait_readable(fd: int, end_ns: int | None) -> None:
    if end_ns is None:
        return  # a blocking read
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    while True:
        remaining_ms = (end_ns - time.monotonic_ns()) / 1e6
        if remaining_ms <= 0:
            raise WireTimeout()
        # poll's timeout is an int of ms: round up so we never wake just before the end
        if poller.poll(max(1, int(remaining_ms) + 1)):
            return


def _read_some(fd: int, end_ns: int | None) -> bytes:
    while True:
        wait_readable(fd, end_ns)
        try:
            data = os.read(fd, _CHUNK)
        except BlockingIOError:  # pragma: no cover - the fds are blocking
            continue
        if not data:
            raise EOFError("the peer closed the pipe")
        return data


def _read_into(fd: int, buffer: Any, end_ns: int | None) -> None:
    view = memoryview(buffer).cast("B")
    while view:
        wait_readable(fd, end_ns)
        n = os.readv(fd, [view])
        if n == 0:
            raise EOFError("the peer closed the pipe")
        view = view[n:]


def read_message(
    fd: int, end_ns: int | None = None, unpickler: type[pickle.Unpickler] | None = None
) -> Any:
    """Read one message; WireTimeout when ``end_ns`` (monotonic) passes first, EOFError
    when the peer is gone. ``unpickler``: a restricted ``pickle.Unpickler`` subclass.

    The first read takes what is there (a small message whole, in one system
    call); large frames are then read straight into their buffers. Peers take
    turns (one request, one reply), so nothing after the message is in the pipe.
    """
    buf = bytearray(_read_some(fd, end_ns))
    while len(buf) < _COUNT.size:
        buf += _read_some(fd, end_ns)
    (n,) = _COUNT.unpack_from(buf)
    if not 1 <= n <= _MAX_FRAMES:
        raise EOFError(f"corrupted message: {n} frames")
    pos = _COUNT.size + _LENGTH.size * n
    while len(buf) < pos:
        buf += _read_some(fd, end_ns)
    frames = []
    for (size,) in _LENGTH.iter_unpack(memoryview(buf)[_COUNT.size : pos]):
        frame = bytearray(size)
        have = min(size, len(buf) - pos)
        frame[:have] = memoryview(buf)[pos : pos + have]
        pos += have
        if have < size:
            _read_into(fd, memoryview(frame)[have:], end_ns)
        frames.append(frame)
    if pos != len(buf):
        raise EOFError(f"corrupted message: {len(buf) - pos} bytes after its end")
    header, buffers = frames[0], frames[1:]
    if unpickler is None:
        return pickle.loads(header, buffers=buffers)
    import io

    return unpickler(io.BytesIO(header), buffers=buffers).load()


# -- the child ---------------------------------------------------------------


def resolve(ref: tuple) -> Any:
    """The kernel function a reference names (imports its module once)."""
    kind = ref[0]
    if kind == "file":
        _, path, module_name, qualname = ref
        module = sys.modules.get(module_name)
        if module is None:
            from nnhal.driver.op_packages.runtime import import_file

            module = import_file(__import__("pathlib").Path(path), module_name)
    elif kind == "module":
        _, module_name, qualname = ref
        module = importlib.import_module(module_name)
    else:
        raise ValueError(f"unknown kernel reference {ref!r}")
    obj: Any = module
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _end_group() -> None:
    """Exit with whatever a kernel started: SIGKILL this worker's process group (the
    worker leads it), so no forked process outlives the worker."""
    sys.stdout.flush()
    try:
        if os.getpgid(0) == os.getpid():
            os.killpg(0, signal.SIGKILL)
    except OSError:
        pass
    os._exit(0)


def _watch_parent(parent: int) -> None:
    """Exit when the parent process is gone (reparented), even inside a running kernel."""
    while True:
        time.sleep(0.5)
        if os.getppid() != parent:
            _end_group()


#: the data-memory limit of this worker (bytes; 0 = none), named in MemoryError replies
_MEMORY_LIMIT = 0


def _limit_memory(limit: int) -> None:
    global _MEMORY_LIMIT
    if limit <= 0:
        return
    try:
        import resource

        kind = getattr(resource, "RLIMIT_DATA", None) or resource.RLIMIT_AS
        hard = resource.getrlimit(kind)[1]
        if hard != resource.RLIM_INFINITY:
            limit = min(limit, hard)
        resource.setrlimit(kind, (limit, hard))
        _MEMORY_LIMIT = limit
    except (ImportError, OSError, ValueError) as exc:  # not on this platform
        print(f"nnhal op-package worker: no memory limit: {exc}", file=sys.stderr)


def serve(fd_in: int, fd_out: int, parent: int) -> None:
    """The worker's loop (runs until its request pipe closes)."""
    # The supervisor owns this process's life: Ctrl-C in a terminal goes to the
    # whole process group, and the server shuts its workers down itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    try:
        import numpy as np

        np.seterr(all="ignore")  # as the executor: IEEE results, no warnings
    except ImportError:  # pragma: no cover - numpy is a core dependency
        pass
    kernels: OrderedDict[int, tuple[Any, dict]] = OrderedDict()
    send_message(fd_out, ("ready", os.getpid()))
    while True:
        try:
            message = read_message(fd_in)
        except EOFError:
            return
        if message[0] == "stop":
            return
        _, kid, definition, args, kwargs = message
        try:
            if definition is not None:
                ref, static = definition
                kernels[kid] = (resolve(ref), static)
                while len(kernels) > CACHE_SIZE:
                    kernels.popitem(last=False)
            entry = kernels.get(kid)
            if entry is None:
                reply: tuple = ("unknown", kid)
            else:
                kernels.move_to_end(kid)
                fn, static = entry
                reply = ("ok", fn(*args, **{**static, **kwargs}))
        except BaseException as exc:  # noqa: BLE001 - a kernel's failure is the reply
            text = _text(exc)
            if isinstance(exc, MemoryError) and _MEMORY_LIMIT:
                text = (
                    f"{text or 'out of memory'} (the kernel worker's memory limit: "
                    f"max_worker_memory_bytes = {_MEMORY_LIMIT})"
                )
            reply = ("error", type(exc).__name__, text)
            del exc
        try:
            send_message(fd_out, reply)
        except OSError:
            raise  # the parent is gone
        except Exception as exc:  # noqa: BLE001 - a result pickle cannot carry
            send_message(fd_out, ("unsendable", f"{type(exc).__name__}: {_text(exc)}"))


def _text(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # noqa: BLE001 - a broken __str__
        return f"<{type(exc).__name__} with an unprintable message>"


def main(argv: list[str]) -> None:
    """``argv``: request fd, reply fd[, data-memory limit in bytes], parent pid (last)."""
    fd_in, fd_out, parent = int(argv[0]), int(argv[1]), int(argv[-1])
    _limit_memory(int(argv[2]) if len(argv) > 3 else 0)
    try:
        serve(fd_in, fd_out, parent)
    except (BrokenPipeError, EOFError):  # the parent went away mid-message
        pass
    _end_group()


def command(sys_path: list[str], fd_in: int, fd_out: int, memory_bytes: int = 0) -> list[str]:
    """The child's command line: this interpreter, the parent's sys.path, then ``main``.

    A fresh interpreter (not fork: the server has gRPC threads; and not
    multiprocessing's spawn, which re-runs the parent's ``__main__`` script in
    the child and keeps a resource-tracker process alive beside it).
    """
    boot = (
        "import sys, json; sys.path[:] = json.loads(sys.argv[1]); "
        "from nnhal.driver.op_packages.worker import main; main(sys.argv[2:])"
    )
    import json

    return [
        sys.executable,
        "-c",
        boot,
        json.dumps(sys_path),
        str(fd_in),
        str(fd_out),
        str(int(memory_bytes)),
        str(os.getpid()),
    ]
