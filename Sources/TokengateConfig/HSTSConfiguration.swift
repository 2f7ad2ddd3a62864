//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// The `Strict-Transport-Security` header added to answers on TLS listeners (DESIGN §4).
public struct HSTSConfiguration: Sendable, Equatable {
    /// Default 365 days; zero turns the header off.
    public var maxAge: Duration
    public var includeSubdomains: Bool
    public var preload: Bool

    public init(maxAge: Duration = .seconds(365 * 86_400), includeSubdomains: Bool = false, preload: Bool = false) {
        self.maxAge = maxAge
        self.includeSubdomains = includeSubdomains
        self.preload = preload
    }

    /// The header value, or `nil` when ``maxAge`` is zero.
    public var headerValue: String? {
        let seconds = self.maxAge.components.seconds
        guard seconds > 0 else {
            return nil
        }
        var value = "max-age=\(seconds)"
        if self.includeSubdomains {
            value += "; includeSubDomains"
        }
        if self.preload {
            value += "; preload"
        }
        return value
    }
}
