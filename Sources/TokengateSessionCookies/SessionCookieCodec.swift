//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// One format's prepared reader and maker, keys derived: what a verifier and a minter share.
enum SessionCookieCodec: Sendable {
    case rails(RailsCookieCodec)
    case timestamped(TimestampSignedCodec)
    case cookieSession(CookieSessionCodec)

    init(format: SessionCookieFormat, secrets: [SessionCookieSecret], fields: SessionCookieFields)
        throws(SessionCookieKeyError)
    {
        guard !secrets.isEmpty else { throw SessionCookieKeyError("invalid_option", "at least one secret is needed") }
        guard secrets.count <= 16 else { throw SessionCookieKeyError("invalid_option", "at most 16 secrets") }
        switch format {
        case .rails(let options):
            guard Self.isCookieName(options.cookieName) else {
                throw SessionCookieKeyError("invalid_option", "the cookie name is not a valid cookie name")
            }
            self = .rails(try RailsCookieCodec(options: options, secrets: secrets, fields: fields))
        case .flask(let options):
            guard options.maxAge > 0 else { throw SessionCookieKeyError("invalid_option", "max_age must be positive") }
            self = .timestamped(try TimestampSignedCodec(flask: options, secrets: secrets, fields: fields))
        case .django(let options):
            guard options.maxAge > 0 else { throw SessionCookieKeyError("invalid_option", "max_age must be positive") }
            self = .timestamped(try TimestampSignedCodec(django: options, secrets: secrets, fields: fields))
        case .cookieSession(let options):
            guard Self.isCookieName(options.cookieName) else {
                throw SessionCookieKeyError("invalid_option", "the cookie name is not a valid cookie name")
            }
            self = .cookieSession(try CookieSessionCodec(options: options, secrets: secrets, fields: fields))
        }
    }

    /// An RFC 6265 cookie-name (an RFC 7230 token), 1…128 bytes.
    static func isCookieName(_ name: String) -> Bool {
        guard (1...128).contains(name.utf8.count) else { return false }
        return name.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"):
                return true
            default:
                return "!#$%&'*+-.^_`|~".utf8.contains(byte)
            }
        }
    }

    func read(_ value: UnsafeRawBufferPointer, signature: UnsafeRawBufferPointer?) -> SessionRead {
        switch self {
        case .rails(let codec): codec.read(value)
        case .timestamped(let codec): codec.read(value)
        case .cookieSession(let codec): codec.read(value, signature: signature)
        }
    }
}
