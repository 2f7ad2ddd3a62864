//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation

/// Token-shaped strings for the tests (unsigned: the client never verifies, the gateway does).
enum TestTokens {
    static func jwt(subject: String = "alice", exp: Int64? = nil) -> String {
        let header = Self.base64URL(Data("{\"alg\":\"HS256\",\"typ\":\"JWT\"}".utf8))
        var payload = "{\"sub\":\"\(subject)\",\"iat\":1700000000,\"api_only\":true"
        if let exp { payload += ",\"exp\":\(exp)" }
        payload += "}"
        return header + "." + Self.base64URL(Data(payload.utf8)) + "." + Self.base64URL(Data(repeating: 7, count: 32))
    }

    static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static let now = Date(timeIntervalSince1970: 1_700_000_100)
}
