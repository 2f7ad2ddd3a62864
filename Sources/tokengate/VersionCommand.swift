//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import ArgumentParser
import TokengateVersion

/// `tokengate version`: the version and the libraries it runs with, the lines to paste into a bug report
/// (`tokengate --version` prints the version alone, for scripts).
struct VersionCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "version",
        abstract: "Print the version and the versions of the libraries in use (OpenSSL, nghttp2, SQLite, libpq, Swift)."
    )

    func run() {
        print(Self.report(LibraryVersions.current()))
    }

    static func report(_ libraries: LibraryVersions) -> String {
        """
        tokengate \(TokengateVersion.string)
        openssl: \(libraries.openSSL)
        nghttp2: \(libraries.nghttp2)
        sqlite: \(libraries.sqlite)
        libpq: \(libraries.libpq)
        swift: \(libraries.swift)
        """
    }
}
