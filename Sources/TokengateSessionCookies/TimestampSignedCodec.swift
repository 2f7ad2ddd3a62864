//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// Reads and makes the two timestamped-signature formats, which differ only in their separator, their
/// timestamp's encoding and their key: Flask's itsdangerous `payload.timestamp.signature` (``FlaskSessionOptions``)
/// and Django's `payload:timestamp:signature` (``DjangoSessionOptions``).
///
/// ### Function
/// Split at the last separator (the signature) and the one before it (the timestamp; Flask's compressed payload
/// itself starts with `.`, so splitting from the right is the only correct way); decode the signature and check
/// it, in constant time, with each key in turn, over the bytes before it exactly as received; only then decode the
/// timestamp and the payload (``CompressiblePayload``).
final class TimestampSignedCodec: Sendable {
    enum Flavor: Sendable {
        /// Big-endian bytes in URL-safe base64, `.`-separated.
        case itsdangerous
        /// Base 62, `:`-separated.
        case django
    }

    let flavor: Flavor
    private let separator: UInt8
    private let keys: [HMACKey]
    private let maxAge: Int64
    private let pointers: [SessionJSONPointer]
    private let hasAPIFlag: Bool

    init(flask options: FlaskSessionOptions, secrets: [SessionCookieSecret], fields: SessionCookieFields)
        throws(SessionCookieKeyError)
    {
        self.flavor = .itsdangerous
        self.separator = UInt8(ascii: ".")
        self.maxAge = options.maxAge
        self.pointers = fields.pointers
        self.hasAPIFlag = fields.apiOnly != nil
        let salt = Array(options.salt.utf8)
        var keys: [HMACKey] = []
        // Flask signs with the newest key and accepts the fallbacks: the first secret here signs.
        for secret in secrets {
            let derived: [UInt8]?
            switch options.keyDerivation {
            case .hmac: derived = HMACKey(digest: options.digest, secret: secret.bytes)?.tag(salt)
            case .djangoConcat: derived = options.digest.hash(salt + Array("signer".utf8) + secret.bytes)
            case .concat: derived = options.digest.hash(salt + secret.bytes)
            case .none: derived = secret.bytes
            }
            guard var derived, let key = HMACKey(digest: options.digest, secret: derived) else {
                throw SessionCookieKeyError("crypto", "cannot derive the Flask session signing key")
            }
            SecureWipe.wipe(&derived)
            keys.append(key)
        }
        self.keys = keys
    }

    init(django options: DjangoSessionOptions, secrets: [SessionCookieSecret], fields: SessionCookieFields)
        throws(SessionCookieKeyError)
    {
        self.flavor = .django
        self.separator = UInt8(ascii: ":")
        self.maxAge = options.maxAge
        self.pointers = fields.pointers
        self.hasAPIFlag = fields.apiOnly != nil
        var keys: [HMACKey] = []
        // `salted_hmac(salt + "signer", value, SECRET_KEY)`: the key is digest(salt ‖ "signer" ‖ SECRET_KEY).
        for secret in secrets {
            guard var derived = options.digest.hash(Array(options.salt.utf8) + Array("signer".utf8) + secret.bytes),
                let key = HMACKey(digest: options.digest, secret: derived)
            else { throw SessionCookieKeyError("crypto", "cannot derive the Django session signing key") }
            SecureWipe.wipe(&derived)
            keys.append(key)
        }
        self.keys = keys
    }

    // MARK: Reading

