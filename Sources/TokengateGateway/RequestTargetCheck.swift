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
/// Only the path is judged; the query is left as sent (the token extractor looks at it separately). Pure
/// and allocation-free unless a target has to be decoded.
enum RequestTargetCheck {
    enum Verdict: Equatable {
        case accepted
        /// The target with its percent-encoded path characters decoded.
        case normalized(String)
        /// Why the target is refused, completing "the request target …".
        case refused(String)
    }

    static func check(_ target: String) -> Verdict {
        var target = target
        return target.withUTF8 { Self.check($0) }
    }

    static func check(_ target: UnsafeBufferPointer<UInt8>) -> Verdict {
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
