//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Testing

@testable import TokengateGateway

/// DESIGN §10's start-time check of the loaded OpenSSL and libnghttp2.
@Suite struct LibraryVersionCheckTests {
    @Test func theLibrariesOfThisMachinePass() throws {
        try LibraryVersionCheck.verify()
    }

    @Test func anOldLibraryIsNamedWithTheVersionFoundAndTheOneNeeded() {
        let oldSSL = LibraryVersionCheck.problem(
            openSSLNumber: 0x1010117f,
            openSSLText: "OpenSSL 1.1.1w  11 Sep 2023",
            nghttp2Number: 0x013a00,
            nghttp2Text: "1.58.0"
        )
        #expect(
            oldSSL == "the loaded OpenSSL library is OpenSSL 1.1.1w  11 Sep 2023; tokengate needs OpenSSL 3.0 or newer "
                + "at run time (Debian 12: apt-get install libssl3)"
        )
        let oldNghttp2 = LibraryVersionCheck.problem(
            openSSLNumber: 0x30000130,
            openSSLText: "OpenSSL 3.0.19 27 Jan 2026",
            nghttp2Number: 0x012b00,
            nghttp2Text: "1.43.0"
        )
        #expect(
            oldNghttp2 == "the loaded libnghttp2 is version 1.43.0; tokengate needs libnghttp2 1.52 or newer at run time "
                + "(Debian 12: apt-get install libnghttp2-14)"
        )
        let current = LibraryVersionCheck.problem(
            openSSLNumber: 0x30000130,
            openSSLText: "OpenSSL 3.0.19 27 Jan 2026",
            nghttp2Number: 0x013400,
            nghttp2Text: "1.52.0"
        )
        #expect(current == nil)
    }
}
