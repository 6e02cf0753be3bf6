"""Replies read by the client (nnhal._client_results): output shapes kept from earlier
replies serve only replies with the very same shapes."""

from __future__ import annotations

from nnhal import convert as cv
from nnhal._client_results import _request_result
from nnhal._proto.v1_3 import prepared_model_pb2 as ppb
from nnhal.types import NO_TIMING, OutputShape


def _reply(*shapes: tuple[tuple[int, ...], bool], pool: bytes = b"") -> ppb.ExecuteReply:
    reply = ppb.ExecuteReply(timing=cv.timing_to_pb(NO_TIMING))
    for dims, ok in shapes:
        reply.outputShapes.add(dimensions=dims, isSufficient=ok)
    if pool:
        reply.outputPools.add(poolIndex=1, data=pool)
    return reply


def test_shapes_as_output_shape_from_pb_reply_after_reply() -> None:
    a, b = ((1, 2), True), ((1,), True)
    replies = [
        _reply(a, b, pool=b"x" * 12),
        _reply(a, b, pool=b"y" * 12),
        _reply(a, ((1,), False)),
        _reply(a, ((2,), True)),
        _reply(a),
        _reply(),
        _reply(a, b),
        _reply(((1, 2, 0), True), b),
    ]
    for reply in replies:
        result = _request_result(ppb.ExecuteReply.FromString(reply.SerializeToString()))
        assert result.outputShapes == tuple(cv.output_shape_from_pb(s) for s in reply.outputShapes)
        assert all(type(s) is OutputShape for s in result.outputShapes)
        assert result.pools == {p.poolIndex: p.data for p in reply.outputPools}
        assert result.timing == NO_TIMING
