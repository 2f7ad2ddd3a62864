//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// The site's own secret (`secret_key_base`, Flask's `SECRET_KEY`, Django's `SECRET_KEY`, cookie-session's key),
/// read from a file or an environment variable at load, then only used to derive keys.
///
/// Its description never shows a byte of it, and neither does any error made while loading it: a secret that
/// reaches a log is a secret to rotate, and with it every session of the site.
public struct SessionCookieSecret: Sendable, CustomStringConvertible {
    /// Secrets shorter than this are refused: every framework's generator makes far longer ones (Rails 128 hex
    /// digits, Django 50 characters), and a short one can be guessed offline from a single cookie.
    public static let minimumLength = 16
    /// Larger files are not a secret someone meant to point at.
    public static let maximumLength = 4096

    let bytes: [UInt8]

    /// The bytes as they are. Throws when they are shorter than ``minimumLength`` or longer than ``maximumLength``.
    public init(bytes: [UInt8]) throws(SessionCookieKeyError) {
        guard bytes.count >= Self.minimumLength else {
            throw SessionCookieKeyError("too_short", "the secret is shorter than \(Self.minimumLength) bytes")
        }
        guard bytes.count <= Self.maximumLength else {
            throw SessionCookieKeyError("too_long", "the secret is longer than \(Self.maximumLength) bytes")
        }
        self.bytes = bytes
    }

    /// Without the length checks: the frameworks' published test vectors use short secrets such as "secret".
    init(unchecked bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// The file's contents, less one trailing newline (`\n` or `\r\n`), which editors and `echo` add.
    public static func file(_ path: String) throws(SessionCookieKeyError) -> SessionCookieSecret {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw SessionCookieKeyError("unreadable", "cannot open the secret file \(path)")
        }
        defer { close(descriptor) }
        var bytes = [UInt8](repeating: 0, count: Self.maximumLength + 3)
        var count = 0
        while count < bytes.count {
            let result = bytes.withUnsafeMutableBytes { read(descriptor, $0.baseAddress! + count, $0.count - count) }
            if result < 0 {
                if errno == EINTR { continue }
                throw SessionCookieKeyError("unreadable", "cannot read the secret file \(path)")
            }
            if result == 0 { break }
            count += result
        }
        bytes.removeSubrange(count...)
        return try SessionCookieSecret(bytes: Self.trimmingNewline(bytes))
    }

    /// The variable's value, less one trailing newline.
    public static func environment(_ name: String) throws(SessionCookieKeyError) -> SessionCookieSecret {
        guard let value = getenv(name) else {
            throw SessionCookieKeyError("not_set", "the environment variable \(name) is not set")
        }
        let length = strlen(value)
        guard length <= Self.maximumLength + 2 else {
            throw SessionCookieKeyError("too_long", "the secret is longer than \(Self.maximumLength) bytes")
        }
        let bytes = Array(UnsafeBufferPointer(start: UnsafeRawPointer(value).assumingMemoryBound(to: UInt8.self), count: length))
        return try SessionCookieSecret(bytes: Self.trimmingNewline(bytes))
    }

    private static func trimmingNewline(_ bytes: [UInt8]) -> [UInt8] {
        var bytes = bytes
        if bytes.last == UInt8(ascii: "\n") {
            bytes.removeLast()
            if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
        }
        return bytes
    }

    public var description: String { "SessionCookieSecret(\(self.bytes.count) bytes, not shown)" }
}
