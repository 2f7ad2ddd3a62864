//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// The syntax a cookie-delivered token (a site's own login cookie, `token_type=cookie`) must have before the
/// library sends it: RFC 6265 §4.1.1 `cookie-value` (cookie-octets, optionally inside one pair of double quotes)
/// and a `cookie-name` that is an RFC 9110 token. A Rails cookie is percent-encoded and a Django one holds `:`,
/// which a bearer token may not, but both are cookie-octets; `;`, `,`, white space, `\` and controls are not, so
/// a value can never smuggle a second cookie or a header line into the request.
enum CookieValueSyntax {
    /// The longest value sent; browsers keep cookies of about 4 KiB, and tokengate's session-cookie limit is 8 KiB.
    static let maximumLength = 8192

    static func isValidValue<S: StringProtocol>(_ candidate: S) -> Bool {
        var bytes = Array(candidate.utf8)
        guard !bytes.isEmpty, bytes.count <= Self.maximumLength else { return false }
        if bytes.first == UInt8(ascii: "\"") {
            guard bytes.count >= 2, bytes.last == UInt8(ascii: "\"") else { return false }
            bytes = Array(bytes.dropFirst().dropLast())
        }
        return bytes.allSatisfy(Self.isCookieOctet)
    }

    static func isValidName<S: StringProtocol>(_ candidate: S) -> Bool {
        let bytes = candidate.utf8
        guard !bytes.isEmpty, bytes.count <= 256 else { return false }
        return bytes.allSatisfy(Self.isTokenByte)
    }

    /// `%x21 / %x23-2B / %x2D-3A / %x3C-5B / %x5D-7E`: US-ASCII without controls, white space, `"`, `,`, `;`, `\`.
    static func isCookieOctet(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x21, 0x23...0x2B, 0x2D...0x3A, 0x3C...0x5B, 0x5D...0x7E: true
        default: false
        }
    }

    /// RFC 9110 `tchar`.
    static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        default:
            Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
        }
    }
}
