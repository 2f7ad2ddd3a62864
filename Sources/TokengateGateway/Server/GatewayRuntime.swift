//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Logging
import TokengateConfig
import TokengateTokens
import TokengateHTTP

/// Everything the request path reads, built once from a configuration and never mutated: routes (each with
/// its verifier, over one shared key set), upstream settings, limits. A reload builds a new one and swaps it in.
final class GatewayRuntime: Sendable {
    let routes: [GatewayRoute]
    let routeTable: RouteTable
    let upstreams: [UpstreamSettings]
    let cutoffs: CutoffSnapshotHolder
    let realm: String
    let limits: LimitsConfiguration
    /// `limits.token_body_memory`, shared by every generation's exchanges (``GatewayServer`` owns it).
    let tokenBodyMemory: TokenBodyMemory
    /// `limits.response_buffer_total` for the whole process (``SlowClientWatch`` takes its grants from it).
    let responseBuffers: ResponseBufferBudget
    let accessLog: Bool
    let metrics: GatewayMetrics
    /// `Strict-Transport-Security` for answers to TLS clients (`hsts:`), `nil` when `max_age` is `0s`.
    let hsts: String?
    /// The current UNIX time in seconds; injectable for tests.
    let now: @Sendable () -> Int64
    /// The same clock in milliseconds: the token page's confirmation counts its minimum delay by it.
    let nowMilliseconds: @Sendable () -> Int64
    /// The keys read from files when this runtime was built: a generation rebuilt because a fetched key set
    /// changed reuses them, so that only a reload rereads key files.
    let fileKeys: LoadedFileKeys
    /// The client address's trusted proxies, IP rules, CORS and rate limits.
    let traffic: TrafficPolicy

    init(
        routes: [GatewayRoute],
        routeTable: RouteTable,
        upstreams: [UpstreamSettings],
        cutoffs: CutoffSnapshotHolder,
        realm: String,
        limits: LimitsConfiguration,
        accessLog: Bool,
        metrics: GatewayMetrics,
        hsts: String? = HSTSConfiguration().headerValue,
        tokenBodyMemory: TokenBodyMemory? = nil,
        responseBuffers: ResponseBufferBudget? = nil,
        now: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) },
        nowMilliseconds: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970 * 1000) },
        fileKeys: LoadedFileKeys = LoadedFileKeys(keys: nil),
        traffic: TrafficPolicy = TrafficPolicy()
    ) {
        self.traffic = traffic
        self.routes = routes
        self.routeTable = routeTable
        self.upstreams = upstreams
        self.cutoffs = cutoffs
        self.realm = realm
        self.limits = limits
        self.tokenBodyMemory = tokenBodyMemory ?? TokenBodyMemory(limit: limits.tokenBodyMemory)
        self.responseBuffers = responseBuffers ?? ResponseBufferBudget(limit: limits.responseBufferTotal)
        self.accessLog = accessLog
        self.metrics = metrics
        self.hsts = hsts
        self.now = now
        self.nowMilliseconds = nowMilliseconds
        self.fileKeys = fileKeys
    }
}

/// The verification keys of a configuration's key files (every entry but the fetched ones), merged; `keys` is
/// `nil` when there are none.
struct LoadedFileKeys: Sendable {
    let keys: KeySet?
}
