//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// The JWS algorithms tokengate verifies (RFC 7518 §3, RFC 8037 §3.1).
///
/// An algorithm is always bound to a key: a token's `alg` header only *selects* among the algorithms the
/// chosen key allows, it never makes a key usable with another algorithm.
public enum TokenAlgorithm: String, Sendable, CaseIterable, Hashable {
    case hs256 = "HS256"
    case hs384 = "HS384"
    case hs512 = "HS512"
    case edDSA = "EdDSA"
    case es256 = "ES256"
    case rs256 = "RS256"
    case ps256 = "PS256"
}

extension TokenAlgorithm {
    /// A dense index for per-key tables (`0..<TokenAlgorithm.allCases.count`).
    @inlinable
    var index: Int {
        switch self {
        case .hs256: return 0
        case .hs384: return 1
        case .hs512: return 2
        case .edDSA: return 3
        case .es256: return 4
        case .rs256: return 5
        case .ps256: return 6
        }
    }

    /// One bit per algorithm, for allocation-free set tests on the hot path.
    @inlinable
    var bit: UInt8 { UInt8(1) << UInt8(self.index) }

    public var isHMAC: Bool {
        switch self {
        case .hs256, .hs384, .hs512: return true
        case .edDSA, .es256, .rs256, .ps256: return false
        }
    }

    /// The HMAC digest size in bits (also the minimum key size RFC 7518 §3.2 demands), or nil.
    var hmacBits: Int? {
        switch self {
        case .hs256: return 256
        case .hs384: return 384
        case .hs512: return 512
        case .edDSA, .es256, .rs256, .ps256: return nil
        }
    }

    /// The C shim's scheme constant for asymmetric algorithms.
    var shimScheme: Int32? {
        switch self {
        case .hs256, .hs384, .hs512: return nil
        case .edDSA: return 1
        case .es256: return 2
        case .rs256: return 3
        case .ps256: return 4
        }
    }

    /// Matches the raw bytes of a header's `alg` value without building a String.
    static func match(_ bytes: UnsafeRawBufferPointer) -> TokenAlgorithm? {
        guard bytes.count == 5 else { return nil }
        @inline(__always) func eq(_ literal: StaticString) -> Bool {
            literal.withUTF8Buffer { lit in
                for i in 0..<5 where lit[i] != bytes[i] { return false }
                return true
            }
        }
        if eq("HS256") { return .hs256 }
        if eq("HS384") { return .hs384 }
        if eq("HS512") { return .hs512 }
        if eq("EdDSA") { return .edDSA }
        if eq("ES256") { return .es256 }
        if eq("RS256") { return .rs256 }
        if eq("PS256") { return .ps256 }
        return nil
    }
}
