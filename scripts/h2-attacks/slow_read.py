#!/usr/bin/env python3
# This source file is part of tokengate. Licensed under the Apache License v2.0.
"""Slow read: ask for a large response and never open the flow-control window (no WINDOW_UPDATE), so the
server can send 64 KiB and then nothing. A gateway must not let that pin its backend connection: expect the
stream reset within the given seconds (the gateway's limits.idle_timeout, plus slack), not a hang.

Usage: slow_read.py HOST PORT [PATH] [SECONDS]"""
import sys

from h2attack import Connection, RstStreamFrame, report

host, port = sys.argv[1], int(sys.argv[2])
path = sys.argv[3] if len(sys.argv) > 3 else "/big?bytes=20000000"
seconds = float(sys.argv[4]) if len(sys.argv) > 4 else 10.0
connection = Connection(host, port)
connection.send(*connection.header_frames(1, path))
reset = connection.wait_for(lambda frame: isinstance(frame, RstStreamFrame) and frame.stream_id == 1, seconds)
report(reset, attack="slow_read", stream_reset=reset, closed=connection.closed.is_set())
