//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// An HTTP/2 error code (RFC 9113 §7), as carried by RST_STREAM and GOAWAY.
///
/// A struct around the wire value rather than an enum: a peer may send any 32-bit code, and unknown codes
/// must pass through (they are treated as INTERNAL_ERROR only when acted upon).
package struct HTTP2ErrorCode: Sendable, Hashable, CustomStringConvertible {
    package var rawValue: UInt32

    package init(_ rawValue: UInt32) {
        self.rawValue = rawValue
    }

    package static let noError = HTTP2ErrorCode(0x0)
    package static let protocolError = HTTP2ErrorCode(0x1)
    package static let internalError = HTTP2ErrorCode(0x2)
    package static let flowControlError = HTTP2ErrorCode(0x3)
    package static let settingsTimeout = HTTP2ErrorCode(0x4)
    package static let streamClosed = HTTP2ErrorCode(0x5)
    package static let frameSizeError = HTTP2ErrorCode(0x6)
    package static let refusedStream = HTTP2ErrorCode(0x7)
    package static let cancel = HTTP2ErrorCode(0x8)
    package static let compressionError = HTTP2ErrorCode(0x9)
    package static let connectError = HTTP2ErrorCode(0xa)
    package static let enhanceYourCalm = HTTP2ErrorCode(0xb)
    package static let inadequateSecurity = HTTP2ErrorCode(0xc)
    package static let http11Required = HTTP2ErrorCode(0xd)

    package var description: String {
        let names = [
            "NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR", "SETTINGS_TIMEOUT",
            "STREAM_CLOSED", "FRAME_SIZE_ERROR", "REFUSED_STREAM", "CANCEL", "COMPRESSION_ERROR", "CONNECT_ERROR",
            "ENHANCE_YOUR_CALM", "INADEQUATE_SECURITY", "HTTP_1_1_REQUIRED",
        ]
        return self.rawValue < names.count ? names[Int(self.rawValue)] : "0x" + String(self.rawValue, radix: 16)
    }
}
