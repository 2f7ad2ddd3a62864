#!/usr/bin/env python3
# This source file is part of tokengate. Licensed under the Apache License v2.0.
"""Request header lists over the cap. A list a little over it (within twice the cap) gets a 431; one far past
it (more than twice the cap, what an HPACK bomb decodes to) has its stream reset with INTERNAL_ERROR, nghttp2
decoding no more of it. Either way the connection still serves the next request."""
from h2attack import Connection, HeadersFrame, RstStreamFrame, arguments, report

host, port = arguments()
connection = Connection(host, port)
# 14 fields of 2 KiB: ~29 KiB decoded, over the ~25 KiB cap but within twice it: 431.
near = [(f"x-big-{i}", "b" * 2048) for i in range(14)]
connection.send(*connection.header_frames(1, "/big-headers", extra=near))
got_431 = connection.wait_for(lambda frame: isinstance(frame, HeadersFrame) and frame.stream_id == 1)
# 40 fields of 2 KiB: 80 KiB decoded, far past twice the cap, yet few enough frames for nghttp2's CONTINUATION
# limit: reset.
far = [(f"x-big-{i}", "b" * 2048) for i in range(40)]
connection.send(*connection.header_frames(3, "/bigger-headers", extra=far))
got_reset = connection.wait_for(lambda frame: isinstance(frame, RstStreamFrame) and frame.stream_id == 3)
reset_code = next((frame.error_code for frame in connection.frames if isinstance(frame, RstStreamFrame) and frame.stream_id == 3), None)
connection.send(connection.header_block(5, "/after"))
got_next = connection.wait_for(lambda frame: isinstance(frame, HeadersFrame) and frame.stream_id == 5)
statuses = {stream: dict(fields).get(":status") for stream, fields in connection.responses()}
connection.close()
report(got_431 and got_reset and reset_code == 2 and got_next and statuses.get(1) == "431" and "3" not in {str(k) for k in statuses}
       and statuses.get(5) == "200",
       attack="oversized_headers", statuses={str(k): v for k, v in statuses.items()}, reset_code=reset_code)
