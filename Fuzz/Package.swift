// swift-tools-version:6.1
//
// tokengate's fuzz targets: small libFuzzer executables, one per parser that a client or an operator's file
// reaches first. They are kept in their own package because a libFuzzer executable has no `main` of its own
// (libFuzzer's runtime provides it) and must be built with `-sanitize=fuzzer,address`, which the product's
// ordinary build must never see.
//
// Build and run them with scripts/fuzz.sh (which passes the sanitizer flags); `swift build` alone links nothing.
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let package = Package(
    name: "tokengate-fuzz",
    platforms: [.macOS(.v14)],
    dependencies: [
        // The product under test. The explicit name keeps `package: "tokengate"` valid whatever the checkout's
        // directory is called (a path dependency's identity is otherwise the directory name).
        .package(name: "tokengate", path: ".."),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
    ],
    targets: [
        // libFuzzer's driver, declared for Swift (each target's `main` calls it).
        .target(name: "CFuzzDriver"),
        // Raw bytes as a token, against every fixture key set (HMAC, ES256, RS256, PS256, EdDSA).
        .executableTarget(
            name: "FuzzTokenVerifier",
            dependencies: ["CFuzzDriver", .product(name: "TokengateTokens", package: "tokengate")],
            swiftSettings: swiftSettings
        ),
        // Raw bytes as a token's header and payload JSON, signed by the harness so that the claim checks run.
        .executableTarget(
            name: "FuzzTokenClaims",
            dependencies: ["CFuzzDriver", .product(name: "TokengateTokens", package: "tokengate")],
            swiftSettings: swiftSettings
        ),
        // Raw bytes as a JSON request body, scanned for a token field and stripped of it.
        .executableTarget(
            name: "FuzzJSONBody",
            dependencies: ["CFuzzDriver", .product(name: "TokengateTokens", package: "tokengate")],
            swiftSettings: swiftSettings
        ),
        // Raw bytes as a configuration file.
        .executableTarget(
            name: "FuzzConfiguration",
            dependencies: ["CFuzzDriver", .product(name: "TokengateConfig", package: "tokengate")],
            swiftSettings: swiftSettings
        ),
        // A client's bytes on one HTTP/1.1 connection, read whole, byte by byte and in chunks.
        .executableTarget(
            name: "FuzzHTTP1Request",
            dependencies: [
                "CFuzzDriver",
                .product(name: "TokengateHTTP", package: "tokengate"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // A backend's bytes on one connection, read whole, byte by byte and in chunks.
        .executableTarget(
            name: "FuzzHTTP1Response",
            dependencies: [
                "CFuzzDriver",
                .product(name: "TokengateHTTP", package: "tokengate"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // A cookie name and Cookie header values, read and stripped.
        .executableTarget(
            name: "FuzzCookieHeader",
            dependencies: [
                "CFuzzDriver",
                .product(name: "TokengateHTTP", package: "tokengate"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        // A connection's first bytes on a PROXY protocol listener, whole and prefix by prefix.
        .executableTarget(
            name: "FuzzProxyProtocol",
            dependencies: [
                "CFuzzDriver",
                .product(name: "TokengateHTTP", package: "tokengate"),
            ],
            swiftSettings: swiftSettings
        ),
        // A form body, read and stripped of its token field.
        .executableTarget(
            name: "FuzzFormBody",
            dependencies: [
                "CFuzzDriver",
                .product(name: "TokengateHTTP", package: "tokengate"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
