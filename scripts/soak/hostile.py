#!/usr/bin/env python3
"""Hostile HTTP/1.1 clients for scripts/soak.sh, over TLS to the gateway on loopback.

    python3 hostile.py MODE PORT SECONDS [TOKEN]

Modes (each runs SECONDS, with a bounded number of connections, then prints one JSON line of counts):
  smuggle    request-smuggling shapes, each on a new connection; none may be answered 2xx
  slowloris  30 connections that send a request head one byte a second
  slowbody   10 uploads that declare 1 MB and send 20 bytes a second
  slowread   10 clients that ask for a large answer and read 256 bytes a second
  connflood  connections opened and dropped: mid-handshake, after the handshake, after half a request
  badtokens  requests with forged, truncated and oversized tokens; each must be 401 or 400
The certificate is not verified (a test server on loopback). Exit status 1 when a check above failed.
"""
import json
import os
import random
import socket
import ssl
import sys
import threading
import time

MODE, PORT, SECONDS = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
TOKEN = sys.argv[4] if len(sys.argv) > 4 else ""
HOST = "127.0.0.1"
DEADLINE = time.monotonic() + SECONDS
CONTEXT = ssl.create_default_context()
CONTEXT.check_hostname = False
CONTEXT.verify_mode = ssl.CERT_NONE
CONTEXT.set_alpn_protocols(["http/1.1"])
counts = {}
failures = []
lock = threading.Lock()


def count(key):
    with lock:
        counts[key] = counts.get(key, 0) + 1


def connect(timeout=5.0):
    raw = socket.create_connection((HOST, PORT), timeout=timeout)
    return CONTEXT.wrap_socket(raw, server_hostname="localhost")


def status_of(sock, timeout=5.0):
    """The first status code the server sends, or None when it closes (or stays silent) first."""
    sock.settimeout(timeout)
    data = b""
    try:
        while b"\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                return None
            data += chunk
    except (OSError, ssl.SSLError):
        return None
    parts = data.split(b" ", 2)
    return int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else -1


AUTH = ("Authorization: Bearer " + TOKEN + "\r\n") if TOKEN else ""
SMUGGLING = [
    # CL and TE together (RFC 9112 §6.1: must not be forwarded as is)
    "POST /healthy/a HTTP/1.1\r\nHost: localhost\r\n{auth}Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /healthy/b HTTP/1.1\r\nHost: localhost\r\n\r\n",
    # two Content-Lengths that differ
    "POST /healthy/a HTTP/1.1\r\nHost: localhost\r\n{auth}Content-Length: 4\r\nContent-Length: 40\r\n\r\nAAAA",
    # obfuscated Transfer-Encoding
    "POST /healthy/a HTTP/1.1\r\nHost: localhost\r\n{auth}Transfer-Encoding: xchunked\r\n\r\n0\r\n\r\n",
    "POST /healthy/a HTTP/1.1\r\nHost: localhost\r\n{auth}Transfer-Encoding : chunked\r\n\r\n0\r\n\r\n",
    "POST /healthy/a HTTP/1.1\r\nHost: localhost\r\n{auth}Transfer-Encoding: chunked, identity\r\n\r\n0\r\n\r\n",
    # a header folded over two lines (obs-fold)
    "GET /healthy/a HTTP/1.1\r\nHost: localhost\r\n{auth}X-Folded: a\r\n b\r\n\r\n",
    # bare LF and bare CR in the head
    "GET /healthy/a HTTP/1.1\nHost: localhost\n{auth_lf}\n",
    "GET /healthy/a HTTP/1.1\r\nHost: localhost\r\nX-A: b\rc\r\n{auth}\r\n",
    # NUL in a field value, a space before the colon, no Host, two Hosts
    "GET /healthy/a HTTP/1.1\r\nHost: localhost\r\n{auth}X-A: b\x00c\r\n\r\n",
    "GET /healthy/a HTTP/1.1\r\nHost : localhost\r\n{auth}\r\n",
    "GET /healthy/a HTTP/1.1\r\n{auth}\r\n",
    "GET /healthy/a HTTP/1.1\r\nHost: localhost\r\nHost: evil.example\r\n{auth}\r\n",
    # a chunk size with an extension flood and one that overflows
    "POST /healthy/a HTTP/1.1\r\nHost: localhost\r\n{auth}Transfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFFFFFF\r\n",
    # an absolute-form target for another host, and a target that is not a path
    "GET http://evil.example/healthy/a HTTP/1.1\r\nHost: localhost\r\n{auth}\r\n",
    "GET healthy/a HTTP/1.1\r\nHost: localhost\r\n{auth}\r\n",
    # HTTP/1.0 with Transfer-Encoding, a version that does not exist
    "POST /healthy/a HTTP/1.0\r\nHost: localhost\r\n{auth}Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
    "GET /healthy/a HTTP/1.2\r\nHost: localhost\r\n{auth}\r\n",
]


