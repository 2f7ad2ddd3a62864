#!/usr/bin/env python3
"""A backend that misbehaves on purpose, for scripts/soak.sh: the gateway's `faulty` upstream.

    python3 faulty_backend.py PORT

Each request's path picks the fault (anything else gets a small valid answer):
  /faulty/close     reads the request and closes without a byte
  /faulty/reset     reads the request and resets the connection (RST)
  /faulty/garbage   answers bytes that are not HTTP
  /faulty/short     promises Content-Length: 100000 and closes after 10 bytes
  /faulty/chunks    a chunked body with a malformed chunk size
  /faulty/headers   a 200 with 100 KiB of header fields
  /faulty/split     a status line, then nothing for longer than the gateway's response_timeout
  /faulty/twice     two answers to one request (an answer the request did not ask for)
  /faulty/early     answers before the request body has been read, then closes
Loopback only; one thread per connection, at most 256 connections at once (the rest wait in the backlog).
"""
import socket
import struct
import sys
import threading
import time

SLOTS = threading.BoundedSemaphore(256)


def read_head(conn):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None, b""
        data += chunk
        if len(data) > 1 << 20:
            return None, b""
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


def serve(conn):
    try:
        conn.settimeout(30)
        while True:
            head, rest = read_head(conn)
            if head is None:
                return
            line = head.split(b"\r\n", 1)[0].decode("latin-1")
            parts = line.split(" ")
            path = parts[1] if len(parts) > 1 else "/"
            length = 0
            for field in head.split(b"\r\n")[1:]:
                name, _, value = field.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value.strip() or b"0")
            if path.startswith("/faulty/early"):
                conn.sendall(b"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            body = rest
            while len(body) < length:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                body += chunk
            if path.startswith("/faulty/close"):
                return
            if path.startswith("/faulty/reset"):
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                return
            if path.startswith("/faulty/garbage"):
                conn.sendall(b"\x16\x03\x01\x00\xffNOT HTTP AT ALL\r\n\r\n")
                return
            if path.startswith("/faulty/short"):
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n0123456789")
                return
            if path.startswith("/faulty/chunks"):
                conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nZZ\r\n")
                return
            if path.startswith("/faulty/headers"):
                fields = b"".join(b"X-Filler-%d: %s\r\n" % (i, b"f" * 1000) for i in range(100))
                conn.sendall(b"HTTP/1.1 200 OK\r\n" + fields + b"Content-Length: 0\r\n\r\n")
                continue
            if path.startswith("/faulty/split"):
                conn.sendall(b"HTTP/1.1 200 OK\r\n")
                time.sleep(4)
                return
            if path.startswith("/faulty/twice"):
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" * 2)
                continue
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\r\nok\n")
    except OSError:
        pass
    finally:
        conn.close()
        SLOTS.release()


def main():
    port = int(sys.argv[1])
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(512)
    while True:
        conn, _ = listener.accept()
        SLOTS.acquire()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    main()
