#!/usr/bin/env python3
"""A hostile HTTP/2 backend (h2c with prior knowledge) built on Python's h2: once the client's preface has
arrived it answers nothing and sends PING frames without end, as fast as the socket takes them. The gateway's
upstream session must cut it off (flood verdict), not queue PING ACKs for ever.

Usage: ping_flood_backend.py   Prints "PORT <n>" once listening; serves one connection, stops at 20000 PINGs.
"""
import socket
import sys

import h2.config
import h2.connection


def main():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    print(f"PORT {listener.getsockname()[1]}", flush=True)
    connection, _ = listener.accept()
    h2conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=False))
    h2conn.initiate_connection()
    connection.sendall(h2conn.data_to_send())
    h2conn.receive_data(connection.recv(65536))
    try:
        for index in range(20000):
            h2conn.ping(index.to_bytes(8, "big"))
            connection.sendall(h2conn.data_to_send())
    except OSError:
        pass  # The client cut the connection: what the test wants.
    sys.stdin.read()


if __name__ == "__main__":
    main()
