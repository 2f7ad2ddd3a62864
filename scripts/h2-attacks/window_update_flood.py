#!/usr/bin/env python3
# This source file is part of tokengate. Licensed under the Apache License v2.0.
"""WINDOW_UPDATE flood on the connection (increments of 1). Expect GOAWAY ENHANCE_YOUR_CALM and a close."""
from h2attack import Connection, WindowUpdateFrame, arguments, expect_calm

host, port = arguments()
connection = Connection(host, port)
sent = connection.send_batches(lambda i: WindowUpdateFrame(0, window_increment=1), 20000, batch=500)
expect_calm(connection, attack="window_update_flood", sent=sent)