    func read(_ value: UnsafeRawBufferPointer) -> SessionRead {
        guard let last = Self.lastIndex(of: self.separator, in: value, before: value.count), last > 0,
            let previous = Self.lastIndex(of: self.separator, in: value, before: last), previous > 0
        else { return .rejected(.truncated) }
        let signed = UnsafeRawBufferPointer(rebasing: value[0..<last])
        let signatureText = UnsafeRawBufferPointer(rebasing: value[(last + 1)...])
        let timestampText = UnsafeRawBufferPointer(rebasing: value[(previous + 1)..<last])
        let payloadText = UnsafeRawBufferPointer(rebasing: value[0..<previous])
        let tagLength = self.keys[0].tagLength
        // The signature's length is fixed by the digest: anything else is refused before decoding.
        guard SessionBase64.urlSafeUnpadded.decodedCapacity(signatureText.count) == tagLength else {
            return .rejected(.badEncoding)
        }
        return withUnsafeTemporaryAllocation(byteCount: value.count + 64, alignment: 16) { scratch -> SessionRead in
            let base = scratch.baseAddress!
            guard SessionBase64.urlSafeUnpadded.decode(signatureText, into: base) == tagLength else {
                return .rejected(.badEncoding)
            }
            let tag = UnsafeRawBufferPointer(start: base, count: tagLength)
            guard self.keys.contains(where: { $0.verify(signed, tag: tag) }) else { return .rejected(.badSignature) }
            guard let signedAt = self.timestamp(timestampText, scratch: base + 64) else {
                return .rejected(.badEncoding)
            }
            var read = CompressiblePayload.read(
                payloadText, scratch: base + 64, pointers: self.pointers, hasAPIFlag: self.hasAPIFlag)
            if case .claims(var claims) = read {
                claims.signedAt = signedAt
                claims.formatExpiresAt = signedAt + self.maxAge
                read = .claims(claims)
            }
            return read
        }
    }

    /// The signing time: itsdangerous' big-endian bytes (1 to 8) or Django's base 62 (1 to 11 digits), at most
    /// year 9999.
    private func timestamp(_ text: UnsafeRawBufferPointer, scratch: UnsafeMutableRawPointer) -> Int64? {
        var value: Int64 = 0
        switch self.flavor {
        case .itsdangerous:
            guard text.count <= 11, let length = SessionBase64.urlSafeUnpadded.decode(text, into: scratch),
                (1...8).contains(length)
            else { return nil }
            for index in 0..<length {
                let byte = scratch.load(fromByteOffset: index, as: UInt8.self)
                guard value <= SessionFieldReader.latestTime else { return nil }
                value = value << 8 | Int64(byte)
            }
        case .django:
            guard (1...11).contains(text.count) else { return nil }
            for byte in text {
                let digit: Int64
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = Int64(byte - UInt8(ascii: "0"))
                case UInt8(ascii: "A")...UInt8(ascii: "Z"): digit = Int64(byte - UInt8(ascii: "A")) + 10
                case UInt8(ascii: "a")...UInt8(ascii: "z"): digit = Int64(byte - UInt8(ascii: "a")) + 36
                default: return nil
                }
                guard value <= SessionFieldReader.latestTime else { return nil }
                value = value * 62 + digit
            }
        }
        return value <= SessionFieldReader.latestTime ? value : nil
    }

    private static func lastIndex(of byte: UInt8, in bytes: UnsafeRawBufferPointer, before end: Int) -> Int? {
        var index = end - 1
        while index >= 0 {
            if bytes[index] == byte { return index }
            index -= 1
        }
        return nil
    }

    // MARK: Making

    /// The cookie value for a session's JSON, signed at `now`.
    func make(sessionJSON: [UInt8], now: Int64) -> String {
        self.sign(payloadText: CompressiblePayload.make(sessionJSON), now: now)
    }

    /// The cookie value for payload text as it is (tests make hostile ones with it).
    func sign(payloadText: [UInt8], now: Int64) -> String {
        var value = payloadText
        value.append(self.separator)
        switch self.flavor {
        case .itsdangerous:
            var bytes: [UInt8] = []
            var rest = UInt64(max(0, now))
            repeat {
                bytes.insert(UInt8(rest & 0xFF), at: 0)
                rest >>= 8
            } while rest > 0
            value += SessionBase64.urlSafeUnpadded.encode(bytes)
        case .django:
            let digits = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz".utf8)
            var encoded: [UInt8] = []
            var rest = max(0, now)
            repeat {
                encoded.insert(digits[Int(rest % 62)], at: 0)
                rest /= 62
            } while rest > 0
            value += encoded
        }
        let tag = self.keys[0].tag(value)
        value.append(self.separator)
        value += SessionBase64.urlSafeUnpadded.encode(tag)
        return String(decoding: value, as: UTF8.self)
    }
}
