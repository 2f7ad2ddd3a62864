#!/usr/bin/env python3
# This source file is part of tokengate. Licensed under the Apache License v2.0.
"""Trickle readers: COUNT HTTP/1.1 clients that each ask for PATH and then read the response RATE bytes a
second (a small receive buffer, so the kernel takes little more), for SECONDS; then every connection still
open is closed. Loopback attack traffic for the response-buffer and send-rate tests and the memory figures.

Usage: trickle_readers.py HOST PORT PATH [--count N] [--rate BYTES] [--seconds S] [--tls] [--ready FILE]
Prints one JSON line: connections opened, responses read to their end, connections the server cut (closed
or reset before the response's end), connections still open when time was up, and the bytes read in all.
--ready FILE: the file is written once every connection has sent its request (a test waits for it)."""
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
parser.add_argument("--ready")
options = parser.parse_args()
if not (0 < options.count <= 5000 and 0 < options.seconds <= 600 and options.rate > 0):
    raise SystemExit("--count 1..5000, --seconds up to 600, --rate above 0 (a bounded loopback run)")

counts = {"opened": 0, "complete": 0, "cut": 0, "open_at_end": 0, "failed_to_connect": 0, "bytes": 0}
requested = 0
all_requested = asyncio.Event()


async def reader(index, deadline):
    global requested
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    try:
        await asyncio.wait_for(asyncio.get_running_loop().sock_connect(sock, (options.host, options.port)), 10)
        context = None
        if options.tls:
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE  # A throwaway test certificate on loopback.
            context.set_alpn_protocols(["http/1.1"])
        stream_reader, writer = await asyncio.wait_for(
            asyncio.open_connection(sock=sock, ssl=context, server_hostname="localhost" if context else None, limit=1024),
            10,
        )
    except (OSError, asyncio.TimeoutError):
        counts["failed_to_connect"] += 1
        sock.close()
        requested += 1
        if requested == options.count:
            all_requested.set()
        return
    counts["opened"] += 1
    writer.write(f"GET {options.path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n".encode())
    await writer.drain()
    requested += 1
    if requested == options.count:
        all_requested.set()
    head = b""
    length = None
    body = 0
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                counts["open_at_end"] += 1
                return
            chunk = await asyncio.wait_for(stream_reader.read(options.rate), remaining)
            if not chunk:
                break
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
            await asyncio.sleep(1)
        counts["cut"] += 1
    except asyncio.TimeoutError:
        counts["open_at_end"] += 1
    except (ConnectionError, ssl.SSLError, OSError):
        counts["cut"] += 1
    finally:
        writer.close()


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
