//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import NIOHTTP1
import Testing
@testable import TokengateHTTP

@Suite("Gateway answers in gRPC's words")
struct GatewayAnswerGRPCTests {
    @Test("which requests are gRPC: HTTP/2 with application/grpc, +format or parameters, any case")
    func recognition() {
        let http2 = HTTPVersion(major: 2, minor: 0)
        #expect(GatewayAnswer.isGRPC(version: http2, contentType: "application/grpc"))
        #expect(GatewayAnswer.isGRPC(version: http2, contentType: "application/grpc+proto"))
        #expect(GatewayAnswer.isGRPC(version: http2, contentType: "Application/GRPC; charset=utf-8"))
        #expect(!GatewayAnswer.isGRPC(version: http2, contentType: "application/grpc-web"))
        #expect(!GatewayAnswer.isGRPC(version: http2, contentType: "application/grpcx"))
        #expect(!GatewayAnswer.isGRPC(version: http2, contentType: "application/json"))
        #expect(!GatewayAnswer.isGRPC(version: http2, contentType: nil))
        #expect(!GatewayAnswer.isGRPC(version: .http1_1, contentType: "application/grpc"))
    }

    @Test("refusals map to UNAUTHENTICATED, PERMISSION_DENIED, RESOURCE_EXHAUSTED and UNAVAILABLE")
    func statuses() {
        #expect(GatewayAnswer.tokenRequired(realm: "r").grpcStatus == 16)
        #expect(GatewayAnswer.invalidToken(realm: "r", reasonCode: "bad", description: "d").grpcStatus == 16)
        #expect(GatewayAnswer.payloadTooLarge().grpcStatus == 8)
        #expect(GatewayAnswer.badGateway("down", reason: "x").grpcStatus == 14)
        #expect(GatewayAnswer.gatewayTimeout().grpcStatus == 14)
        #expect(GatewayAnswer(status: .forbidden, error: "e", description: "d", reasonCode: "r").grpcStatus == 7)
        #expect(GatewayAnswer(status: .tooManyRequests, error: "e", description: "d", reasonCode: "r").grpcStatus == 8)
    }

    @Test("the Trailers-Only head: 200, grpc-status, grpc-message percent-encoded, the challenge kept")
    func head() {
        var answer = GatewayAnswer.invalidToken(realm: "r", reasonCode: "bad", description: "100% expired\u{e9}")
        answer.addedFields = [ResponseField("retry-after", "3")]
        let head = answer.grpcTrailersOnlyHead(version: HTTPVersion(major: 2, minor: 0), hsts: "max-age=1")
        #expect(head.status == .ok)
        #expect(head.headers["content-type"] == ["application/grpc"])
        #expect(head.headers["grpc-status"] == ["16"])
        #expect(head.headers["grpc-message"] == ["100%25 expired%C3%A9"])
        #expect(head.headers["www-authenticate"].first?.hasPrefix("Bearer") == true)
        #expect(head.headers["retry-after"] == ["3"])
        #expect(head.headers["content-length"].isEmpty)
    }
}
