"""MetadataChannel adds its entries to the metadata of every call, with or without the
call's own metadata and options."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import grpc

from nnhal._metadata import with_metadata


def _server():
    def unary(request, context):
        return repr(sorted((k, v) for k, v in context.invocation_metadata() if k.startswith("x-")))

    handler = grpc.method_handlers_generic_handler(
        "test.Meta",
        {"Unary": grpc.unary_unary_rpc_method_handler(unary, None, str.encode)},
    )
    server = grpc.server(ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port


def test_entries_go_with_every_call_form() -> None:
    server, port = _server()
    channel = with_metadata(grpc.insecure_channel(f"127.0.0.1:{port}"), (("x-a", "1"),))
    try:
        call = channel.unary_unary("/test.Meta/Unary", lambda b: b, bytes.decode)
        assert call(b"") == "[('x-a', '1')]"
        assert call(b"", timeout=5) == "[('x-a', '1')]"
        assert call(b"", metadata=(("x-b", "2"),)) == "[('x-a', '1'), ('x-b', '2')]"
        assert call(b"", 5, (("x-b", "2"),)) == "[('x-a', '1'), ('x-b', '2')]"
        assert call.with_call(b"")[0] == "[('x-a', '1')]"
        assert call.future(b"").result() == "[('x-a', '1')]"
    finally:
        channel.close()
        server.stop(None)
