"""Code objects of generated sources, compiled once per process (``compile_source``).

The text ``codegen`` generates for a subgraph names its kernels and constants
only by names (``k0_1``, ``c0_2``) that each function's own namespace binds, so
the same text always compiles to the same code object, whatever the values bound
later: preparing a model again, or another model of the same graph with other
weights, reuses it. CPython's ``compile`` was the largest single cost of
preparing a small model (0.15 to 0.5 ms of a 1 to 2 ms preparation).

The cache is keyed by the whole text (never a hash of it: a collision would run
the wrong code) and by the client preparing (``set_owner``: the service names
the caller of each model-carrying call; in-process callers are None), so a
client never learns from the time of its preparation that another one
prepared a model of the same graph. It is bounded in entries and in characters
held; the least recently used entries go first. A text longer than ``MAX_TEXT`` is compiled and
not kept (the chunks of a huge model would only evict everything else).
"""

from __future__ import annotations

import contextvars
import threading
from collections import OrderedDict
from types import CodeType

#: entries kept (each a code object for one generated function)
MAX_ENTRIES = 512
#: characters of source kept in all (the code objects are of the same order)
MAX_CHARS = 4_000_000
#: a longer text is compiled every time
MAX_TEXT = 200_000

_lock = threading.Lock()
_codes: OrderedDict[tuple[str | None, str], CodeType] = OrderedDict()
_chars = 0

#: the client whose model is being prepared in this context (None: in-process)
_OWNER: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "nnhal_preparing_owner", default=None
)


def set_owner(owner: str | None) -> contextvars.Token:
    """What is kept from now on in this context to prepare faster (compiled code here,
    check results in ``driver/analysis_cache.py``) is ``owner``'s alone; give the token
    back to ``reset_owner`` when the call ends."""
    return _OWNER.set(owner)


def reset_owner(token: contextvars.Token) -> None:
    _OWNER.reset(token)


def owner() -> str | None:
    """The client preparing in this context (``set_owner``), None in-process."""
    return _OWNER.get()


#: ``compile_source``'s owner when none is given: the one of the current context
CURRENT = object()


def compile_source(text: str, filename: str, owner: object = CURRENT) -> CodeType:
    """``compile(text, filename, "exec")``, or the code compiled from the same text before.

    ``owner``: the client the code is kept for (``set_owner``); by default the
    current context's. Code generated during an execution (a prepared model's
    later variants and generic loops) passes the owner of the preparation: an
    execution's context names no client.

    A cached code object keeps the filename of its first compilation (tracebacks
    of generated code are mapped to steps by line number, not by file name).
    """
    global _chars
    key = (_OWNER.get() if owner is CURRENT else owner, text)
    with _lock:
        code = _codes.get(key)
        if code is not None:
            _codes.move_to_end(key)
            return code
    code = compile(text, filename, "exec")
    if len(text) > MAX_TEXT:
        return code
    with _lock:
        if key not in _codes:
            _codes[key] = code
            _chars += len(text)
            while len(_codes) > MAX_ENTRIES or _chars > MAX_CHARS:
                (_, old), _ = _codes.popitem(last=False)
                _chars -= len(old)
    return code


def drop_owner(gone: str) -> int:
    """Forget the code compiled for client ``gone`` (its session ended); how many."""
    global _chars
    with _lock:
        keys = [key for key in _codes if key[0] == gone]
        for key in keys:
            del _codes[key]
            _chars -= len(key[1])
    return len(keys)


def clear() -> None:
    """Forget every cached code object."""
    global _chars
    with _lock:
        _codes.clear()
        _chars = 0


def cached(text: str) -> bool:
    """Whether ``text`` is in the cache for the current owner (for tests)."""
    with _lock:
        return (_OWNER.get(), text) in _codes
