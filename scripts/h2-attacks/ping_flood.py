#!/usr/bin/env python3
# This source file is part of tokengate. Licensed under the Apache License v2.0.
"""PING flood: thousands of PINGs, acknowledgements read. Expect GOAWAY ENHANCE_YOUR_CALM and a close."""
from h2attack import Connection, PingFrame, arguments, expect_calm

host, port = arguments()
connection = Connection(host, port)
sent = connection.send_batches(lambda i: PingFrame(0, opaque_data=i.to_bytes(8, "big")), 5000)
expect_calm(connection, attack="ping_flood", sent=sent)
