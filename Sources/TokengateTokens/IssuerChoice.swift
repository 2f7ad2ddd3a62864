//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// Picks a token's issuer on a gateway with several JWT issuers: its `iss`, compared byte for byte with each
/// issuer's, or the default issuer for a token without one.
///
/// The payload is read here before any signature is checked, only to choose whose keys and policy check it;
/// nothing it says is believed until that issuer's ``TokenVerifier`` has verified the whole token (which checks
/// `iss` again). A token claiming issuer B is therefore checked with B's keys alone: a token signed with A's
/// HMAC secret but naming B fails B's signature check, whatever its header says.
///
/// A gateway with one issuer never builds one: its routes verify as they always have.
public struct IssuerChoice: Sendable {
    /// Each issuer's `iss`, as UTF-8, in the order of the gateway's issuer list.
    private let issuers: [[UInt8]]
    /// The index of the issuer of tokens without `iss`, if any.
    public let defaultIndex: Int?

    public enum Choice: Equatable, Sendable {
        case issuer(Int)
        /// The token is not a JWS compact token whose payload is a JSON object with at most one string `iss`.
        case malformed
        /// No `iss`, and no default issuer.
        case missingIssuer
        /// An `iss` that no issuer has.
        case unknownIssuer
    }

    /// - Parameters:
    ///   - issuers: each issuer's `iss`; `nil` for an issuer that has none (the top-level issuer without
    ///     `tokens.issuer`), which then only takes tokens without `iss` when it is the default.
    ///   - defaultIndex: the issuer of tokens without `iss`.
    public init(issuers: [String?], defaultIndex: Int?) {
        // An issuer without an `iss` gets bytes no decoded JSON string holds (0xFF is never UTF-8).
        self.issuers = issuers.map { $0.map { Array($0.utf8) } ?? [0xFF] }
        self.defaultIndex = defaultIndex
    }

    public func choose(_ token: UnsafeRawBufferPointer) -> Choice {
        guard token.count <= TokenVerifier.maxTokenLength, let base = token.baseAddress else { return .malformed }
        guard let firstDot = token.firstIndex(of: UInt8(ascii: ".")) else { return .malformed }
        let rest = UnsafeRawBufferPointer(rebasing: token[(firstDot + 1)...])
        guard let secondDot = rest.firstIndex(of: UInt8(ascii: ".")) else { return .malformed }
        let payloadText = UnsafeRawBufferPointer(start: base + firstDot + 1, count: secondDot)
        guard let capacity = Base64URL.decodedLength(payloadText.count) else { return .malformed }
        return withUnsafeTemporaryAllocation(byteCount: max(capacity, 1), alignment: 8) { scratch in
            guard let length = Base64URL.decode(payloadText, into: scratch.baseAddress!) else { return .malformed }
            var scanner = JSONScanner(base: scratch.baseAddress!.assumingMemoryBound(to: UInt8.self), count: length)
            guard scanner.consume(UInt8(ascii: "{")) else { return .malformed }
            var found: ByteSpan?
            var first = true
            var members = 0
            while true {
                switch scanner.nextMember(first: &first) {
                case .error:
                    return .malformed
                case .end:
                    guard scanner.atEnd() else { return .malformed }
                    guard let found else {
                        return self.defaultIndex.map { .issuer($0) } ?? .missingIssuer
                    }
                    for (index, issuer) in self.issuers.enumerated()
                    where issuer.withUnsafeBufferPointer({ scanner.equals(found, $0) }) {
                        return .issuer(index)
                    }
                    return .unknownIssuer
                case .member(let name):
                    members += 1
                    guard members <= JOSEHeader.maxMembers else { return .malformed }
                    if "iss".utf8.withContiguousStorageIfAvailable({ scanner.equals(name, $0) }) == true {
                        // Two `iss` members could pick one issuer here and mean another to a backend.
                        guard found == nil, let value = scanner.parseString() else { return .malformed }
                        found = value
                    } else if !scanner.skipValue(depth: 1) {
                        return .malformed
                    }
                }
            }
        }
    }
}

extension RejectionReason {
    /// The token names an issuer (`iss`) the gateway has none of.
    public static let unknownIssuer = RejectionReason(
        code: "unknown_issuer",
        description: "The token issuer is not known here."
    )

    /// The token has no `iss`, and no issuer takes such tokens (`default: true`).
    public static let missingIssuer = RejectionReason(
        code: "missing_issuer",
        description: "The token does not name its issuer."
    )

    /// The token's issuer is known, but this route does not accept its tokens (the route's `issuers`).
    public static let issuerNotAccepted = RejectionReason(
        code: "issuer_not_accepted",
        description: "Tokens of this issuer are not accepted here."
    )
}
