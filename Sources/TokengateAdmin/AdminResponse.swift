//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateHTTP
import TokengateStores

/// An answer of the admin API: a status and a JSON body; the gateway adds `Content-Type: application/json`.
public struct AdminResponse: Sendable, Hashable {
    /// The HTTP status code.
    public var status: Int
    /// The JSON body.
    public var json: String
    /// Extra response headers (`Allow` on a 405).
    public var headers: [String: String]

    public init(status: Int, json: String, headers: [String: String] = [:]) {
        self.status = status
        self.json = json
        self.headers = headers
    }

    /// An error answer with the same `{"error", "error_description"}` shape as the gateway's token errors.
    package static func error(
        _ status: Int,
        _ error: String,
        _ description: String,
        extra: (inout JSONWriter) -> Void = { _ in },
        headers: [String: String] = [:]
    ) -> AdminResponse {
        var writer = JSONWriter()
        writer.field("error", error)
        writer.field("error_description", description)
        extra(&writer)
        return AdminResponse(status: status, json: writer.finished(), headers: headers)
    }
}
