//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// Reads and makes Rails' encrypted and signed cookies (see ``RailsCookieOptions`` for the format).
///
/// ### Function
/// Encrypted: URL-unescape; split on `--` into exactly three parts; strict base64 each (the nonce must be 12
/// bytes, the tag 16); AES-256-GCM open with each configured key in turn (the tag is the authenticity check);
/// then the envelope. Signed: the last `--` splits the data from a lowercase hex HMAC of the data's base64 text,
/// compared in constant time; then the data's base64; then the envelope. The envelope must be JSON: Ruby Marshal
/// data (`\x04\x08`) is refused by its first two bytes, before and after the envelope's own base64, and never
/// read further; MessagePack (Rails 7.1's `:message_pack`) and anything else that is not a JSON object is refused
/// as not JSON. The purpose must be `cookie.NAME`, the expiry (when set) still ahead.
///
/// ### Implementation
/// Everything happens in one scratch allocation of 4n + 64 bytes for an n-byte cookie (unescaped text, the
/// ciphertext, the plaintext and the decoded inner message), on the stack when small.
final class RailsCookieCodec: Sendable {
    let options: RailsCookieOptions
    private let purpose: [UInt8]
    private let gcmKeys: [GCMKey]
    private let hmacKeys: [HMACKey]
    /// `/_rails/message`, `/_rails/pur`, `/_rails/exp`, then the fields under `/_rails/data`.
    private let envelopePointers: [SessionJSONPointer]
    private let fieldPointers: [SessionJSONPointer]
    private let hasAPIFlag: Bool

    convenience init(options: RailsCookieOptions, secrets: [SessionCookieSecret], fields: SessionCookieFields)
        throws(SessionCookieKeyError)
    {
        guard (1...10_000_000).contains(options.iterations) else {
            throw SessionCookieKeyError("invalid_option", "iterations must be between 1 and 10000000")
        }
        let digest = options.effectiveKeyDerivationDigest
        var gcmKeys: [GCMKey] = []
        var hmacKeys: [HMACKey] = []
        for secret in secrets {
            switch options.protection {
            case .encrypted:
                // `key_generator.generate_key(authenticated_encrypted_cookie_salt, 32)`.
                guard
                    var derived = digest.pbkdf2(
                        secret: secret.bytes, salt: Array(options.encryptedCookieSalt.utf8),
                        iterations: options.iterations, length: GCMKey.keyLength),
                    let key = GCMKey(derived)
                else { throw SessionCookieKeyError("crypto", "cannot derive the Rails cookie encryption key") }
                SecureWipe.wipe(&derived)
                gcmKeys.append(key)
            case .signed:
                // `key_generator.generate_key(signed_cookie_salt)`: 64 bytes, the generator's default length.
                guard
                    var derived = digest.pbkdf2(
                        secret: secret.bytes, salt: Array(options.signedCookieSalt.utf8),
                        iterations: options.iterations, length: 64),
                    let key = HMACKey(digest: options.signedCookieDigest, secret: derived)
                else { throw SessionCookieKeyError("crypto", "cannot derive the Rails cookie signing key") }
                SecureWipe.wipe(&derived)
                hmacKeys.append(key)
            }
        }
        self.init(options: options, gcmKeys: gcmKeys, hmacKeys: hmacKeys, purpose: nil, fields: fields)
    }

    /// With keys already derived, and optionally another purpose than `cookie.NAME` (Rails' own test vectors
    /// are made with raw keys and purposes such as `test`).
    init(
        options: RailsCookieOptions, gcmKeys: [GCMKey], hmacKeys: [HMACKey], purpose: String?,
        fields: SessionCookieFields
    ) {
        self.options = options
        self.purpose = Array((purpose ?? "cookie.\(options.cookieName)").utf8)
        self.gcmKeys = gcmKeys
        self.hmacKeys = hmacKeys
        let data = SessionJSONPointer("/_rails/data")!
        self.fieldPointers = fields.pointers
        self.envelopePointers =
            [SessionJSONPointer("/_rails/message")!, SessionJSONPointer("/_rails/pur")!,
                SessionJSONPointer("/_rails/exp")!] + fields.pointers.map { $0.under(data) }
        self.hasAPIFlag = fields.apiOnly != nil
    }

    // MARK: Reading

    func read(_ value: UnsafeRawBufferPointer) -> SessionRead {
        let n = value.count
        guard n > 0 else { return .rejected(.truncated) }
        return withUnsafeTemporaryAllocation(byteCount: 4 * n + 64, alignment: 16) { scratch -> SessionRead in
            let base = scratch.baseAddress!
            guard let m = PercentCoding.decode(value, into: base) else { return .rejected(.badEncoding) }
            let text = UnsafeRawBufferPointer(start: base, count: m)
            let work = base + m
            switch self.options.protection {
            case .encrypted: return self.readEncrypted(text, work: work)
            case .signed: return self.readSigned(text, work: work)
            }
        }
    }

