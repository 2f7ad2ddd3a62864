//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengatePercentEncoding

/// The request target's path as routes see it, which must be the path the backend acts on.
///
/// Routes match the path as a string, and a public catch-all route (`path_prefix: /`) forwards anything the
/// protected prefixes do not match. So any spelling that a backend reads as a protected path but the route
/// table does not is a way past the token check. This check closes the spellings that backends differ on:
///
/// - Percent-encoded characters that a path may carry as they are (``PercentEncoding/isPathCharacter(_:)``:
///   unreserved, `! $ & ' ( ) * + , = : @`) are *decoded*: `/%61pi/` is `/api/` and `/users/%40me` is
///   `/users/@me` to every WSGI server, Go's `URL.Path`, Spring and most frameworks, and clients do send them
///   (Java's `URLEncoder` turns `~` into `%7E`, JavaScript's `encodeURIComponent` turns `@` into `%40`). A
///   route prefix holds only such characters (the configuration refuses others), so once they are decoded no
///   spelling of a protected path can miss its route. The decoded target is the one routed, logged and
///   forwarded, so the gateway and the backend see the same path. (Decoding unreserved escapes alone let
///   `/v1/users/%40me/` past a route for `/v1/users/@me/`.)
/// - Refused with `400`: a byte outside visible ASCII, a fragment (`#`, never part of an origin-form target, RFC 9112 §3.2.1), path
///   parameters (`;` — Tomcat and Spring drop `;…` from each segment, so `/open/..;/api/x` or `/api;x/y`
///   would reach `/api/` through the public route), a malformed escape (`%zz`), an encoded `/` or `\`, a
///   backslash, an empty segment (`//`) and dot segments (`.`, `..`), checked after decoding so `%2e%2e`
///   counts as `..`.
///
/// - Segments ending in dots or encoded spaces (`/api./x`, `/api%20/x`), which Windows and IIS trim, are refused
///   by the exchange when trimming them would change the route (``withSegmentTailsTrimmed(_:)``).
///
/// Only the path is judged; the query is left as sent (the token extractor looks at it separately). Pure
/// and allocation-free unless a target has to be decoded.
package enum RequestTargetCheck {
    package enum Verdict: Equatable {
        case accepted
        /// The target with its percent-encoded path characters decoded.
        case normalized(String)
        /// Why the target is refused, completing "the request target …".
        case refused(String)
    }

    package static func check(_ target: String) -> Verdict {
        var target = target
        return target.withUTF8 { Self.check($0) }
    }

    package static func check(_ target: UnsafeBufferPointer<UInt8>) -> Verdict {
        for byte in target {
            // Visible ASCII only (RFC 9112 §3.2): the HTTP/1.1 parser holds the target to it already; an HTTP/2
            // `:path` reaches here with whatever nghttp2 let through, and must meet the same rule.
            if byte <= 0x20 || byte >= 0x7F { return .refused("must be visible ASCII (escape other bytes)") }
            if byte == UInt8(ascii: "#") { return .refused("must not contain a fragment ('#')") }
        }
        let pathEnd = target.firstIndex(of: UInt8(ascii: "?")) ?? target.count
        var decodes = false
        var index = 0
        while index < pathEnd {
            switch target[index] {
            case UInt8(ascii: "\\"):
                return .refused("must not contain a backslash")
            case UInt8(ascii: ";"):
                return .refused("must not contain path parameters (';')")
            case UInt8(ascii: "%"):
                guard index + 2 < pathEnd, let value = PercentEncoding.escapedByte(target[index + 1], target[index + 2]) else {
                    return .refused("has a malformed percent-escape")
                }
                if value == UInt8(ascii: "/") || value == UInt8(ascii: "\\") {
                    return .refused("must not contain an encoded '/' or '\\'")
                }
                decodes = decodes || PercentEncoding.isPathCharacter(value)
                index += 3
                continue
            default:
                break
            }
            index += 1
        }
        guard decodes else {
            return Self.hasCleanSegments(UnsafeBufferPointer(rebasing: target[..<pathEnd])) ? .accepted : Self.unclean
        }
        var decoded: [UInt8] = []
        decoded.reserveCapacity(target.count)
        index = 0
        while index < pathEnd {
            if target[index] == UInt8(ascii: "%"), let value = PercentEncoding.escapedByte(target[index + 1], target[index + 2]),
                PercentEncoding.isPathCharacter(value)
            {
                decoded.append(value)
                index += 3
            } else {
                decoded.append(target[index])
                index += 1
            }
        }
        let clean = decoded.withUnsafeBufferPointer { Self.hasCleanSegments($0) }
        guard clean else { return Self.unclean }
        decoded.append(contentsOf: target[pathEnd...])
        return .normalized(String(decoding: decoded, as: UTF8.self))
    }

    /// `target` with the dots and encoded spaces and tabs (`%20`, `%09`) that end any of its path's segments
    /// removed, or `nil` when no segment ends with one (nearly every target: one pass, no allocation).
    ///
    /// Some backends trim them: Windows and IIS read `/api./x` and `/api%20/x` as `/api/x`. To the route
    /// table they are other paths, so on such a backend they would reach a protected path through the public
    /// route. The exchange routes both spellings and refuses the request when they land on different routes
    /// (``ProxyExchange``); where they land on the same one (`/wiki/U.S.`) nothing changes.
    package static func withSegmentTailsTrimmed(_ target: String) -> String? {
        var target = target
        return target.withUTF8 { bytes in
            let pathEnd = bytes.firstIndex(of: UInt8(ascii: "?")) ?? bytes.count
            var trimmed: [UInt8]?
            var segmentStart = 0
            for end in 0...pathEnd where end == pathEnd || bytes[end] == UInt8(ascii: "/") {
                let kept = Self.endWithoutTail(bytes, segment: segmentStart..<end)
                if kept < end, trimmed == nil {
                    trimmed = Array(bytes[..<segmentStart])
                }
                if trimmed != nil {
                    trimmed!.append(contentsOf: bytes[segmentStart..<kept])
                    if end < pathEnd { trimmed!.append(UInt8(ascii: "/")) }
                }
                segmentStart = end + 1
            }
            guard var trimmed else { return nil }
            trimmed.append(contentsOf: bytes[pathEnd...])
            return String(decoding: trimmed, as: UTF8.self)
        }
    }

    /// Where `segment` ends without the dots, `%20`s and `%09`s at its end.
    private static func endWithoutTail(_ bytes: UnsafeBufferPointer<UInt8>, segment: Range<Int>) -> Int {
        var end = segment.upperBound
        while end > segment.lowerBound {
            if bytes[end - 1] == UInt8(ascii: ".") {
                end -= 1
            } else if end - segment.lowerBound >= 3, bytes[end - 3] == UInt8(ascii: "%"),
                (bytes[end - 2] == UInt8(ascii: "2") && bytes[end - 1] == UInt8(ascii: "0"))
                    || (bytes[end - 2] == UInt8(ascii: "0") && bytes[end - 1] == UInt8(ascii: "9"))
            {
                end -= 3
            } else {
                break
            }
        }
        return end
    }

    private static let unclean = Verdict.refused("must not contain dot segments ('.', '..') or empty segments ('//')")

    /// No `.` or `..` segment and no empty segment but a trailing one. `path` starts with `/` (checked before).
    private static func hasCleanSegments(_ path: UnsafeBufferPointer<UInt8>) -> Bool {
        var segmentStart = 1
        while segmentStart <= path.count {
            let end = path[segmentStart...].firstIndex(of: UInt8(ascii: "/")) ?? path.count
            let length = end - segmentStart
            if length == 0, end < path.count { return false }  // `//`
            if length == 1 || length == 2, path[segmentStart..<end].allSatisfy({ $0 == UInt8(ascii: ".") }) {
                return false
            }
            segmentStart = end + 1
        }
        return true
    }
}
