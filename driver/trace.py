"""The per-device call trace: every HAL call with its arguments in brief, status and time.

An entry (JSON object) has ``seq`` (1, 2, ... per device), ``time`` (Unix
seconds when the call arrived), ``method`` (the HAL method; the release RPCs
as ``IPreparedModel.release`` etc., burst messages as
``configureExecutionBurst``), ``args`` (a short summary: ids, counts, the
model's operations), ``status`` (the ErrorStatus name of the reply),
``message`` (the reply's message when not NONE), ``ms`` (time in the
driver), and when something was injected ``injected`` (the fault rule) and
``latency_us``. The last ``MAX_ENTRIES`` calls are kept; read them with
``INnhalControl.getTrace`` or ``nnhal trace ADDR``.

Entries are built when the trace is read. A small request message (at most
``DEFER_BYTES`` serialized, e.g. an execution with inline data of a small model)
is kept as its bytes and summed up then, from the same fields; a larger one is
summed up when recorded, so that the trace never holds large pools or models.
"""

from __future__ import annotations

import itertools
import threading
from collections import Counter, deque
from typing import Any

from nnhal.types import ErrorStatus, OperationType

MAX_ENTRIES = 10000
#: request messages up to this size are kept serialized and summed up when read: about
#: the size of the summary itself, and one C call where the summary takes many
DEFER_BYTES = 1024
_SHORT = 8  # repeated scalars longer than this are shown as a count
_DEPTH = 3  # nested messages deeper than this are shown by their type's name


def _op_name(code: int) -> str:
    try:
        return OperationType(code).name
    except ValueError:
        return str(code)


def _model(msg: Any) -> str:
    ops: Counter[str] = Counter()
    subgraphs = [msg.main, *msg.referenced] if hasattr(msg, "main") else [msg]
    for sub in subgraphs:
        for op in sub.operations:
            ops[_op_name(op.type)] += 1
    text = ", ".join(f"{name}x{n}" if n > 1 else name for name, n in ops.most_common(6))
    more = "" if len(ops) <= 6 else ", ..."
    return f"{sum(ops.values())} operations ({text}{more})"


def _repeated(field: Any) -> bool:
    flag = getattr(field, "is_repeated", None)  # protobuf >= 5; older: label
    return bool(flag) if flag is not None else field.label == field.LABEL_REPEATED


def _nested(message: Any, depth: int) -> Any:
    """A field holding a message: its set fields' values (None when none is set: an
    unset Optional* is "none"); past ``_DEPTH`` levels, just the type's name."""
    if depth >= _DEPTH:
        return message.DESCRIPTOR.name
    inner = brief(message, depth + 1)
    return inner or None


# how ``brief`` shows a field, by its descriptor (worked out once per field)
_MODEL, _REQUEST, _TOKEN, _MESSAGES, _MESSAGE, _VALUES, _BYTES, _VALUE = range(8)
_KINDS: dict[Any, int] = {}


def _kind(field: Any) -> int:
    kind = _KINDS.get(field)
    if kind is None:
        name = field.name
        if name == "model":
            kind = _MODEL
        elif name == "request":
            kind = _REQUEST
        elif name == "token":
            kind = _TOKEN
        elif field.message_type is not None:
            kind = _MESSAGES if _repeated(field) else _MESSAGE
        elif _repeated(field):
            kind = _VALUES
        elif field.type == field.TYPE_BYTES:
            kind = _BYTES
        else:
            kind = _VALUE
        _KINDS[field] = kind
    return kind


def brief(message: Any, depth: int = 0) -> dict[str, Any]:
    """A short, JSON-able summary of a request message's set fields, with their values."""
    out: dict[str, Any] = {}
    for field, value in message.ListFields():
        kind = _KINDS.get(field)
        if kind is None:
            kind = _kind(field)
        if kind == _VALUE:
            out[field.name] = value
        elif kind == _MESSAGE:  # its values (an OptionalTimePoint: its nanoseconds, or None)
            out[field.name] = _nested(value, depth)
        elif kind == _REQUEST:
            out[field.name] = (
                f"{len(value.inputs)} inputs, {len(value.outputs)} outputs, {len(value.pools)} pools"
            )
        elif kind == _MODEL:
            out[field.name] = _model(value)
        elif kind == _TOKEN:
            out[field.name] = value.hex()[:16] + ("..." if len(value) > 8 else "")
        elif kind == _MESSAGES:
            out[field.name] = f"{len(value)} {field.message_type.name}"
        elif kind == _VALUES:
            out[field.name] = list(value) if len(value) <= _SHORT else f"{len(value)} values"
        else:
            out[field.name] = f"{len(value)} bytes"
    return out


class Trace:
    """The calls made on one device (thread-safe)."""

    def __init__(self) -> None:
        self._entries: deque[tuple[int, tuple[Any, ...]]] = deque(maxlen=MAX_ENTRIES)
        self._seq = itertools.count(1)
        self._lock = threading.Lock()

    def record(
        self,
        method: str,
        request: Any,
        started: float,
        ms: float,
        status: int,
        message: str,
        injected: Any = None,
        latency_us: float = 0.0,
    ) -> None:
        """One call: ``request`` is its message (summed up with ``brief``: now, or when read
        for a small one: module docstring); the entry itself is built when read."""
        if request.ByteSize() <= DEFER_BYTES:
            args: Any = (type(request), request.SerializeToString())
        else:
            args = brief(request)
        row = (method, args, started, ms, status, message, injected, latency_us)
        with self._lock:
            self._entries.append((next(self._seq), row))

    def entries(self, clear: bool = False) -> list[dict[str, Any]]:
        with self._lock:
            rows = list(self._entries)
            if clear:
                self._entries.clear()
        return [_entry(seq, *row) for seq, row in rows]


def _entry(
    seq: int,
    method: str,
    args: dict[str, Any] | tuple[Any, bytes],
    started: float,
    ms: float,
    status: int,
    message: str,
    injected: Any,
    latency_us: float,
) -> dict[str, Any]:
    if type(args) is tuple:  # a small request, kept serialized
        message_type, data = args
        args = brief(message_type.FromString(data))
    entry: dict[str, Any] = {
        "method": method,
        "args": args,
        "time": round(started, 6),
        "status": ErrorStatus(status).name,
        "ms": round(ms, 3),
    }
    if status != ErrorStatus.NONE:
        entry["message"] = message
    if injected is not None:
        entry["injected"] = injected
    if latency_us:
        entry["latency_us"] = round(latency_us, 1)
    entry["seq"] = seq
    return entry
