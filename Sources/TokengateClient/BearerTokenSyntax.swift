//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// RFC 6750 §2.1 `b64token`: `1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="`, at most 8192
/// bytes (the gateway's own limit). Every capture path checks a candidate against it, so a cookie such as
/// `auth_token=deleted` left by a logout is not mistaken for one when it is not token-shaped, and nothing with spaces, quotes,
/// `;`, `,`, `<` or control characters is ever kept.
enum BearerTokenSyntax {
    static let maximumLength = 8192

    static func isValid<S: StringProtocol>(_ candidate: S) -> Bool {
        let bytes = candidate.utf8
        guard !bytes.isEmpty, bytes.count <= Self.maximumLength else { return false }
        var seenPadding = false
        var sawBody = false
        for byte in bytes {
            if byte == UInt8(ascii: "=") {
                guard sawBody else { return false }
                seenPadding = true
                continue
            }
            guard !seenPadding else { return false }
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"), UInt8(ascii: "+"), UInt8(ascii: "/"):
                sawBody = true
            default:
                return false
            }
        }
        return sawBody
    }
}
