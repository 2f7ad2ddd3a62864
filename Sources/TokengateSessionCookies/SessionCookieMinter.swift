//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import CTokengateShims

/// Makes a login cookie in the site's own format, so that the site's own code reads what tokengate hands out
/// (the token page, for apps): the configured fields set to the user id, the login time and (for an api token)
/// the api-only flag, over whatever else the session must hold for the framework's login check.
///
/// Minting is not on the hot path: it builds JSON with arrays, draws a nonce for Rails, and may compress.
public struct SessionCookieMinter: Sendable {
    public let format: SessionCookieFormat
    public let fields: SessionCookieFields
    let codec: SessionCookieCodec

    /// Derives the keys; `secrets[0]` signs.
    public init(format: SessionCookieFormat, secrets: [SessionCookieSecret], fields: SessionCookieFields)
        throws(SessionCookieKeyError)
    {
        self.format = format
        self.fields = fields
        self.codec = try SessionCookieCodec(format: format, secrets: secrets, fields: fields)
    }

    /// A minted cookie: the value for the format's cookie and, for cookie-session, the value of `NAME.sig`.
    public struct Cookie: Sendable, Hashable {
        public var value: String
        public var signature: String?
    }

    /// Why minting failed (never for want of a secret: those are checked in `init`).
    public struct MintingError: Error, Hashable, Sendable, CustomStringConvertible {
        public let description: String
    }

    /// The session `base` (an object; default empty) with the user id, the login time and, when `apiOnly`, the
    /// api-only flag set at their pointers, in the format, signed (or sealed) at `now`. `expiresAt` sets Rails'
    /// metadata expiry (Flask and Django count theirs from the signing time; cookie-session has none).
    /// `extras` are further members the framework's login check reads (Django's session auth hash and backend,
    /// Devise's salt), set after the fields.
    public func mint(
        userID: String, loginTime: Int64, apiOnly: Bool = false, base: SessionJSONValue = .object([]), now: Int64,
        expiresAt: Int64? = nil, extras: [(SessionJSONPointer, SessionJSONValue)] = []
    ) throws(MintingError) -> Cookie {
        guard case .object = base else { throw MintingError(description: "the base session must be a JSON object") }
        let user: SessionJSONValue
        switch self.fields.userIDType {
        case .string:
            user = .string(userID)
        case .integer:
            guard let number = Int64(userID) else {
                throw MintingError(description: "the user id is not an integer, as the configuration says ids are")
            }
            user = .integer(number)
        }
        var session = base
        var placements: [(SessionJSONPointer, SessionJSONValue)] = [
            (self.fields.userID, user), (self.fields.loginTime, .integer(loginTime)),
        ]
        if let apiPointer = self.fields.apiOnly { placements.append((apiPointer, .bool(apiOnly))) }
        placements += extras
        for (pointer, value) in placements {
            guard let placed = session.setting(value, at: pointer.steps[...]) else {
                throw MintingError(description: "\(pointer) cannot be set in the base session")
            }
            session = placed
        }
        switch self.codec {
        case .rails(let codec):
            // Rails' cookie store reads a session only when it holds a `session_id` (Rack's `exists?`): without
            // one, `session` is empty to the site's code. A fresh random one, as `generate_sid` makes.
            if case .object(let members) = session, !members.contains(where: { $0.0 == "session_id" }) {
                guard let sessionID = Self.randomHex(byteCount: 16) else {
                    throw MintingError(description: "libcrypto could not draw a session id")
                }
                session = .object([("session_id", .string(sessionID))] + members)
            }
            let json = session.json
            guard let value = codec.make(sessionJSON: json, expiresAt: expiresAt) else {
                throw MintingError(description: "libcrypto could not seal the cookie")
            }
            return Cookie(value: value, signature: nil)
        case .timestamped(let codec):
            return Cookie(value: codec.make(sessionJSON: session.json, now: now), signature: nil)
        case .cookieSession(let codec):
            let (value, signature) = codec.make(sessionJSON: session.json)
            return Cookie(value: value, signature: signature)
        }
    }

    /// `byteCount` bytes from libcrypto's CSPRNG in lowercase hex; nil when it fails.
    static func randomHex(byteCount: Int) -> String? {
        var bytes = [UInt8](repeating: 0, count: byteCount)
        guard bytes.withUnsafeMutableBytes({ CTokengateShims_random($0.baseAddress, $0.count) }) == 1 else { return nil }
        let digits = Array("0123456789abcdef".utf8)
        return String(decoding: bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] }, as: UTF8.self)
    }
}
