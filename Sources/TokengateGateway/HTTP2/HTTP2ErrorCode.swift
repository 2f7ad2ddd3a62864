//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// An HTTP/2 error code (RFC 9113 §7), as carried by RST_STREAM and GOAWAY.
///
/// A struct around the wire value rather than an enum: a peer may send any 32-bit code, and unknown codes
/// must pass through (they are treated as INTERNAL_ERROR only when acted upon).
struct HTTP2ErrorCode: Sendable, Hashable, CustomStringConvertible {
    var rawValue: UInt32

    init(_ rawValue: UInt32) {
        self.rawValue = rawValue
    }

    static let noError = HTTP2ErrorCode(0x0)
    static let protocolError = HTTP2ErrorCode(0x1)
    static let internalError = HTTP2ErrorCode(0x2)
    static let flowControlError = HTTP2ErrorCode(0x3)
    static let settingsTimeout = HTTP2ErrorCode(0x4)
    static let streamClosed = HTTP2ErrorCode(0x5)
    static let frameSizeError = HTTP2ErrorCode(0x6)
    static let refusedStream = HTTP2ErrorCode(0x7)
    static let cancel = HTTP2ErrorCode(0x8)
    static let compressionError = HTTP2ErrorCode(0x9)
    static let connectError = HTTP2ErrorCode(0xa)
    static let enhanceYourCalm = HTTP2ErrorCode(0xb)
    static let inadequateSecurity = HTTP2ErrorCode(0xc)
    static let http11Required = HTTP2ErrorCode(0xd)

    var description: String {
        let names = [
            "NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR", "SETTINGS_TIMEOUT",
            "STREAM_CLOSED", "FRAME_SIZE_ERROR", "REFUSED_STREAM", "CANCEL", "COMPRESSION_ERROR", "CONNECT_ERROR",
            "ENHANCE_YOUR_CALM", "INADEQUATE_SECURITY", "HTTP_1_1_REQUIRED",
        ]
        return self.rawValue < names.count ? names[Int(self.rawValue)] : "0x" + String(self.rawValue, radix: 16)
    }
}
