"""``MetadataChannel``: a gRPC channel whose every call carries extra metadata entries.

The client sends the device name (``nnhal-device``), its session
(``nnhal-session``) and a bearer token (``authorization``) this way. Not a
channel interceptor: grpc's intercepted channels create a multicallable per
call, and one created while another thread closes the channel can crash the
process (seen with the conformance runner, which closes the channel under
calls it abandoned). Not call credentials either: their Python metadata plugin
costs a thread hop, ~0.6 ms per call. The multicallables a stub makes once are
wrapped instead, and each call adds the entries to its own metadata.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc

_POSITIONAL = ("timeout", "metadata", "credentials", "wait_for_ready", "compression")


class _WithMetadata:
    """A multicallable (any call form) whose calls also carry ``entries``."""

    def __init__(self, multicallable: Any, entries: tuple[tuple[str, str], ...]) -> None:
        self._call = multicallable
        self._entries = entries

    def _kwargs(self, args: tuple, kwargs: dict[str, Any]) -> dict[str, Any]:
        if args:  # positional timeout / metadata, as grpc allows
            kwargs.update(zip(_POSITIONAL, args))
        kwargs["metadata"] = (*(kwargs.get("metadata") or ()), *self._entries)
        return kwargs

    def __call__(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        if not args and not kwargs:  # the common call: the entries are all its metadata
            return self._call(request, metadata=self._entries)
        return self._call(request, **self._kwargs(args, kwargs))

    def with_call(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        return self._call.with_call(request, **self._kwargs(args, kwargs))

    def future(self, request: Any, *args: Any, **kwargs: Any) -> Any:
        return self._call.future(request, **self._kwargs(args, kwargs))


class MetadataChannel(grpc.Channel):
    """``channel`` with ``entries`` added to the metadata of every call (nestable)."""

    def __init__(self, channel: grpc.Channel, entries: Sequence[tuple[str, str]]) -> None:
        self.channel = channel
        self.entries = tuple(entries)

    def unary_unary(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return _WithMetadata(self.channel.unary_unary(method, *args, **kwargs), self.entries)

    def unary_stream(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return _WithMetadata(self.channel.unary_stream(method, *args, **kwargs), self.entries)

    def stream_unary(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return _WithMetadata(self.channel.stream_unary(method, *args, **kwargs), self.entries)

    def stream_stream(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return _WithMetadata(self.channel.stream_stream(method, *args, **kwargs), self.entries)

    def subscribe(self, callback: Any, try_to_connect: bool = False) -> None:
        self.channel.subscribe(callback, try_to_connect)

    def unsubscribe(self, callback: Any) -> None:
        self.channel.unsubscribe(callback)

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> MetadataChannel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def with_metadata(channel: grpc.Channel, entries: Sequence[tuple[str, str]]) -> grpc.Channel:
    """``channel`` itself when there is nothing to add, else a ``MetadataChannel``."""
    return MetadataChannel(channel, entries) if entries else channel
