//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import TokengateConfig

/// `upstreams.*.secret_header`: the field the gateway adds to every request to the upstream and to its health
/// checks, so that a backend can refuse whatever did not come through the gateway (a request straight to the
/// backend could otherwise carry any `X-Tokengate-User`). A client's field of the same name is removed first.
///
/// The value is read from its file when a runtime is built (start, every reload, `check-config`) and kept as
/// bytes. Nothing prints it: ``description`` is redacted, and the errors about the file name the file and what
/// is wrong with its content, never the content.
struct UpstreamSecretHeader: Sendable, CustomStringConvertible {
    /// Lower-cased, as HTTP/1.1 writes every field the gateway adds.
    let name: String
    /// ``name``'s bytes, for the compare with each client field and the write.
    let nameBytes: [UInt8]
    let value: [UInt8]

    /// A shorter value is guessable enough to matter for a field that stands for "this came from the gateway".
    static let minimumLength = 16
    static let maximumLength = 4096

    var description: String { "\(self.name): <redacted>" }

    /// Reads the value from `configuration.valueFile`: its bytes without trailing line breaks, which must be 16 to
    /// 4096 printable ASCII characters (no spaces: a value must survive every proxy and server unchanged).
    init(reading configuration: SecretHeaderConfiguration, upstream: String) throws {
        let key = "upstreams.\(upstream).secret_header.value_file"
        let file = configuration.valueFile
        guard let data = FileManager.default.contents(atPath: file.path) else {
            throw GatewayStartupError("\(key): cannot read \(file)")
        }
        var bytes = Array(data)
        while bytes.last == UInt8(ascii: "\n") || bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
        guard !bytes.isEmpty else {
            throw GatewayStartupError("\(key): \(file) is empty: put a secret of at least \(Self.minimumLength) characters in it (e.g. openssl rand -hex 32)")
        }
        guard bytes.count >= Self.minimumLength else {
            throw GatewayStartupError("\(key): the secret in \(file) is shorter than \(Self.minimumLength) characters (e.g. openssl rand -hex 32)")
        }
        guard bytes.count <= Self.maximumLength else {
            throw GatewayStartupError("\(key): the secret in \(file) is longer than \(Self.maximumLength) bytes")
        }
        guard bytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw GatewayStartupError(
                "\(key): the secret in \(file) holds a space, a control character or a non-ASCII byte: a header value "
                    + "must be printable ASCII (e.g. openssl rand -hex 32)")
        }
        self.name = configuration.name.lowercased()
        self.nameBytes = Array(self.name.utf8)
        self.value = bytes
    }
}
