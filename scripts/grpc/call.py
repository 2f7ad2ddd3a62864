#!/usr/bin/env python3
"""A real gRPC client (grpcio) for the gateway tests: one unary call of tokengate.test.Echo/<method> over
HTTP/2 with TLS, raw bytes, the token (if any) as `authorization: Bearer …` metadata.

Usage: call.py <host:port> <ca.pem> <method> [token]
The request message is b"ping", or 64 KiB of zeros for a method whose name ends in "Large".
Prints "OK <reply>" or "STATUS <code name> <details>" (the status grpcio surfaced), always exits 0 once the
call returned; exits 2 when the call could not be made at all.
"""
import sys

import grpc


def main():
    target, ca_path, method = sys.argv[1], sys.argv[2], sys.argv[3]
    token = sys.argv[4] if len(sys.argv) > 4 else None
    with open(ca_path, "rb") as handle:
        credentials = grpc.ssl_channel_credentials(root_certificates=handle.read())
    metadata = (("authorization", f"Bearer {token}"),) if token else ()
    with grpc.secure_channel(target, credentials) as channel:
        call = channel.unary_unary(
            f"/tokengate.test.Echo/{method}",
            request_serializer=lambda b: b,
            response_deserializer=lambda b: b,
        )
        try:
            message = bytes(64 * 1024) if method.endswith("Large") else b"ping"
            reply = call(message, metadata=metadata, timeout=10)
            print(f"OK {reply.decode(errors='replace')}")
        except grpc.RpcError as error:
            print(f"STATUS {error.code().name} {error.details()}")


if __name__ == "__main__":
    try:
        main()
    except Exception as error:  # noqa: BLE001 - a setup failure is reported, not a status
        print(f"ERROR {type(error).__name__}", file=sys.stderr)
        sys.exit(2)
