//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import CTokengateNghttp2
import CTokengateOpenSSL
import CTokengatePQ
import SQLiteNIO

/// The versions of the libraries this process runs with, for `tokengate version` and a bug report.
///
/// Each is asked of the library itself at run time, not taken from the headers it was built against: a binary
/// built on one machine runs with whatever libssl3, libnghttp2-14 and libpq5 the host it is copied to has
/// installed, and that is the version a security advisory is checked against. SQLite is compiled into the binary
/// (sqlite-nio's copy), so its run-time and build-time versions are the same. Swift has no run-time version to
/// ask for (the release binary links its standard library statically): the compiler's is recorded at build time.
struct LibraryVersions: Sendable, Equatable {
    /// `OpenSSL 3.0.17 1 Jul 2025`, as `openssl version` prints it.
    var openSSL: String
    /// `1.52.0`.
    var nghttp2: String
    /// `3.54.1`.
    var sqlite: String
    /// `15.14`: `PQlibVersion()`'s number as PostgreSQL writes its versions (major.minor since 10).
    var libpq: String
    /// `6.3`: the compiler that built this binary.
    var swift: String

    static func current() -> LibraryVersions {
        let nghttp2Info = nghttp2_version(0)
        return LibraryVersions(
            openSSL: OpenSSL_version(OPENSSL_VERSION).map { String(cString: $0) } ?? "unknown",
            nghttp2: nghttp2Info.flatMap { $0.pointee.version_str }.map { String(cString: $0) } ?? "unknown",
            sqlite: SQLiteConnection.libraryVersionString(),
            libpq: Self.postgresVersion(PQlibVersion()),
            swift: Self.compilerVersion
        )
    }

    /// PostgreSQL's integer versions: `MMmmmm` since 10 (150014 is 15.14), `MMmmpp` before (90624 is 9.6.24).
    static func postgresVersion(_ number: Int32) -> String {
        guard number > 0 else { return "unknown" }
        if number >= 100_000 {
            return "\(number / 10_000).\(number % 10_000)"
        }
        return "\(number / 10_000).\(number / 100 % 100).\(number % 100)"
    }

    /// The compiler's version to the minor release; `#if compiler` is the only way Swift offers to read it.
    static let compilerVersion: String = {
        #if compiler(>=7.0)
            return "7.0 or newer"
        #elseif compiler(>=6.4)
            return "6.4"
        #elseif compiler(>=6.3)
            return "6.3"
        #elseif compiler(>=6.2)
            return "6.2"
        #else
            return "6.1"
        #endif
    }()
}
