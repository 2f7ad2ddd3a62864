#!/usr/bin/env python3
# This source file is part of tokengate. Licensed under the Apache License v2.0.
"""Rapid reset (CVE-2023-44487): HEADERS then RST_STREAM, over and over. libnghttp2's own limit applies;
expect a GOAWAY (any code) and a close, not an endless stream of requests."""
from h2attack import Connection, RstStreamFrame, arguments, report

host, port = arguments()
connection = Connection(host, port)


def open_and_cancel(i):
    stream_id = 2 * i + 1
    return connection.header_block(stream_id, "/hang").serialize() + RstStreamFrame(stream_id, error_code=8).serialize()


sent = 0
while sent < 20000 and not connection.closed.is_set():
    if not connection.send_raw(b"".join(open_and_cancel(sent + i) for i in range(100))):
        break
    sent += 100
closed = connection.wait_closed(10)
goaway = connection.goaway()
report(closed and goaway is not None, attack="rapid_reset", sent=sent, closed=closed,
       goaway_error=goaway.error_code if goaway is not None else None)
