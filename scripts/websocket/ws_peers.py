#!/usr/bin/env python3
# This source file is part of tokengate. Licensed under the Apache License v2.0.
"""Real WebSocket peers for the gateway's tunnel tests, built on the `websockets` package (PyPI).

  backend PORTFILE      serve on two loopback ports, written to PORTFILE as JSON {"ws": N, "bad": M}:
                        "ws" is a websockets server (/echo echoes, /whoami sends the request's identity
                        headers, /flood sends without end); "bad" answers every upgrade
                        with a 101 whose Sec-WebSocket-Accept is wrong, but /bad/sink with a valid 101 after which it reads nothing.
  client MODE URL ...   one client scenario against the gateway; prints one JSON line.

Client options: --ca FILE (the gateway's certificate), --token T (Authorization: Bearer), --cookie C
(Cookie header), --origin O, --ready FILE (written once the tunnel is open), --seconds S.
"""
import argparse
import asyncio
import base64
import hashlib
import json
import os
import ssl
import sys
import time

import websockets
from websockets.asyncio.client import connect
from websockets.asyncio.server import serve


# ---- backend ---------------------------------------------------------------------------------------------------

async def backend_handler(ws):
    path = ws.request.path
    if path.endswith("/echo"):
        async for message in ws:
            await ws.send(message)
    elif path.endswith("/whoami"):
        headers = ws.request.headers
        await ws.send(json.dumps({
            "user": headers.get("x-tokengate-user"),
            "authorization": headers.get("authorization"),
            "cookie": headers.get("cookie"),
            "upgrade": headers.get("upgrade"),
        }))
        await ws.wait_closed()
    elif path.endswith("/flood"):
        chunk = b"x" * 65536
        while True:
            await ws.send(chunk)


async def bad_upgrade(reader, writer):
    try:
        head = await reader.readuntil(b"\r\n\r\n")
        if b" /bad/sink " in head.split(b"\r\n", 1)[0]:
            # A valid 101, then nothing is ever read: what the client sends must wait outside the gateway.
            key = [line.split(b":", 1)[1].strip() for line in head.split(b"\r\n") if line.lower().startswith(b"sec-websocket-key:")][0]
            accept = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
            writer.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                         b"Sec-WebSocket-Accept: " + accept + b"\r\n\r\n")
            await writer.drain()
            writer.transport.pause_reading()
            await asyncio.sleep(60)
            return
        writer.write(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     b"Sec-WebSocket-Accept: bm90IHRoZSByaWdodCBhbnN3ZXI=\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(5)
    except Exception:
        pass
    writer.close()


async def run_backend(portfile):
    # max_queue=1 and small reads: a backend that stops reading stops its socket soon.
    async with serve(backend_handler, "127.0.0.1", 0, max_size=None, max_queue=1, ping_interval=None) as server:
        bad = await asyncio.start_server(bad_upgrade, "127.0.0.1", 0)
        ports = {"ws": server.sockets[0].getsockname()[1], "bad": bad.sockets[0].getsockname()[1]}
        with open(portfile + ".tmp", "w") as f:
            json.dump(ports, f)
        os.rename(portfile + ".tmp", portfile)
        await asyncio.Future()


# ---- clients ---------------------------------------------------------------------------------------------------

def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


async def run_client(args):
    context = ssl.create_default_context(cafile=args.ca) if args.url.startswith("wss:") else None
    headers = {}
    if args.token:
        headers["Authorization"] = "Bearer " + args.token
    if args.cookie:
        headers["Cookie"] = args.cookie
    result = {"mode": args.mode}
    try:
        async with connect(args.url, ssl=context, additional_headers=headers, origin=args.origin,
                           max_size=None, ping_interval=None, open_timeout=5, close_timeout=2) as ws:
            result["status"] = 101
            if args.ready:
                open(args.ready, "w").close()
            if args.mode == "echo":
                texts = [f"message {i}" for i in range(100)]
                for text in texts:
                    await ws.send(text)
                got = [await ws.recv() for _ in texts]
                binary = os.urandom(1000)
                await ws.send(binary)
                result["echoed"] = got == texts and await ws.recv() == binary
            elif args.mode == "large":
                payload = os.urandom(8 * 1024 * 1024)
                await ws.send(payload)
                result["echoed"] = await ws.recv() == payload
            elif args.mode == "whoami":
                result["whoami"] = json.loads(await ws.recv())
            elif args.mode == "wait-close":
                # Sends nothing and waits for the gateway to end the tunnel; how long that took after --ready.
                started = time.monotonic()
                try:
                    await asyncio.wait_for(ws.recv(), timeout=args.seconds)
                except websockets.ConnectionClosed:
                    pass
                result["closed_after"] = round(time.monotonic() - started, 3)
                result["closed"] = ws.close_code is not None or ws.state.name == "CLOSED"
            elif args.mode == "flood":
                # The backend reads nothing: count what the gateway lets through before sends block.
                chunk = b"y" * 65536
                sent = 0
                deadline = time.monotonic() + args.seconds
                rss_before = rss_kib(args.gateway_pid) if args.gateway_pid else 0
                while time.monotonic() < deadline:
                    try:
                        await asyncio.wait_for(ws.send(chunk), timeout=0.5)
                        sent += len(chunk)
                    except asyncio.TimeoutError:
                        break
                await asyncio.sleep(0.5)
                result["sent_bytes"] = sent
                if args.gateway_pid:
                    result["gateway_rss_growth_kib"] = rss_kib(args.gateway_pid) - rss_before
                # A send cut short leaves no clean close to wait for: the result, then out.
                print(json.dumps(result), flush=True)
                os._exit(0)
            elif args.mode == "slow-read":
                # The backend floods; this client reads nothing for a while, then a little.
                rss_before = rss_kib(args.gateway_pid) if args.gateway_pid else 0
                await asyncio.sleep(args.seconds)
                if args.gateway_pid:
                    result["gateway_rss_growth_kib"] = rss_kib(args.gateway_pid) - rss_before
                got = 0
                for _ in range(10):
                    got += len(await ws.recv())
                result["read_after_pause"] = got
    except websockets.InvalidStatus as error:
        result["status"] = error.response.status_code
        result["body"] = error.response.body.decode("utf-8", "replace")
    except websockets.InvalidHandshake as error:
        result["status"] = -1
        result["error"] = str(error)
    print(json.dumps(result), flush=True)


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "backend":
        asyncio.run(run_backend(sys.argv[2]))
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("client")
    parser.add_argument("mode")
    parser.add_argument("url")
    parser.add_argument("--ca")
    parser.add_argument("--token")
    parser.add_argument("--cookie")
    parser.add_argument("--origin")
    parser.add_argument("--ready")
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--gateway-pid", type=int)
    asyncio.run(run_client(parser.parse_args()))


if __name__ == "__main__":
    main()
