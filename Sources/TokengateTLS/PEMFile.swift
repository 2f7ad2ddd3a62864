//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import CTokengateOpenSSL

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads certificate and key files with a size limit and explains failures by file name.
///
/// The bytes are read by us (not `SSL_CTX_use_certificate_chain_file`) so that each failure can say which file
/// is wrong and how: unreadable, not PEM, not parseable, or a key that does not match.
enum PEMFile {
    /// Certificate chains and keys are a few KiB; anything this large is a mistake or an attack on startup.
    static let maximumSize = 1 << 20

    /// Reads the whole file. Throws ``TLSError/Code/fileUnreadable`` naming the path and the OS reason.
    static func readAll(path: String) throws(TLSError) -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else {
            throw TLSError(code: .fileUnreadable, message: "cannot open \(path): \(Self.errnoText())")
        }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16_384)
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count < 0 {
                if errno == EINTR {
                    continue
                }
                throw TLSError(code: .fileUnreadable, message: "cannot read \(path): \(Self.errnoText())")
            }
            if count == 0 {
                break
            }
            bytes.append(contentsOf: chunk[0..<count])
            guard bytes.count <= Self.maximumSize else {
                throw TLSError(code: .fileUnreadable, message: "\(path) is larger than \(Self.maximumSize) bytes")
            }
        }
        return bytes
    }

    /// Whether the bytes contain a PEM armour line at all (DER and other formats do not).
    static func looksLikePEM(_ bytes: [UInt8]) -> Bool {
        let marker = Array("-----BEGIN ".utf8)
        guard bytes.count >= marker.count else {
            return false
        }
        for start in 0...(bytes.count - marker.count) where bytes[start] == marker[0] {
            if bytes[start..<(start + marker.count)].elementsEqual(marker) {
                return true
            }
        }
        return false
    }

    /// Overwrites secret bytes (a private key file's contents) before the array is released.
    static func wipe(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { OPENSSL_cleanse($0.baseAddress, $0.count) }
    }

    private static func errnoText() -> String {
        String(cString: strerror(errno))
    }
}
