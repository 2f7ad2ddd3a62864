# This source file is part of tokengate. Licensed under the Apache License v2.0.
"""Shared helpers for the HTTP/2 attack scripts: a raw-frame client over TLS (ALPN h2).

Frames are built with hyperframe and header blocks with hpack (both come with `pip install h2`), never
through h2's connection state machine, so the scripts can send what a well-behaved client would refuse to.

Every script takes the server's host and port, runs one attack, prints one JSON line describing what it
saw, and exits 0 when the server behaved as expected (1 otherwise, 2 on a usage or setup error).
"""

import json
import select
import socket
import ssl
import sys
import threading
import time

from hpack import Decoder, Encoder
from hyperframe.frame import (ContinuationFrame, DataFrame, Frame, GoAwayFrame, HeadersFrame, PingFrame,
                              RstStreamFrame, SettingsFrame, WindowUpdateFrame)

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
ENHANCE_YOUR_CALM = 0xB


class Connection:
    """One TLS connection speaking raw HTTP/2 frames, driven from one thread.

    One thread only: OpenSSL objects must not be read and written from two threads at once (the first version
    of this helper had a reader thread and corrupted TLS records now and then). Every send pumps reads too,
    so the client keeps taking what the server writes (acks, the GOAWAY) while it floods.
    """

    def __init__(self, host, port, timeout=10.0):
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # A test server with a throwaway self-signed certificate.
        context.set_alpn_protocols(["h2"])
        raw = socket.create_connection((host, port), timeout=timeout)
        self.sock = context.wrap_socket(raw, server_hostname="localhost")
        if self.sock.selected_alpn_protocol() != "h2":
            raise SystemExit(f"ALPN did not select h2: {self.sock.selected_alpn_protocol()!r}")
        self.sock.setblocking(False)
        self.timeout = timeout
        self.encoder = Encoder()
        self.decoder = Decoder()
        self.frames = []
        self.closed = threading.Event()
        self.send_error = None
        self._in = b""
        self._out = b""
        self.send_raw(PREFACE + SettingsFrame(0).serialize())
        # Wait for the server's SETTINGS and send its ACK before any attack frame: an ACK queued by a read in
        # the middle of an unfinished header block would land between HEADERS and CONTINUATION, which is the
        # client's protocol error (the server rightly answers GOAWAY PROTOCOL_ERROR), not the attack.
        deadline = time.time() + timeout
        while not self._saw_server_settings() and not self.closed.is_set() and time.time() < deadline:
            self._pump()
        while self._out and not self.closed.is_set() and time.time() < deadline:
            self._pump()

    def _saw_server_settings(self):
        return any(isinstance(frame, SettingsFrame) and "ACK" not in frame.flags for frame in self.frames)

    def _read_some(self):
        while not self.closed.is_set():
            try:
                chunk = self.sock.recv(65536)
            except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
                return
            except (OSError, ssl.SSLError) as error:
                self.send_error = self.send_error or repr(error)
                self.closed.set()
                return
            if not chunk:
                self.closed.set()
                return
            self._in += chunk
            while len(self._in) >= 9:
                frame, length = Frame.parse_frame_header(memoryview(self._in[:9]))
                if len(self._in) < 9 + length:
                    break
                frame.parse_body(memoryview(self._in[9:9 + length]))
                self._in = self._in[9 + length:]
                self.frames.append(frame)
                if isinstance(frame, SettingsFrame) and "ACK" not in frame.flags:
                    self._out += SettingsFrame(0, flags=["ACK"]).serialize()

    def _write_some(self):
        try:
            written = self.sock.send(self._out[:65536])
            self._out = self._out[written:]
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
            pass
        except (OSError, ssl.SSLError) as error:  # The server closed on us: expected in a flood.
            self.send_error = repr(error)
            self.closed.set()

    def _pump(self, interval=0.02):
        if self.closed.is_set():
            return
        writers = [self.sock] if self._out else []
        readable, writable, _ = select.select([self.sock], writers, [], interval)
        if readable or self.sock.pending():
            self._read_some()
        if writable and self._out and not self.closed.is_set():
            self._write_some()

    def send_raw(self, data):
        """Queues `data` and pumps until it is all written (reading meanwhile). False once the server closed."""
        self._out += data
        deadline = time.time() + self.timeout
        while self._out and not self.closed.is_set() and time.time() < deadline:
            self._pump()
        return not self.closed.is_set()

    def send(self, *frames):
        return self.send_raw(b"".join(frame.serialize() for frame in frames))

    def send_batches(self, make_frame, count, batch=100):
        """Sends `count` frames from `make_frame(i)` in batches; stops once the server closed. Returns how many went."""
        sent = 0
        while sent < count and not self.closed.is_set():
            frames = [make_frame(sent + i) for i in range(min(batch, count - sent))]
            if not self.send(*frames):
                break
            sent += len(frames)
        return sent

    def header_block(self, stream_id, path, method="GET", extra=(), end_stream=True):
        fields = [(":method", method), (":scheme", "https"), (":authority", "localhost"), (":path", path)] + list(extra)
        frame = HeadersFrame(stream_id)
        frame.data = self.encoder.encode(fields)
        frame.flags.add("END_HEADERS")
        if end_stream:
            frame.flags.add("END_STREAM")
        return frame

    def header_frames(self, stream_id, path, extra=(), end_stream=True, max_frame=16384):
        """A request's header block split into HEADERS + CONTINUATION frames of at most `max_frame` bytes."""
        fields = [(":method", "GET"), (":scheme", "https"), (":authority", "localhost"), (":path", path)] + list(extra)
        block = self.encoder.encode(fields)
        chunks = [block[i:i + max_frame] for i in range(0, len(block), max_frame)]
        first = HeadersFrame(stream_id, data=chunks[0])
        if end_stream:
            first.flags.add("END_STREAM")
        frames = [first] + [ContinuationFrame(stream_id, data=chunk) for chunk in chunks[1:]]
        frames[-1].flags.add("END_HEADERS")
        return frames

    def wait_closed(self, timeout=10.0):
        deadline = time.time() + timeout
        while not self.closed.is_set() and time.time() < deadline:
            self._pump()
        return self.closed.is_set()

    def wait_for(self, predicate, timeout=10.0):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if any(predicate(frame) for frame in self.frames):
                return True
            if self.closed.is_set():
                return False
            self._pump()
        return False

    def goaway(self):
        for frame in self.frames:
            if isinstance(frame, GoAwayFrame):
                return frame
        return None

    def count(self, kind, predicate=lambda frame: True):
        return sum(1 for frame in self.frames if isinstance(frame, kind) and predicate(frame))

    def responses(self):
        """Decoded header blocks per stream, in arrival order."""
        result = []
        for frame in self.frames:
            if isinstance(frame, HeadersFrame):
                result.append((frame.stream_id, self.decoder.decode(frame.data)))
        return result

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def arguments():
    if len(sys.argv) != 3:
        print(f"usage: {sys.argv[0]} HOST PORT", file=sys.stderr)
        sys.exit(2)
    return sys.argv[1], int(sys.argv[2])


def report(ok, **details):
    details["ok"] = bool(ok)
    print(json.dumps(details, sort_keys=True))
    sys.exit(0 if ok else 1)


def expect_calm(connection, **details):
    """The flood verdict: a GOAWAY ENHANCE_YOUR_CALM, then the connection closed."""
    closed = connection.wait_closed(10)
    goaway = connection.goaway()
    code = goaway.error_code if goaway is not None else None
    report(closed and code == ENHANCE_YOUR_CALM, goaway_error=code, closed=closed, **details)


__all__ = [
    "Connection", "arguments", "report", "expect_calm", "ENHANCE_YOUR_CALM", "ContinuationFrame", "DataFrame",
    "GoAwayFrame", "HeadersFrame", "PingFrame", "RstStreamFrame", "SettingsFrame", "WindowUpdateFrame",
]
