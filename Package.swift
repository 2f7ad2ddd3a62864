// swift-tools-version:6.1
//
// tokengate — an edge reverse proxy that lets a website's mobile apps in with tokens.
//
// Layers, each a module (docs/architecture.md has the map and one request's path through it):
//   C system libraries (OpenSSL 3, libnghttp2, libpq) → C shims → token verification (pure, no I/O)
//   → the data plane's event loop (epoll) → TLS → HTTP protocol layer → configuration → cutoff stores → the proxy (TokengateGateway)
//   → admin listener (TokengateAdmin) → the `tokengate` executable; the demo site (TokengateDemo) beside it.
// The hot-path benchmarks live in the `Benchmarks/` sub-package so that their dependencies
// (package-benchmark, jwt-kit) never reach the product.
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "tokengate",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "tokengate", targets: ["tokengate"]),
        .library(name: "TokengateTokens", targets: ["TokengateTokens"]),
        .library(name: "TokengateClient", targets: ["TokengateClient"]),
        // For the benchmarks' floor proxy (Benchmarks/Sources/NIOFloorProxy), which must use the gateway's own
        // TLS handler to measure what the gateway's construction costs.
        .library(name: "TokengateTLS", targets: ["TokengateTLS"]),
        // For the fuzz targets (Fuzz/), which link the parsers under test into libFuzzer executables.
        .library(name: "TokengateConfig", targets: ["TokengateConfig"]),
        // For the HTTP/1.1 parser and cookie/form scanner fuzz targets (Fuzz/).
        .library(name: "TokengateHTTP", targets: ["TokengateHTTP"]),
        // For the benchmarks' epoll floor proxy (Benchmarks/Sources/EpollFloorProxy), which runs on this loop.
        .library(name: "TokengateEventLoop", targets: ["TokengateEventLoop"]),
        // For the benchmarks' session-cookie rows.
        .library(name: "TokengateSessionCookies", targets: ["TokengateSessionCookies"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
        .package(url: "https://github.com/vapor/sqlite-nio.git", from: "1.13.2"),
        .package(url: "https://github.com/apple/swift-atomics.git", from: "1.3.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", from: "0.2.0"),
        // The cutoff snapshot's persistent map (TreeDictionary): one user's change shares the rest of the table.
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
    ],
    targets: [
        // MARK: C libraries and shims
        .systemLibrary(
            name: "CTokengateOpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"]), .brew(["openssl@3"])]
        ),
        .systemLibrary(
            name: "CTokengateNghttp2",
            pkgConfig: "libnghttp2",
            providers: [.apt(["libnghttp2-dev"]), .brew(["nghttp2"])]
        ),
        // PostgreSQL's own C client; it does its TLS with the same system OpenSSL 3.
        .systemLibrary(
            name: "CTokengatePQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        // zlib, for the compressed form of Flask's and Django's session cookies (inflate only, capped).
        .systemLibrary(
            name: "CTokengateZlib",
            pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"]), .brew(["zlib"])]
        ),
        .target(
            name: "CTokengateShims",
            dependencies: ["CTokengateOpenSSL", "CTokengateNghttp2"]
        ),

        // Linux's epoll and accept4, which Swift's Glibc module does not export.
        .target(name: "CTokengateEpoll"),

        // MARK: The data plane's own event loop: epoll, sockets and deadlines, no NIO channels.
        .target(
            name: "TokengateEventLoop",
            dependencies: [
                "CTokengateEpoll",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "HeapModule", package: "swift-collections"),
            ],
            swiftSettings: swiftSettings
        ),

        // MARK: The data plane's drivers on that loop: TLS client connections (the HTTP/1.1 driver goes here).
        .target(
            name: "TokengateLoopDriver",
            dependencies: [
                "TokengateEventLoop", "TokengateTLS",
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),

        // MARK: Token verification: pure, no I/O, no NIO. The hot path.
        .target(
            name: "TokengateTokens",
            dependencies: [
                "CTokengateShims", "CTokengateOpenSSL",
                .product(name: "Atomics", package: "swift-atomics"),
                .product(name: "HashTreeCollections", package: "swift-collections"),
            ],
            swiftSettings: swiftSettings
        ),

        // MARK: Web frameworks' own session cookies (Rails, Flask, Django, Express cookie-session) as tokens:
        // verifiers and minters, keys derived at load. Pure like TokengateTokens: no I/O on the hot path, no NIO.
        .target(
            name: "TokengateSessionCookies",
            dependencies: ["TokengateTokens", "CTokengateShims", "CTokengateOpenSSL", "CTokengateZlib"],
            swiftSettings: swiftSettings
        ),

        // MARK: TLS over a memory BIO with libssl, as a NIO channel handler.
        .target(
            name: "TokengateTLS",
            dependencies: [
                "CTokengateShims", "CTokengateOpenSSL",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),

        // MARK: Configuration: YAML, typed and validated.
        .target(
            name: "TokengateConfig",
            dependencies: [
                "TokengateTokens", "TokengateHTTP", "TokengatePercentEncoding",
                .product(name: "Yams", package: "Yams"),
            ],
            swiftSettings: swiftSettings
        ),

        // MARK: The protocol layer: HTTP/1.1 parsing and serializing, HTTP/2 over libnghttp2. Knows nothing of
        // configuration, tokens or sockets (no NIOPosix): it turns bytes into requests and responses into bytes.
        .target(
            name: "TokengateHTTP",
            dependencies: [
                "TokengatePercentEncoding", "CTokengateNghttp2", "CTokengateShims",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),

        // MARK: The gateway: listeners, the proxy and token page exchanges, upstream pools, logs and metrics.
        .target(
            name: "TokengateGateway",
            dependencies: [
                "TokengateHTTP", "TokengateTokens", "TokengateTLS", "TokengateConfig", "TokengatePercentEncoding",
                "TokengateSessionCookies", "CTokengateShims", "CTokengateOpenSSL",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Atomics", package: "swift-atomics"),
            ],
            swiftSettings: swiftSettings
        ),

        // MARK: The admin listener: probes, metrics, reload and the cutoff admin API.
        .target(
            name: "TokengateAdmin",
            dependencies: [
                "TokengateGateway", "TokengateHTTP", "TokengateStores", "TokengateConfig", "TokengateTLS",
                "TokengateTokens", "TokengateVersion",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: swiftSettings
        ),

        // MARK: The demo website and backend that `tokengate dev` and the tests run; part of no library product.
        .target(
            name: "TokengateDemo",
            dependencies: [
                "TokengateTokens", "TokengateHTTP", "TokengateGateway",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),

        // MARK: Cutoff stores: SQLite (embedded default), a read-only JSON file, the sync service, admin API logic.
        .target(
            name: "TokengateStores",
            dependencies: [
                "TokengateTokens", "CTokengatePQ", "CTokengateOpenSSL",
                .product(name: "SQLiteNIO", package: "sqlite-nio"),
                .product(name: "HashTreeCollections", package: "swift-collections"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),

        // MARK: The mobile side of the token page (DESIGN §8): Foundation only, builds on Linux and Apple platforms.
        .target(
            name: "TokengateClient",
            dependencies: ["TokengatePercentEncoding"],
            swiftSettings: swiftSettings
        ),
        // The release's version number, in one place (scripts/release.sh reads it too).
        .target(
            name: "TokengateVersion",
            swiftSettings: swiftSettings
        ),
        // Percent-encoding shared by the gateway and the client library (pure Swift, no dependencies).
        .target(
            name: "TokengatePercentEncoding",
            swiftSettings: swiftSettings
        ),

        // MARK: The executable.
        .executableTarget(
            name: "tokengate",
            dependencies: [
                "TokengateTokens", "TokengateConfig", "TokengateGateway", "TokengateAdmin", "TokengateDemo",
                "TokengateHTTP", "TokengateStores", "TokengateTLS", "TokengateVersion",
                "CTokengateOpenSSL", "CTokengateNghttp2", "CTokengatePQ",
                .product(name: "SQLiteNIO", package: "sqlite-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),

        // MARK: The load generator: TLS + HTTP/1.1 keep-alive or HTTP/2 (libnghttp2 client sessions),
        // closed-loop and fixed-rate.
        .executableTarget(
            name: "tokengate-bench",
            dependencies: [
                "TokengateTLS", "TokengateTokens", "CTokengateNghttp2", "CTokengateShims",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),

        // MARK: Tests
        .target(
            name: "TokengateTestSupport",
            dependencies: [
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            path: "Sources/TokengateTestSupport",
            swiftSettings: swiftSettings
        ),
        // Messages built from NIO's header types, for the protocol and gateway tests.
        .target(
            name: "TokengateHTTPTestSupport",
            dependencies: [
                "TokengateHTTP",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Sources/TokengateHTTPTestSupport",
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TokengateTokensTests",
            dependencies: ["TokengateTokens", "CTokengateOpenSSL", "TokengateTestSupport"],
            resources: [.copy("Fixtures")],
            swiftSettings: swiftSettings
        ),
        // The session-cookie formats against vectors from the frameworks' own test suites and against the real
        // frameworks (Rails, Flask, Django, Express with keygrip), run as child processes.
        .testTarget(
            name: "TokengateSessionCookiesTests",
            dependencies: ["TokengateSessionCookies", "TokengateTokens", "TokengateTestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TokengateEventLoopTests",
            dependencies: [
                "TokengateEventLoop",
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TokengateLoopDriverTests",
            dependencies: [
                "TokengateLoopDriver", "TokengateEventLoop", "TokengateTLS", "TokengateTestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TokengateTLSTests",
            dependencies: [
                "TokengateTLS", "CTokengateOpenSSL",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // The wire protocols on their own: parsers, serializers and the nghttp2 session, without a gateway.
        .testTarget(
            name: "TokengateHTTPTests",
            dependencies: [
                "TokengateHTTP", "TokengateHTTPTestSupport", "CTokengateNghttp2",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TokengateConfigTests",
            dependencies: ["TokengateConfig", "TokengateHTTP", "TokengateTokens"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TokengateStoresTests",
            dependencies: [
                "TokengateStores", "TokengateAdmin", "TokengateTokens", "TokengateTestSupport",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TokengateClientTests",
            dependencies: ["TokengateClient"],
            swiftSettings: swiftSettings
        ),
        // The executable's own types (the snapshot cache's ticks), driven directly; its commands are tested by
        // running the built binary (TokengateGatewayTests/*CommandTests.swift).
        .testTarget(
            name: "tokengateTests",
            dependencies: [
                "tokengate", "TokengateTokens", "TokengateTestSupport", "TokengateVersion",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "TokengateGatewayTests",
            dependencies: [
                "TokengateGateway", "TokengateHTTP", "TokengateAdmin", "TokengateDemo", "TokengateTokens",
                "TokengateStores", "TokengateConfig", "TokengateTLS", "TokengateTestSupport", "TokengateHTTPTestSupport", "TokengateClient",
                "CTokengateNghttp2",
                "TokengateVersion",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
