//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// A response field the gateway adds of its own to a response, whoever wrote the rest of it (the CORS fields
/// of a route's policy). The name is lower-case and the value one the gateway built: neither came from a
/// request, so neither is checked again where it is written.
package struct ResponseField: Sendable, Hashable {
    package let name: String
    package let value: String

    /// Whether a backend's field of this name gives way to an added one: `Vary` is a list the backend's own
    /// values stay in (the added line joins them); any other name is the gateway's alone, so a backend's
    /// `Access-Control-Allow-Origin` cannot contradict the route's policy. Stored: every response with added
    /// fields asks it of each of them, once per backend field that might clash.
    package let replacesBackendField: Bool

    package init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
        self.replacesBackendField = name != "vary"
    }
}
