//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import CTokengateShims
import TokengateHTTP

/// The start-time half of DESIGN §10's library version check. The build refuses headers older than
/// OpenSSL 3.0 and libnghttp2 1.52 (`CTokengateShims_version.h`), but a binary built on one machine may
/// run against older shared libraries on another; this check fails at start with one clear line instead
/// of a missing symbol or a subtly different behaviour later.
public enum LibraryVersionCheck {
    /// Checks the libssl/libcrypto and libnghttp2 the process has actually loaded.
    ///
    /// - Throws: ``GatewayStartupError`` naming the library, the version loaded and the version needed.
    public static func verify() throws(GatewayStartupError) {
        if let problem = Self.problem({ CTokengateShims_check_library_versions($0, $1) }) {
            throw GatewayStartupError(problem)
        }
    }

    /// The message for libraries of the given versions (numbers as `OpenSSL_version_num` and
    /// `nghttp2_info.version_num` report them), or `nil` when both are new enough.
    static func problem(openSSLNumber: UInt, openSSLText: String, nghttp2Number: Int32, nghttp2Text: String) -> String? {
        Self.problem {
            CTokengateShims_library_version_problem(openSSLNumber, openSSLText, nghttp2Number, nghttp2Text, $0, $1)
        }
    }

    private static func problem(_ check: (UnsafeMutablePointer<CChar>, UInt) -> Int32) -> String? {
        var message = [CChar](repeating: 0, count: 512)
        let failed = message.withUnsafeMutableBufferPointer { check($0.baseAddress!, UInt($0.count)) }
        guard failed != 0 else {
            return nil
        }
        return String(decoding: message.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
