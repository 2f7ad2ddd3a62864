#!/usr/bin/env python3
# This source file is part of tokengate. Licensed under the Apache License v2.0.
"""Held window: ask for a response and never give the server more flow-control window than the first 64 KiB,
then wait. The response's rest waits in the gateway for the client; what the gateway does with it is the
test's to check: with the response-buffer budget the backend connection goes back to its pool meanwhile, and
with a minimum send rate the stream is reset (RST_STREAM CANCEL) soon after `limits.response_send_timeout`.

Usage: held_window.py HOST PORT PATH SECONDS [expect-reset|expect-open]
Prints one JSON line: whether the stream was reset (and the code), how many DATA bytes arrived; exits 0 when
that is what the last argument expects."""
import sys
import time

from h2attack import Connection, DataFrame, RstStreamFrame, report

host, port, path, seconds = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4])
expect = sys.argv[5] if len(sys.argv) > 5 else "expect-reset"
connection = Connection(host, port)
started = time.time()
connection.send(*connection.header_frames(1, path))
reset = connection.wait_for(lambda frame: isinstance(frame, RstStreamFrame) and frame.stream_id == 1, seconds)
code = next((frame.error_code for frame in connection.frames if isinstance(frame, RstStreamFrame)), None)
received = sum(len(frame.data) for frame in connection.frames if isinstance(frame, DataFrame) and frame.stream_id == 1)
ok = reset if expect == "expect-reset" else (not reset and not connection.closed.is_set())
report(ok, attack="held_window", stream_reset=reset, code=code, data_bytes=received,
       seconds=round(time.time() - started, 1))
