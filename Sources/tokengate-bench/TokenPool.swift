//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOCore
import NIOHTTP1
import TokengateTokens

/// One request, built once before the run: the head (with its token) and, for form requests, the body; for
/// an HTTP/2 run also its HTTP/2 header block. Sending it is a reference copy, so the load generator spends
/// its time on I/O, not on building requests.
struct PreparedRequest: Sendable {
    let head: HTTPRequestHead
    let body: ByteBuffer?
    /// Set when the run speaks HTTP/2.
    let http2: BenchHTTP2Request?

    init(head: HTTPRequestHead, body: ByteBuffer?, http2: Bool) {
        self.head = head
        self.body = body
        self.http2 = http2 ? BenchHTTP2Request(head: head, body: body) : nil
    }
}

/// Every request the run can send: for each kind, one request per distinct user, minted at start.
struct TokenPool: Sendable {
    /// Indexed by BenchTokenKind/index; empty for kinds not in the mix.
    let requests: [[PreparedRequest]]
    let mix: TokenMix
    let usersPerKind: Int
    let algorithms: [String]
    /// The names of the fields sent besides the bench's own (values are not reported).
    let extraFieldNames: [String]

    static let maxUsers = 1_000_000

    /// - Parameters:
    ///   - extraFields: sent on every request after `Host` and `User-Agent` (which one of them may replace).
    ///   - http2: also build every request's HTTP/2 header block.
    init(
        signers: BenchSigners,
        mix: TokenMix,
        users: Int,
        target: BenchTarget,
        now: Int64,
        extraFields: [ExtraField] = [],
        http2: Bool = false
    ) throws {
        guard (1...Self.maxUsers).contains(users) else {
            throw BenchError("invalid_users", "--users must be 1 through \(Self.maxUsers)")
        }
        var requests = [[PreparedRequest]](repeating: [], count: BenchTokenKind.allCases.count)
        let allocator = ByteBufferAllocator()
        for kind in mix.kinds {
            var list: [PreparedRequest] = []
            list.reserveCapacity(users)
            for number in 0..<users {
                let token = try Self.token(kind: kind, number: number, signers: signers, now: now)
                list.append(
                    Self.request(
                        kind: kind,
                        token: token,
                        target: target,
                        extraFields: extraFields,
                        allocator: allocator,
                        http2: http2
                    )
                )
            }
            requests[kind.index] = list
        }
        self.requests = requests
        self.extraFieldNames = extraFields.map(\.name)
        self.mix = mix
        self.usersPerKind = users
        self.algorithms = signers.algorithms
    }

    /// The token of user `number` of `kind`.
    static func token(kind: BenchTokenKind, number: Int, signers: BenchSigners, now: Int64) throws -> String {
        let issuedAt = kind == .revoked ? BenchTimeline.revokedIssuedAt(now: now) : now
        let claims = TokenClaims(subject: kind.subject(number), issuedAt: issuedAt, apiOnly: kind != .session)
        let token: String
        do {
            token = try signers.signer(for: number).mint(claims)
        } catch {
            throw BenchError("mint_failed", "cannot mint a bench token: \(error)")
        }
        return kind == .badSignature ? Self.corruptSignature(token) : token
    }

    /// Changes one character in the middle of the signature. The middle, not the end: the last base64url
    /// character may carry padding bits only, and changing those could leave the signature bytes intact.
    static func corruptSignature(_ token: String) -> String {
        var bytes = Array(token.utf8)
        guard let dot = bytes.lastIndex(of: UInt8(ascii: ".")), dot + 2 < bytes.count else { return token }
        let middle = dot + 1 + (bytes.count - dot - 1) / 2
        bytes[middle] = bytes[middle] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func request(
        kind: BenchTokenKind,
        token: String,
        target: BenchTarget,
        extraFields: [ExtraField],
        allocator: ByteBufferAllocator,
        http2: Bool
    ) -> PreparedRequest {
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: target.hostHeader)
        if !extraFields.contains(where: { $0.name.lowercased() == "user-agent" }) {
            headers.add(name: "User-Agent", value: "tokengate-bench")
        }
        for field in extraFields {
            headers.add(name: field.name, value: field.value)
        }
        switch kind {
        case .form:
            // A token is base64url and dots: nothing in it needs percent-encoding.
            let body = "access_token=" + token
            headers.add(name: "Content-Type", value: "application/x-www-form-urlencoded")
            headers.add(name: "Content-Length", value: String(body.utf8.count))
            let head = HTTPRequestHead(version: .http1_1, method: .POST, uri: target.path, headers: headers)
            return PreparedRequest(head: head, body: allocator.buffer(string: body), http2: http2)
        case .api, .session, .revoked, .badSignature:
            headers.add(name: "Authorization", value: "Bearer " + token)
            let head = HTTPRequestHead(version: .http1_1, method: .GET, uri: target.path, headers: headers)
            return PreparedRequest(head: head, body: nil, http2: http2)
        }
    }
}
