#!/usr/bin/env python3
# This source file is part of tokengate. Licensed under the Apache License v2.0.
"""A request whose decoded header list is far over the cap. Expect a 431 on that stream, and the connection
still serving the next request."""
from h2attack import Connection, HeadersFrame, arguments, report

host, port = arguments()
connection = Connection(host, port)
# 40 fields of 2 KiB: 80 KiB decoded, far past the cap, yet few enough frames for nghttp2's CONTINUATION limit.
fields = [(f"x-big-{i}", "b" * 2048) for i in range(40)]
connection.send(*connection.header_frames(1, "/big-headers", extra=fields))
got_431 = connection.wait_for(lambda frame: isinstance(frame, HeadersFrame) and frame.stream_id == 1)
connection.send(connection.header_block(3, "/after"))
got_next = connection.wait_for(lambda frame: isinstance(frame, HeadersFrame) and frame.stream_id == 3)
statuses = {stream: dict(fields).get(":status") for stream, fields in connection.responses()}
connection.close()
report(got_431 and got_next and statuses.get(1) == "431" and statuses.get(3) == "200",
       attack="oversized_headers", statuses={str(k): v for k, v in statuses.items()})
