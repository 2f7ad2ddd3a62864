//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Testing

/// `HEAD` gets the head a `GET` would get and no content, on both protocols, whether the gateway answers
/// itself or the backend does.
extension GatewayIntegrationTests {
    @Test func headRequestsGetAHeadAndNoContent() async throws {
        try await self.withGateway { gateway in
            let cases: [(path: String, status: Int)] = [
                ("/api/items", 401),  // the gateway's own answer, which has a JSON body for GET
                ("/api/items?access_token=x", 400),
                ("/news", 200),  // the backend's
            ]
            for version in ["--http1.1", "--http2"] {
                for (path, status) in cases {
                    // Twice on one connection: the second answer is read right only if the first had no content.
                    let url = gateway.baseURL + path
                    let result = try self.curl(gateway, [version, "-I", url, "-o", "/dev/null", url])
                    #expect(result.exitCode == 0, "\(version) \(path): \(result.stderr)")
                    #expect(result.status == status * 1000 + status, "\(version) \(path): two answers (`-w` once each)")
                    let lengths = result.headers.filter { $0.0.lowercased() == "content-length" }.compactMap { Int($0.1) }
                    #expect(lengths.count == 2 && lengths.allSatisfy { $0 > 0 }, "\(version) \(path): the GET's length, \(lengths)")
                }
            }
        }
    }
}