    private func readEncrypted(_ text: UnsafeRawBufferPointer, work: UnsafeMutableRawPointer) -> SessionRead {
        guard let first = Self.separator(in: text, from: 0),
            let second = Self.separator(in: text, from: first + 2)
        else { return .rejected(.truncated) }
        guard Self.separator(in: text, from: second + 2) == nil else { return .rejected(.badEncoding) }
        let b64 = SessionBase64.standardPadded
        let dataText = UnsafeRawBufferPointer(rebasing: text[0..<first])
        let nonceText = UnsafeRawBufferPointer(rebasing: text[(first + 2)..<second])
        let tagText = UnsafeRawBufferPointer(rebasing: text[(second + 2)...])
        // A nonce of 12 bytes and a tag of 16 are 16 and 24 characters: anything else is refused before decoding.
        guard nonceText.count == 16, tagText.count == 24, let dataCapacity = b64.decodedCapacity(dataText.count),
            dataCapacity > 0
        else { return .rejected(.badEncoding) }
        let ciphertext = work
        let nonce = work + dataCapacity
        let tag = nonce + 12
        let plaintext = tag + 18
        guard let ciphertextLength = b64.decode(dataText, into: ciphertext),
            b64.decode(nonceText, into: nonce) == 12, b64.decode(tagText, into: tag) == 16
        else { return .rejected(.badEncoding) }
        let sealed = UnsafeRawBufferPointer(start: ciphertext, count: ciphertextLength)
        var opened = false
        for key in self.gcmKeys
        where key.open(
            ciphertext: sealed, nonce: UnsafeRawBufferPointer(start: nonce, count: 12),
            tag: UnsafeRawBufferPointer(start: tag, count: 16), into: plaintext)
        {
            opened = true
            break
        }
        guard opened else { return .rejected(.badSignature) }
        return self.readEnvelope(plaintext, count: ciphertextLength, scratch: plaintext + ciphertextLength)
    }

    private func readSigned(_ text: UnsafeRawBufferPointer, work: UnsafeMutableRawPointer) -> SessionRead {
        // The last separator: base64 has no `-`, so there is exactly one in a genuine cookie.
        var last: Int?
        var from = 0
        while let found = Self.separator(in: text, from: from) {
            last = found
            from = found + 2
        }
        guard let last, last > 0 else { return .rejected(.truncated) }
        let dataText = UnsafeRawBufferPointer(rebasing: text[0..<last])
        let hexText = UnsafeRawBufferPointer(rebasing: text[(last + 2)...])
        let tagLength = self.options.signedCookieDigest.length
        guard hexText.count == 2 * tagLength else { return .rejected(.badEncoding) }
        // Ruby's `hexdigest` is lowercase; the tag is compared as bytes, in constant time, by the HMAC object.
        let tag = work
        for index in 0..<tagLength {
            let high = hexText[2 * index]
            let low = hexText[2 * index + 1]
            guard high < UInt8(ascii: "A") || high > UInt8(ascii: "F"), low < UInt8(ascii: "A") || low > UInt8(ascii: "F"),
                let h = PercentCoding.hex(high), let l = PercentCoding.hex(low)
            else { return .rejected(.badEncoding) }
            tag.storeBytes(of: h << 4 | l, toByteOffset: index, as: UInt8.self)
        }
        let tagBuffer = UnsafeRawBufferPointer(start: tag, count: tagLength)
        guard self.hmacKeys.contains(where: { $0.verify(dataText, tag: tagBuffer) }) else {
            return .rejected(.badSignature)
        }
        let envelope = work + 64
        guard let length = SessionBase64.standardPadded.decode(dataText, into: envelope) else {
            return .rejected(.badEncoding)
        }
        return self.readEnvelope(envelope, count: length, scratch: envelope + length)
    }

    /// The index of the next `--` at or after `from`, or nil.
    private static func separator(in text: UnsafeRawBufferPointer, from: Int) -> Int? {
        var index = from
        while index + 1 < text.count {
            if text[index] == UInt8(ascii: "-"), text[index + 1] == UInt8(ascii: "-") { return index }
            index += 1
        }
        return nil
    }

