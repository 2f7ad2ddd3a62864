#!/usr/bin/env python3
# This source file is part of tokengate. Licensed under the Apache License v2.0.
"""MadeYouReset (CVE-2025-8671): open streams and make the server reset each one (DATA beyond the declared
content-length), so they leave the concurrency limit while their work could go on. Expect the server's
RST_STREAMs, then GOAWAY ENHANCE_YOUR_CALM and a close."""
from h2attack import Connection, DataFrame, RstStreamFrame, arguments, expect_calm

host, port = arguments()
connection = Connection(host, port)


def provoke(i):
    stream_id = 2 * i + 1
    headers = connection.header_block(stream_id, "/hang", method="POST", extra=[("content-length", "1")], end_stream=False)
    return headers.serialize() + DataFrame(stream_id, data=b"xx", flags=["END_STREAM"]).serialize()


# Like the real attack, stay under SETTINGS_MAX_CONCURRENT_STREAMS: a batch, then wait for its resets.
sent = 0
while sent < 2000 and not connection.closed.is_set():
    if not connection.send_raw(b"".join(provoke(sent + i) for i in range(20))):
        break
    sent += 20
    target = sent
    connection.wait_for(lambda frame: connection.count(RstStreamFrame) >= target, timeout=2)
connection.wait_closed(10)
resets = connection.count(RstStreamFrame, lambda frame: frame.error_code != 0)
expect_calm(connection, attack="made_you_reset", sent=sent, server_resets=resets)
