//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateTestSupport

/// `expect: 100-continue` over HTTP/2: the gateway answers `100 Continue` itself once it wants the body, as it
/// does over HTTP/1.1, and never for a request it refuses. Clients that send the expectation (.NET's and Java's
/// HTTP clients when asked to) otherwise wait for a 100 that never comes before they send the body.
extension GatewayIntegrationTests {
    @Test func http2AnswersExpectContinueWhenItWantsTheBody() async throws {
        try await self.withGateway { gateway in
            let file = gateway.directory + "/body.bin"
            try String(repeating: "c", count: 4096).write(toFile: file, atomically: true, encoding: .utf8)
            let token = try gateway.mint("alice")
            func nghttp(_ path: String, _ extra: [String] = []) throws -> String {
                let result = try ChildProcess.run(
                    "/usr/bin/nghttp", ["-v", "--expect-continue", "-d", file] + extra + ["\(gateway.baseURL)\(path)"]
                )
                return result.stdout + result.stderr
            }
            let forwarded = try nghttp("/upload", ["-H", "authorization: Bearer \(token)"])
            #expect(forwarded.contains(":status: 100"), "\(forwarded)")
            #expect(forwarded.contains(":status: 200"), "\(forwarded)")
            #expect(forwarded.contains("\"body_bytes\":4096"), "the body arrived whole after the 100")
            // Read for a form token: the gateway wants the body too.
            let form = try nghttp("/api/items", ["-H", "content-type: application/x-www-form-urlencoded"])
            #expect(form.contains(":status: 100"), "\(form)")
            // Without the expectation, bodies of every size are forwarded whole, the exchange beginning with the
            // head when `content-length` is there (an empty body's END_STREAM comes on a DATA frame of its own).
            for size in [0, 1, 70_000] {
                let sized = gateway.directory + "/body-\(size).bin"
                try String(repeating: "s", count: size).write(toFile: sized, atomically: true, encoding: .utf8)
                let result = try ChildProcess.run(
                    "/usr/bin/nghttp", ["-d", sized, "-H", "authorization: Bearer \(token)", "\(gateway.baseURL)/upload"]
                )
                #expect(result.stdout.contains("\"body_bytes\":\(size)"), "\(size): \(result.stdout) \(result.stderr)")
            }
            // Refused on its head (a token route without a token): no 100, the answer.
            let refused = try nghttp("/account/me")
            #expect(!refused.contains(":status: 100"), "\(refused)")
            #expect(refused.contains(":status: 401"), "\(refused)")
        }
    }
}