    /// The authentic plaintext: the metadata envelope, then the session inside it.
    private func readEnvelope(_ bytes: UnsafeMutableRawPointer, count: Int, scratch: UnsafeMutableRawPointer)
        -> SessionRead
    {
        let plain = bytes.assumingMemoryBound(to: UInt8.self)
        if let refusal = Self.serializationRefusal(plain, count: count) { return .rejected(refusal) }
        var envelope = SessionJSONScanner(base: plain, count: count, pointers: self.envelopePointers)
        if let failure = envelope.scan() { return .rejected(Self.rejection(failure)) }
        let message = envelope.hits[0]
        let purpose = envelope.hits[1]
        let expiry = envelope.hits[2]
        let inline = envelope.hits[3]  // the user id under /_rails/data: present only in the 7.1 envelope
        guard message.kind != .absent || inline.kind != .absent || purpose.kind != .absent else {
            return .rejected(.missingMetadata)
        }
        guard purpose.kind == .string, Self.equal(envelope.bytes(purpose), self.purpose) else {
            return .rejected(.wrongPurpose)
        }
        var expiresAt: Int64?
        switch expiry.kind {
        case .absent, .null:
            expiresAt = nil
        case .string:
            guard let parsed = RailsTimestamp.parse(envelope.bytes(expiry)) else { return .rejected(.badMetadata) }
            expiresAt = parsed
        case .number, .true, .false, .object, .array:
            return .rejected(.badMetadata)
        }
        var read: SessionRead
        switch message.kind {
        case .string:
            // The legacy (and cookie jar's) envelope: the session's JSON, base64 inside a JSON string.
            let text = envelope.bytes(message)
            guard let length = SessionBase64.standardPadded.decode(text, into: scratch) else {
                return .rejected(.badMetadata)
            }
            let session = scratch.assumingMemoryBound(to: UInt8.self)
            if let refusal = Self.serializationRefusal(session, count: length) { return .rejected(refusal) }
            var scanner = SessionJSONScanner(base: session, count: length, pointers: self.fieldPointers)
            if let failure = scanner.scan() { return .rejected(Self.rejection(failure)) }
            read = SessionFieldReader.read(scanner, first: 0, hasAPIFlag: self.hasAPIFlag)
        case .absent:
            // Rails 7.1's envelope: the session inline under `data`.
            read = SessionFieldReader.read(envelope, first: 3, hasAPIFlag: self.hasAPIFlag)
        case .number, .true, .false, .null, .object, .array:
            return .rejected(.badMetadata)
        }
        if case .claims(var claims) = read {
            claims.formatExpiresAt = expiresAt
            read = .claims(claims)
        }
        return read
    }

    /// Marshal (`\x04\x08`) and anything else that does not open as a JSON object.
    private static func serializationRefusal(_ bytes: UnsafeMutablePointer<UInt8>, count: Int)
        -> SessionCookieRejection?
    {
        if count >= 2, bytes[0] == 0x04, bytes[1] == 0x08 { return .marshalRefused }
        guard count > 0, bytes[0] == UInt8(ascii: "{") else { return .notJSON }
        return nil
    }

    static func rejection(_ failure: SessionJSONScanner.Failure) -> SessionCookieRejection {
        switch failure {
        case .syntax: .badJSON
        case .tooDeep: .jsonTooDeep
        case .duplicate: .duplicateField
        }
    }

    private static func equal(_ bytes: UnsafeRawBufferPointer, _ expected: [UInt8]) -> Bool {
        bytes.count == expected.count && zip(bytes, expected).allSatisfy { $0 == $1 }
    }

    // MARK: Making

    /// The cookie value (URL-escaped, as Rails' `Set-Cookie` carries it) for a session's JSON, expiring at
    /// `expiresAt` when given. Nil when libcrypto fails.
    func make(sessionJSON: [UInt8], expiresAt: Int64?) -> String? {
        var envelope: [UInt8] = Array(#"{"_rails":{"message":""#.utf8)
        envelope += SessionBase64.standardPadded.encode(sessionJSON)
        envelope += Array(#"","exp":"#.utf8)
        if let expiresAt {
            SessionJSONValue.writeString(RailsTimestamp.format(expiresAt), into: &envelope)
        } else {
            envelope += Array("null".utf8)
        }
        envelope += Array(#","pur":"#.utf8)
        SessionJSONValue.writeString(String(decoding: self.purpose, as: UTF8.self), into: &envelope)
        envelope += Array("}}".utf8)
        return self.seal(envelope: envelope)
    }

    /// The cookie value for envelope bytes as they are (tests make hostile ones with it).
    func seal(envelope: [UInt8]) -> String? {
        let b64 = SessionBase64.standardPadded
        switch self.options.protection {
        case .encrypted:
            guard let key = self.gcmKeys.first, let (ciphertext, nonce, tag) = key.seal(envelope) else { return nil }
            let dashes = Array("--".utf8)
            return PercentCoding.encode(b64.encode(ciphertext) + dashes + b64.encode(nonce) + dashes + b64.encode(tag))
        case .signed:
            guard let key = self.hmacKeys.first else { return nil }
            let data = b64.encode(envelope)
            let hex = Array("0123456789abcdef".utf8)
            let digest = key.tag(data).flatMap { [hex[Int($0 >> 4)], hex[Int($0 & 15)]] }
            return PercentCoding.encode(data + Array("--".utf8) + digest)
        }
    }
}
