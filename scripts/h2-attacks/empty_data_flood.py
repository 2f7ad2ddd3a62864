#!/usr/bin/env python3
# This source file is part of tokengate. Licensed under the Apache License v2.0.
"""Empty DATA flood on an open request stream. Expect GOAWAY ENHANCE_YOUR_CALM and a close."""
from h2attack import Connection, DataFrame, arguments, expect_calm

host, port = arguments()
connection = Connection(host, port)
connection.send(connection.header_block(1, "/hang", method="POST", end_stream=False))
sent = connection.send_batches(lambda i: DataFrame(1, data=b""), 5000)
expect_calm(connection, attack="empty_data_flood", sent=sent)
