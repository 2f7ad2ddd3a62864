//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore

/// Storage that the finished streams of a connection leave for its next streams: response body queues and the
/// arrays of submitted header blocks.
///
/// Every stream used to allocate a body queue when it opened and a header block (two arrays) for its response,
/// and free them when it closed; on a busy connection the next stream wants the same again at once. At most
/// ``limit`` of each are kept, header blocks only when small, and all of them are let go when the connection
/// has had no stream open for `idle_page_release_delay` (with the frame buffer's pages, ``release()``), so an
/// idle connection holds none: idle memory stays what it was.
///
/// Order around the owners: a body queue is given back emptied by its stream, which still refers to it until
/// the stream's state goes a moment later, so it is taken (and written to) only by a later stream, when this
/// is its only reference; a header block is given back after nghttp2 has copied it (`nghttp2_submit_response`
/// copies the fields), by the only holder of it, and is taken by moving it out of the list, so that writing
/// over it copies nothing.
package struct HTTP2StreamSpares {
    package static let limit = 8
    /// Larger blocks (a backend's unusually big head) are freed, not kept.
    package static let maxKeptHeaderBlockBytes = 4096

    private var bodies: [CircularBuffer<ByteBuffer>] = []
    private var headerBlocks: [HTTP2HeaderBlock] = []

    package init() {}

    /// An empty body queue: a finished stream's, or a new one.
    package mutating func takeBody() -> CircularBuffer<ByteBuffer> {
        self.bodies.popLast() ?? CircularBuffer(initialCapacity: 4)
    }

    /// `body` must be empty.
    package mutating func giveBack(body: CircularBuffer<ByteBuffer>) {
        guard body.isEmpty, self.bodies.count < Self.limit else { return }
        self.bodies.append(body)
    }

    /// A submitted header block, to write the next one over (``HTTP2HeaderBlock/writeResponse(fromUpstream:close:hsts:)``),
    /// moved out of the list: its only holder is the caller.
    package mutating func takeHeaderBlock() -> HTTP2HeaderBlock? {
        self.headerBlocks.popLast()
    }

    package mutating func giveBack(headerBlock: HTTP2HeaderBlock) {
        guard self.headerBlocks.count < Self.limit, headerBlock.storageCapacity <= Self.maxKeptHeaderBlockBytes else { return }
        self.headerBlocks.append(headerBlock)
    }

    /// Lets every kept piece of storage go (the lists keep their own few bytes).
    package mutating func release() {
        self.bodies.removeAll(keepingCapacity: true)
        self.headerBlocks.removeAll(keepingCapacity: true)
    }

    package var keptBodies: Int { self.bodies.count }
    package var keptHeaderBlocks: Int { self.headerBlocks.count }
}
