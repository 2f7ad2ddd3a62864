//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import NIOHTTP1
import TokengateHTTP

/// What a request's head says about a WebSocket upgrade (RFC 6455 §4.1, §4.2.1): none, a well-formed one
/// (with the client's `Sec-WebSocket-Key`, which the backend's `101` must answer), or a broken one, refused
/// before any token check costs anything.
enum WebSocketUpgradeRequest: Equatable {
    case none
    case upgrade(key: String)
    case invalid(String)

    /// `Upgrade` naming `websocket` makes the request an upgrade; any other `Upgrade` (h2c, TLS) is not one
    /// (the gateway drops the field, as for every request).
    static func of(_ head: ClientRequestHead) -> Self {
        let upgrade = Self.tokens(head.fields.values(name: "upgrade"))
        guard upgrade.contains("websocket") else { return .none }
        guard head.version == .http1_1 else { return .invalid("a WebSocket upgrade needs HTTP/1.1") }
        guard head.method == .GET else { return .invalid("a WebSocket upgrade is a GET request") }
        guard Self.tokens(head.fields.values(name: "connection")).contains("upgrade") else {
            return .invalid("a WebSocket upgrade lists upgrade in Connection")
        }
        guard head.fields.values(name: "sec-websocket-version").map({ $0.trimmingCharacters(in: .whitespaces) }) == ["13"]
        else {
            return .invalid("Sec-WebSocket-Version must be 13")
        }
        let keys = head.fields.values(name: "sec-websocket-key")
        guard keys.count == 1, let key = Optional(keys[0].trimmingCharacters(in: .whitespaces)), key.utf8.count == 24,
            let decoded = Data(base64Encoded: key), decoded.count == 16
        else {
            return .invalid("Sec-WebSocket-Key must be the base64 form of 16 bytes")
        }
        let length = head.fields.withFirstValue(name: "content-length") { FieldBytes.decimal($0) } ?? nil
        if head.fields.contains(name: "transfer-encoding") || (length ?? 0) > 0 {
            return .invalid("a WebSocket upgrade has no body")
        }
        return .upgrade(key: key)
    }

    /// The comma-separated tokens of a field's lines, lower-cased and trimmed.
    static func tokens(_ values: [String]) -> [String] {
        values.flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
    }
}
