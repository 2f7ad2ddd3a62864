//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import CTokengateOpenSSL

/// The oldest protocol version a server context accepts (`listen[].tls.min_version`). TLS 1.3 is the newest
/// either way, and nothing older than TLS 1.2 can be asked for: the floor only ever rises above the policy's.
public enum TLSMinimumVersion: Sendable, Hashable {
    case tls12
    case tls13

    /// OpenSSL's constant for `SSL_CTX_set_min_proto_version`.
    var protocolVersion: Int32 {
        switch self {
        case .tls12: TLS1_2_VERSION
        case .tls13: TLS1_3_VERSION
        }
    }
}
