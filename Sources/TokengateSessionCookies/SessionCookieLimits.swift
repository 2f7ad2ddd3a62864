//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// The fixed bounds every cookie is read within, whatever it holds.
public enum SessionCookieLimits {
    /// Longer cookie values are refused unread. Browsers keep at most 4096 bytes per cookie (RFC 6265 §6.1
    /// asks for at least that), and percent-encoding may grow Rails' value a little past it.
    public static let maxCookieLength = 8192
    /// A compressed session may inflate to this many bytes and no more: the room Flask and Django could ever
    /// fill in a 4 KiB cookie with ordinary session data, and a bound on what a bomb costs.
    public static let maxInflatedLength = 64 * 1024
}
