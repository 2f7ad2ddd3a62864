// swift-tools-version:6.1
//
// tokengate hot-path benchmarks (docs/performance.md), kept in their own package so that
// package-benchmark, jwt-kit and swift-crypto never reach the product's dependency graph.
//
// Run from this directory:  swift package --disable-sandbox benchmark
import PackageDescription

let package = Package(
    name: "tokengate-benchmarks",
    platforms: [.macOS(.v14)],
    dependencies: [
        // The product under test. The explicit name keeps `package: "tokengate"` valid whatever the checkout's
        // directory is called (a path dependency's identity is otherwise the directory name).
        .package(name: "tokengate", path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark.git", from: "1.38.1", traits: ["MallocInterposer"]),
        // The comparison peer, pinned so that figures stay comparable between runs.
        .package(url: "https://github.com/vapor/jwt-kit.git", exact: "5.8.0"),
        // The floor proxy's own needs, at the product's versions.
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
    ],
    targets: [
        // The system libcrypto through pkg-config, for the bare-verify floor.
        .systemLibrary(
            name: "CBenchOpenSSL",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"]), .brew(["openssl@3"])]
        ),
        // The floor itself: libcrypto verifications of a fixed signature with keys built in advance.
        .target(
            name: "CBenchLibcrypto",
            dependencies: ["CBenchOpenSSL"]
        ),
        .executableTarget(
            name: "TokenVerify",
            dependencies: [
                "CBenchLibcrypto",
                .product(name: "TokengateTokens", package: "tokengate"),
                .product(name: "TokengateSessionCookies", package: "tokengate"),
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "JWTKit", package: "jwt-kit"),
            ],
            path: "Benchmarks/TokenVerify",
            swiftSettings: [
                .enableUpcomingFeature("ExistentialAny"),
                .enableUpcomingFeature("MemberImportVisibility"),
            ],
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // What both load-benchmark floors do (find a head's end and a response's Content-Length, split a stream
        // into messages): one copy, so that the floors differ in their construction only.
        .target(
            name: "FloorWork",
            dependencies: [.product(name: "NIOCore", package: "swift-nio")],
            swiftSettings: [
                .enableUpcomingFeature("ExistentialAny"),
                .enableUpcomingFeature("MemberImportVisibility"),
            ]
        ),
        // The load benchmark's floor (docs/performance.md, "The floors"): the cheapest TLS-terminating HTTP/1.1
        // proxy on SwiftNIO with the gateway's TLS handler, run beside the gateway by scripts/bench-compare.sh.
        .executableTarget(
            name: "nio-floor-proxy",
            dependencies: [
                "FloorWork",
                .product(name: "TokengateTLS", package: "tokengate"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Sources/NIOFloorProxy",
            swiftSettings: [
                .enableUpcomingFeature("ExistentialAny"),
                .enableUpcomingFeature("MemberImportVisibility"),
            ]
        ),
        // The same floor on the data plane's epoll event loop (no NIO channels), with the gateway's TLSConnection:
        // what the construction costs when SwiftNIO's channel machinery is taken out.
        .executableTarget(
            name: "epoll-floor-proxy",
            dependencies: [
                "FloorWork",
                .product(name: "TokengateEventLoop", package: "tokengate"),
                .product(name: "TokengateTLS", package: "tokengate"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Sources/EpollFloorProxy",
            swiftSettings: [
                .enableUpcomingFeature("ExistentialAny"),
                .enableUpcomingFeature("MemberImportVisibility"),
            ]
        ),
    ]
)
