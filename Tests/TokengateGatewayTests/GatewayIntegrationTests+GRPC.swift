//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing
import TokengateDemo
import TokengateTestSupport

/// gRPC requests refused by the gateway, as a real gRPC client (grpcio, scripts/grpc/call.py) sees them over
/// HTTP/2 with TLS: Trailers-Only answers whose `grpc-status` the client surfaces as the refusal it is.
extension GatewayIntegrationTests {
    private static let grpcRoutes = """
          - { path_prefix: /tokengate.test.Echo/Admin, upstream: api, accept: [api], require_scopes: [admin] }
          - { path_prefix: /tokengate.test.Echo/Down, upstream: dead, accept: [api] }
          - { path_prefix: /tokengate.test.Echo/, upstream: api, accept: [api] }
          - { path_prefix: /, upstream: api, accept: none }
        """

    @Test func grpcRefusalsCarryGRPCStatuses() async throws {
        let closedPort = try Self.unusedPort()
        try await self.withGateway(
            routes: Self.grpcRoutes,
            upstreams: """
                  api: { targets: [ "http://127.0.0.1:{UPSTREAM}" ], connect_timeout: 1s, response_timeout: 2s }
                  dead: { targets: [ "http://127.0.0.1:\(closedPort)" ], connect_timeout: 1s, retries: 0 }
                """,
            limits: "limits: { max_body_bytes: 16KiB }"
        ) { gateway in
            let token = try gateway.mint("grpc-user")
            let cases: [(method: String, token: String?, expected: String)] = [
                ("Unary", nil, "STATUS UNAUTHENTICATED this resource requires a token"),
                ("Unary", token + "x", "STATUS UNAUTHENTICATED"),
                ("Admin", token, "STATUS PERMISSION_DENIED"),
                ("Down", token, "STATUS UNAVAILABLE the backend could not be reached"),
                ("AdminLarge", token, "STATUS PERMISSION_DENIED"),
                ("UnaryLarge", token, "STATUS RESOURCE_EXHAUSTED"),
            ]
            for (method, token, expected) in cases {
                let result = try ChildProcess.run(
                    "/usr/bin/env",
                    ["python3", Self.grpcScript("call.py"), "localhost:\(gateway.tlsPort)", gateway.certificatePath, method] + (token.map { [$0] } ?? []))
                #expect(result.status == 0, "\(result.stderr)")
                #expect(result.stdout.hasPrefix(expected), "\(method): \(result.stdout)")
                #expect(token == nil || !result.stdout.contains(token!), "the token never comes back")
            }
            #expect(gateway.backend.requestsReceived == 0, "a refused call reached the backend")
        }
    }

    static func grpcScript(_ name: String) -> String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("scripts/grpc/\(name)").path
    }
}
