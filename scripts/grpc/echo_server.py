#!/usr/bin/env python3
"""A real gRPC server (grpcio) for the HTTP/2 upstream tests: service tokengate.test.Echo over plain TCP
(HTTP/2 with prior knowledge, as grpcio serves an insecure port), raw bytes in and out through generic
handlers, so no generated stubs are needed.

Methods: Unary (echoes the message), ServerStream (the message three times), ClientStream (the messages
joined), Bidi (each message echoed as it arrives), Deny (PERMISSION_DENIED with a message). Every answer
carries trailing metadata `x-echo-trailer: done`, and the request's `authorization` metadata is echoed back
in `x-seen-authorization` (initial metadata) so a test can see what reached the backend.

Usage: echo_server.py [port]   (0 or absent: an ephemeral port). Prints "PORT <n>" once serving.
"""
import sys
from concurrent import futures

import grpc

SERVICE = "tokengate.test.Echo"


def _metadata(context):
    seen = dict(context.invocation_metadata()).get("authorization", "")
    context.send_initial_metadata((("x-seen-authorization", seen),))
    context.set_trailing_metadata((("x-echo-trailer", "done"),))


def unary(request, context):
    _metadata(context)
    return request


def server_stream(request, context):
    _metadata(context)
    for _ in range(3):
        yield request


def client_stream(request_iterator, context):
    _metadata(context)
    return b"".join(request_iterator)


def bidi(request_iterator, context):
    _metadata(context)
    for request in request_iterator:
        yield request


def deny(request, context):
    context.abort(grpc.StatusCode.PERMISSION_DENIED, "denied by the backend")


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    identity = (lambda b: b)
    handlers = {
        "Unary": grpc.unary_unary_rpc_method_handler(unary, identity, identity),
        "ServerStream": grpc.unary_stream_rpc_method_handler(server_stream, identity, identity),
        "ClientStream": grpc.stream_unary_rpc_method_handler(client_stream, identity, identity),
        "Bidi": grpc.stream_stream_rpc_method_handler(bidi, identity, identity),
        "Deny": grpc.unary_unary_rpc_method_handler(deny, identity, identity),
    }
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    bound = server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    print(f"PORT {bound}", flush=True)
    # Until the test closes stdin (or kills the process).
    sys.stdin.read()
    server.stop(0)


if __name__ == "__main__":
    main()