def smuggle():
    while time.monotonic() < DEADLINE:
        for index, shape in enumerate(SMUGGLING):
            payload = shape.format(auth=AUTH, auth_lf=AUTH.replace("\r\n", "\n")).encode("latin-1")
            try:
                sock = connect()
                sock.sendall(payload)
                status = status_of(sock)
                sock.close()
            except (OSError, ssl.SSLError):
                status = None
            count(str(status))
            if status is not None and 200 <= status < 300:
                failures.append(f"smuggling shape {index} was answered {status}")
            if time.monotonic() >= DEADLINE:
                break
        time.sleep(0.2)


def trickle(sock, data, per_second):
    for offset in range(0, len(data), per_second):
        if time.monotonic() >= DEADLINE:
            return False
        sock.sendall(data[offset:offset + per_second])
        time.sleep(1)
    return True


def slowloris_one():
    while time.monotonic() < DEADLINE:
        try:
            sock = connect()
            head = ("GET /healthy/slow HTTP/1.1\r\nHost: localhost\r\n" + AUTH + "X-Pad: " + "p" * 200 + "\r\n\r\n")
            trickle(sock, head.encode(), 1)
            count("finished")
        except (OSError, ssl.SSLError):
            count("cut")
        time.sleep(0.5)


def slowbody_one():
    while time.monotonic() < DEADLINE:
        try:
            sock = connect()
            sock.sendall(("POST /healthy/upload HTTP/1.1\r\nHost: localhost\r\n" + AUTH
                          + "Content-Type: application/octet-stream\r\nContent-Length: 1000000\r\n\r\n").encode())
            trickle(sock, b"b" * 1000000, 20)
            count("finished")
        except (OSError, ssl.SSLError):
            count("cut")
        time.sleep(0.5)


def slowread_one():
    while time.monotonic() < DEADLINE:
        try:
            raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            raw.settimeout(10)
            raw.connect((HOST, PORT))
            sock = CONTEXT.wrap_socket(raw, server_hostname="localhost")
            sock.sendall(b"GET /public/big HTTP/1.1\r\nHost: localhost\r\n\r\n")
            received = 0
            while time.monotonic() < DEADLINE:
                chunk = sock.recv(256)
                if not chunk:
                    break
                received += len(chunk)
                time.sleep(1)
            count("read_until_close" if time.monotonic() < DEADLINE else "still_reading")
            sock.close()
        except (OSError, ssl.SSLError):
            count("cut")


def connflood():
    while time.monotonic() < DEADLINE:
        for step in range(3):
            try:
                if step == 0:
                    raw = socket.create_connection((HOST, PORT), timeout=2)
                    raw.sendall(b"\x16\x03\x01\x00\xc8\x01\x00\x00\xc4\x03\x03" + os.urandom(20))
                    raw.close()
                    count("mid_handshake")
                else:
                    sock = connect(timeout=2)
                    if step == 2:
                        sock.sendall(b"GET /healthy/a HTTP/1.1\r\nHost: local")
                    sock.close()
                    count("after_handshake" if step == 1 else "half_request")
            except (OSError, ssl.SSLError):
                count("refused")
        time.sleep(0.02)


def badtokens():
    forged = TOKEN.rsplit(".", 1)[0] + "." + "A" * 43 if TOKEN else "a.b.c"
    shapes = [forged, TOKEN[:-5], TOKEN + "." + TOKEN, "x" * 9000, "e30.e30.", "...", TOKEN.replace(".", "%2E")]
    sock = None
    while time.monotonic() < DEADLINE:
        token = random.choice(shapes)
        try:
            if sock is None:
                sock = connect()
            sock.sendall(("GET /healthy/bad HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer " + token
                          + "\r\n\r\n").encode())
            status = status_of(sock)
            # Drain the small JSON answer so the next request starts clean; a closed connection is reopened.
            sock.settimeout(0.2)
            try:
                sock.recv(65536)
            except (OSError, ssl.SSLError):
                pass
            count(str(status))
            if status is not None and status not in (400, 401, 431):
                failures.append(f"a bad token was answered {status}")
            if status is None or status in (400, 431):
                sock.close()
                sock = None
        except (OSError, ssl.SSLError):
            count("closed")
            sock = None
        time.sleep(0.01)


def run_threads(target, n):
    threads = [threading.Thread(target=target, daemon=True) for _ in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(SECONDS + 30)


if MODE == "smuggle":
    smuggle()
elif MODE == "slowloris":
    run_threads(slowloris_one, 30)
elif MODE == "slowbody":
    run_threads(slowbody_one, 10)
elif MODE == "slowread":
    run_threads(slowread_one, 10)
elif MODE == "connflood":
    run_threads(connflood, 4)
elif MODE == "badtokens":
    run_threads(badtokens, 2)
else:
    sys.exit(f"unknown mode {MODE}")
print(json.dumps({"mode": MODE, "counts": counts, "failures": sorted(set(failures))[:10]}))
sys.exit(1 if failures else 0)
