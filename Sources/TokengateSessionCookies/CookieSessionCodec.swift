//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// Reads and makes Express `cookie-session` cookies (``CookieSessionOptions``): the value cookie is base64 of the
/// session's JSON; the signature cookie is keygrip's HMAC of `NAME=VALUE`, which is checked first, in constant
/// time, against each key in turn.
final class CookieSessionCodec: Sendable {
    let options: CookieSessionOptions
    private let signedPrefix: [UInt8]
    private let keys: [HMACKey]
    private let pointers: [SessionJSONPointer]
    private let hasAPIFlag: Bool

    init(options: CookieSessionOptions, secrets: [SessionCookieSecret], fields: SessionCookieFields)
        throws(SessionCookieKeyError)
    {
        self.options = options
        self.signedPrefix = Array((options.cookieName + "=").utf8)
        self.pointers = fields.pointers
        self.hasAPIFlag = fields.apiOnly != nil
        var keys: [HMACKey] = []
        // keygrip signs with keys[0] and accepts any of them: the first secret here signs.
        for secret in secrets {
            guard let key = HMACKey(digest: options.digest, secret: secret.bytes) else {
                throw SessionCookieKeyError("crypto", "cannot prepare the cookie-session signing key")
            }
            keys.append(key)
        }
        self.keys = keys
    }

    func read(_ value: UnsafeRawBufferPointer, signature: UnsafeRawBufferPointer?) -> SessionRead {
        guard let signature else { return .rejected(.missingSignatureCookie) }
        guard !value.isEmpty else { return .rejected(.truncated) }
        let tagLength = self.options.digest.length
        guard signature.count <= 128, SessionBase64.urlSafeUnpadded.decodedCapacity(signature.count) == tagLength else {
            return .rejected(.badEncoding)
        }
        let prefix = self.signedPrefix.count
        return withUnsafeTemporaryAllocation(byteCount: 2 * value.count + prefix + 64, alignment: 16) {
            scratch -> SessionRead in
            let base = scratch.baseAddress!
            guard SessionBase64.urlSafeUnpadded.decode(signature, into: base) == tagLength else {
                return .rejected(.badEncoding)
            }
            let tag = UnsafeRawBufferPointer(start: base, count: tagLength)
            // `NAME=VALUE`, the bytes keygrip signs.
            let signed = base + 64
            self.signedPrefix.withUnsafeBytes { signed.copyMemory(from: $0.baseAddress!, byteCount: prefix) }
            (signed + prefix).copyMemory(from: value.baseAddress!, byteCount: value.count)
            let signedBytes = UnsafeRawBufferPointer(start: signed, count: prefix + value.count)
            guard self.keys.contains(where: { $0.verify(signedBytes, tag: tag) }) else {
                return .rejected(.badSignature)
            }
            let json = signed + prefix + value.count
            guard let length = SessionBase64.standardPadded.decode(value, into: json) else {
                return .rejected(.badEncoding)
            }
            let bytes = json.assumingMemoryBound(to: UInt8.self)
            guard length > 0, bytes[0] == UInt8(ascii: "{") else { return .rejected(.notJSON) }
            var scanner = SessionJSONScanner(base: bytes, count: length, pointers: self.pointers)
            if let failure = scanner.scan() { return .rejected(RailsCookieCodec.rejection(failure)) }
            return SessionFieldReader.read(scanner, first: 0, hasAPIFlag: self.hasAPIFlag)
        }
    }

    /// The value cookie and its signature cookie for a session's JSON.
    func make(sessionJSON: [UInt8]) -> (value: String, signature: String) {
        self.sign(valueText: SessionBase64.standardPadded.encode(sessionJSON))
    }

    /// The signature cookie for value text as it is (tests make hostile ones with it).
    func sign(valueText value: [UInt8]) -> (value: String, signature: String) {
        let tag = self.keys[0].tag(self.signedPrefix + value)
        return (
            String(decoding: value, as: UTF8.self),
            String(decoding: SessionBase64.urlSafeUnpadded.encode(tag), as: UTF8.self)
        )
    }
}
