#!/usr/bin/env python3
# This source file is part of tokengate. Licensed under the Apache License v2.0.
"""CONTINUATION flood (CVE-2024-27316 family): a header block that never ends, one small CONTINUATION after
another. Expect GOAWAY ENHANCE_YOUR_CALM and a close, long before the flood is over."""
from h2attack import Connection, ContinuationFrame, HeadersFrame, arguments, expect_calm

host, port = arguments()
connection = Connection(host, port)
first = HeadersFrame(1)
first.data = connection.encoder.encode([(":method", "GET"), (":scheme", "https"), (":authority", "localhost"), (":path", "/")])
first.flags.add("END_STREAM")  # No END_HEADERS: CONTINUATIONs must follow.
connection.send(first)
block = connection.encoder.encode([("x-filler", "a" * 50)])
sent = connection.send_batches(lambda i: ContinuationFrame(1, data=block), 10000)
expect_calm(connection, attack="continuation_flood", sent=sent)
