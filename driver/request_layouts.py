"""Execution requests decoded and validated once per layout, with a memo per prepared model.

Clients send the same request layout again and again: the same arguments
(pool, offset, length, dimensions of each input and output) and pools of the
same kinds and sizes, only the bytes differ. ``decode_request`` turns a
request message into a ``nnhal.types.Request``, reusing the decoded arguments
of an identical layout (keyed by their serialized bytes; the last ones are
found by comparing the argument messages, in C: equal messages decode alike);
``validate_once`` runs ``validate_request`` for a layout the prepared model has
not accepted before and remembers the verdict, so that each layout is validated
once.
``validate_request`` is a function of the arguments, the pools' kinds and
sizes (a shared segment's name only by being empty, a token by its value) and
``allow_unspecified_output``: exactly what the memo's key holds (``pools_key``:
what it reads of the pools). The memo lives on the ``PreparedModel``
(``request_layouts``, at most ``MAX_LAYOUTS`` entries: emptied when full); the
service keeps its execution plans there too (``nnhal.driver.execution_plans``).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from nnhal._proto.v1_3 import types_pb2 as tpb
from nnhal.convert import memory_from_pb, memory_pool_from_pb, request_argument_from_pb
from nnhal.types import InlineMemory, MemoryPool, Request, SharedMemory, TokenMemory
from nnhal.validation import validate_request

#: entries of one prepared model's memo (decoded arguments and accepted layouts)
MAX_LAYOUTS = 256


def remember(memo: dict[Hashable, Any], key: Hashable, value: Any) -> None:
    """``memo[key] = value`` in a prepared model's memo, bounded by ``MAX_LAYOUTS``."""
    if len(memo) >= MAX_LAYOUTS:
        memo.clear()  # a client that never repeats itself: no memo rather than a big one
    memo[key] = value


def decode_request(prepared: Any, message: Any, *, v1_0: bool = False) -> tuple[Request, Hashable]:
    """The Request of a request message (1.3, or V1_0 with ``v1_0``), and its arguments'
    key for ``validate_once``."""
    memo: dict[Hashable, Any] = prepared.request_layouts
    inputs, outputs = message.inputs, message.outputs
    last = memo.get(_LAST)
    if last is not None and inputs == last[0] and outputs == last[1]:
        # the arguments of the last request, compared as messages (in C; equal messages
        # decode alike): its key and decoded arguments, without serializing and hashing
        key, arguments = last[2], last[3]
    else:
        key = (tuple(map(_SERIALIZE, inputs)), tuple(map(_SERIALIZE, outputs)))
        arguments = memo.get(key)
        if arguments is None:
            arguments = (
                tuple([request_argument_from_pb(a) for a in inputs]),
                tuple([request_argument_from_pb(a) for a in outputs]),
            )
            remember(memo, key, arguments)
        kept = tpb.Request()  # a copy: the message itself holds the pools' bytes
        kept.inputs.extend(inputs)
        kept.outputs.extend(outputs)
        remember(memo, _LAST, (kept.inputs, kept.outputs, key, arguments))
    decode = memory_from_pb if v1_0 else memory_pool_from_pb
    # an inline pool, the common one, is decoded here (both decoders read it alike); one
    # with bytes is inline without asking the oneof which member is set
    pools = tuple(
        [
            InlineMemory(data)
            if (data := p.inlineData) or p.WhichOneof("memory") == "inlineData"
            else decode(p)
            for p in message.pools
        ]
    )
    return Request(arguments[0], arguments[1], pools), key


#: the memo's entry of the last arguments decoded: (their messages, key, arguments)
_LAST = "last"
#: RequestArgument.SerializeToString (the 1.3 and V1_0 requests share the message)
_SERIALIZE = tpb.RequestArgument.SerializeToString


def pools_key(pools: Sequence[MemoryPool]) -> tuple[Any, ...]:
    """What validate_request reads of the pools."""
    out: list[Any] = []
    for pool in pools:
        kind = type(pool)
        if kind is InlineMemory:
            out.append(len(pool.data))  # type: ignore[union-attr]
        elif kind is SharedMemory:
            out.append(("shared", bool(pool.name), pool.size))  # type: ignore[union-attr]
        elif kind is TokenMemory:
            out.append(("token", pool.token))  # type: ignore[union-attr]
        else:
            out.append(("other", id(kind)))
    return tuple(out)


def validate_once(
    prepared: Any, request: Request, arguments_key: Hashable | None, allow_unspecified_output: bool
) -> None:
    """``validate_request(request, prepared.model)`` unless this layout passed it before
    (``arguments_key`` from ``decode_request``; None: no memo, validate)."""
    if arguments_key is None:
        validate_request(request, prepared.model, allow_unspecified_output=allow_unspecified_output)
        return
    memo: dict[Hashable, Any] = prepared.request_layouts
    key = ("valid", arguments_key, pools_key(request.pools), allow_unspecified_output)
    if key in memo:
        return
    validate_request(request, prepared.model, allow_unspecified_output=allow_unspecified_output)
    remember(memo, key, True)
