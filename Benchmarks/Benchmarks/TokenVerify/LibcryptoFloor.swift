//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import CBenchLibcrypto
import TokengateTokens

/// Owns one CBenchLibcrypto floor object: the bare libcrypto verification of a fixture's signature.
///
/// `@unchecked Sendable`: the object is created at registration and then used by exactly one benchmark, whose
/// iterations package-benchmark runs one after another on one thread at a time; the C object is not safe for
/// concurrent use (it reuses its contexts), and nothing else touches it. Freed in `deinit`.
final class LibcryptoFloor: @unchecked Sendable {
    private let pointer: OpaquePointer

    init(_ fixture: BenchFixture) throws {
        let scheme: Int32
        var a: [UInt8]
        var b: [UInt8] = []
        switch fixture.algorithm {
        case .hs256:
            scheme = Int32(CBenchLibcrypto_HS256)
            a = try fixture.bytes(of: "k")
        case .edDSA:
            scheme = Int32(CBenchLibcrypto_EDDSA)
            a = try fixture.bytes(of: "x")
        case .es256:
            scheme = Int32(CBenchLibcrypto_ES256)
            a = try fixture.bytes(of: "x")
            b = try fixture.bytes(of: "y")
        case .rs256, .ps256:
            scheme = Int32(fixture.algorithm == .rs256 ? CBenchLibcrypto_RS256 : CBenchLibcrypto_PS256)
            a = try fixture.bytes(of: "n")
            b = try fixture.bytes(of: "e")
        case .hs384, .hs512:
            throw BenchSetupError("no libcrypto floor for \(fixture.algorithm.rawValue)")
        }
        let made = a.withUnsafeBytes { a in
            b.withUnsafeBytes { b in
                fixture.signingInput.withUnsafeBytes { data in
                    fixture.signature.withUnsafeBytes { sig in
                        CBenchLibcrypto_floor_new(
                            scheme, a.baseAddress, a.count, b.baseAddress, b.count,
                            data.baseAddress, data.count, sig.baseAddress, sig.count
                        )
                    }
                }
            }
        }
        for i in a.indices { a[i] = 0 }
        guard let made else {
            throw BenchSetupError("\(fixture.algorithm.rawValue): libcrypto could not build or verify the floor")
        }
        self.pointer = made
    }

    deinit {
        CBenchLibcrypto_floor_free(self.pointer)
    }

    /// The least per-call work libcrypto's API allows (contexts prepared once and reused).
    @inline(__always)
    func verifyPrepared() -> Bool {
        CBenchLibcrypto_floor_verify_prepared(self.pointer) == 1
    }

    /// The textbook per-call sequence (context set up and torn down per verification).
    @inline(__always)
    func verifyOneShot() -> Bool {
        CBenchLibcrypto_floor_verify_oneshot(self.pointer) == 1
    }
}
