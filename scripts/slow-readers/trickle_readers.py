#!/usr/bin/env python3
# This source file is part of tokengate. Licensed under the Apache License v2.0.
"""Trickle readers: COUNT HTTP/1.1 clients that each ask for PATH and then read the response RATE bytes a
second from the socket (a small receive buffer, so the kernel takes little more; TLS is decrypted from
what was read, with no read-ahead), for SECONDS; then every connection still
open is closed. Loopback attack traffic for the response-buffer and send-rate tests and the memory figures.

Usage: trickle_readers.py HOST PORT PATH [--count N] [--rate BYTES] [--seconds S] [--tls] [--ready FILE]
                          [--fast-bytes N]
Prints one JSON line: connections opened, responses read to their end, connections the server cut (closed
or reset before the response's end), connections still open when time was up, and the bytes read in all.
--ready FILE: the file is written once every connection has sent its request (a test waits for it).
--fast-bytes N: each reader first reads N bytes (of plaintext) as fast as they come, as a client that stalls
after a good start; Linux grows the server's send buffer for it meanwhile."""
import argparse
import asyncio
import json
import socket
import ssl
import time

parser = argparse.ArgumentParser()
parser.add_argument("host")
parser.add_argument("port", type=int)
parser.add_argument("path")
parser.add_argument("--count", type=int, default=10)
parser.add_argument("--rate", type=int, default=10, help="bytes per second each reader takes")
parser.add_argument("--seconds", type=float, default=10.0)
parser.add_argument("--tls", action="store_true")
parser.add_argument("--fast-bytes", type=int, default=0, help="read this much at full speed before trickling")
parser.add_argument("--ready")
options = parser.parse_args()
if not (0 < options.count <= 5000 and 0 < options.seconds <= 600 and options.rate > 0):
    raise SystemExit("--count 1..5000, --seconds up to 600, --rate above 0 (a bounded loopback run)")

counts = {"opened": 0, "complete": 0, "cut": 0, "open_at_end": 0, "failed_to_connect": 0, "bytes": 0}
requested = 0
all_requested = asyncio.Event()


class Connection:
    """One reader's socket, read RATE raw bytes a second. With --tls the bytes are decrypted by an
    `ssl.SSLObject` over memory BIOs: what the client has not read stays in the kernel's receive buffer (4 KiB),
    not in a userspace buffer, and a reset from the server is seen at the next read, as a slow client sees it.
    (asyncio's TLS streams read hundreds of kilobytes ahead into memory, which is not the attack.)"""

    def __init__(self, sock, tls):
        self.sock = sock
        self.loop = asyncio.get_running_loop()
        self.tls = None
        if tls:
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE  # A throwaway test certificate on loopback.
            context.set_alpn_protocols(["http/1.1"])
            self.incoming = ssl.MemoryBIO()
            self.outgoing = ssl.MemoryBIO()
            self.tls = context.wrap_bio(self.incoming, self.outgoing, server_hostname="localhost")

    async def flush(self):
        pending = self.outgoing.read()
        if pending:
            await self.loop.sock_sendall(self.sock, pending)

    async def handshake(self):
        while self.tls is not None:
            try:
                self.tls.do_handshake()
                await self.flush()
                return
            except ssl.SSLWantReadError:
                await self.flush()
                data = await self.loop.sock_recv(self.sock, 65536)
                if not data:
                    raise ConnectionError("closed during the handshake")
                self.incoming.write(data)

    async def send(self, data):
        if self.tls is None:
            await self.loop.sock_sendall(self.sock, data)
        else:
            self.tls.write(data)
            await self.flush()

    async def receive(self, size):
        """Reads up to `size` raw bytes; returns (plaintext, ended). Raises on a reset or a broken record."""
        # Linux keeps received bytes readable after a reset and reports it only once they are read; a reader
        # this slow would see it minutes later. The pending error says at once that the server cut it.
        error = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if error:
            raise ConnectionResetError(error, "reset by the server")
        raw = await self.loop.sock_recv(self.sock, size)
        if self.tls is None or not raw:
            return raw, not raw
        self.incoming.write(raw)
        plain = b""
        try:
            while True:
                plain += self.tls.read(65536)
        except ssl.SSLWantReadError:
            pass
        except ssl.SSLZeroReturnError:
            return plain, True
        return plain, False


async def reader(index, deadline):
    global requested
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if not options.fast_bytes:  # A client that starts fast has the kernel's own, growing, receive buffer.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    connection = Connection(sock, options.tls)
    try:
        await asyncio.wait_for(asyncio.get_running_loop().sock_connect(sock, (options.host, options.port)), 10)
        await asyncio.wait_for(connection.handshake(), 10)
    except (OSError, ssl.SSLError, asyncio.TimeoutError):
        counts["failed_to_connect"] += 1
        sock.close()
        requested += 1
        if requested == options.count:
            all_requested.set()
        return
    counts["opened"] += 1
    await connection.send(f"GET {options.path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode())
    requested += 1
    if requested == options.count:
        all_requested.set()
    head = b""
    length = None
    body = 0
    counted = 0
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                counts["open_at_end"] += 1
                return
            fast = counted < options.fast_bytes
            chunk, ended = await asyncio.wait_for(connection.receive(65536 if fast else options.rate), remaining)
            counted += len(chunk)
            counts["bytes"] += len(chunk)
            if length is None:
                head += chunk
                if b"\r\n\r\n" in head:
                    fields, rest = head.split(b"\r\n\r\n", 1)
                    for line in fields.split(b"\r\n")[1:]:
                        name, _, value = line.partition(b":")
                        if name.strip().lower() == b"content-length":
                            length = int(value.strip())
                    length = length if length is not None else -1
                    body = len(rest)
            else:
                body += len(chunk)
            if length is not None and length >= 0 and body >= length:
                counts["complete"] += 1
                return
            if ended:
                break
            if not fast:
                await asyncio.sleep(1)
        counts["cut"] += 1
    except asyncio.TimeoutError:
        counts["open_at_end"] += 1
    except (ConnectionError, ssl.SSLError, OSError):
        counts["cut"] += 1
    finally:
        sock.close()


async def main():
    deadline = time.monotonic() + options.seconds
    tasks = []
    for index in range(options.count):
        tasks.append(asyncio.create_task(reader(index, deadline)))
        if index % 50 == 49:
            await asyncio.sleep(0.05)  # Not one SYN burst: the listen backlog is the kernel's, not the test's.
    if options.ready:
        await asyncio.wait_for(all_requested.wait(), options.seconds)
        with open(options.ready, "w") as ready:
            ready.write("ready\n")
    await asyncio.gather(*tasks, return_exceptions=True)


asyncio.run(main())
print(json.dumps(counts, sort_keys=True))
