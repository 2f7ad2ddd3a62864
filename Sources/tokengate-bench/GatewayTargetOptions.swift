//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import ArgumentParser

/// The gateway under test and the keys to mint its tokens with: the options `run` and `idle` share.
struct GatewayTargetOptions: ParsableArguments {
    @Option(help: "The gateway URL; loopback only.")
    var url = "https://127.0.0.1:8443/api/bench"

    @Option(name: .customLong("server-name"), help: "SNI and verification name (default: localhost for IPs).")
    var serverName: String?

    @Option(help: "CA certificate (PEM) to verify the gateway with.")
    var cacert: String?

    @Flag(help: "Do not verify the gateway's certificate.")
    var insecure = false

    @Option(name: .customLong("key"), help: "A private JWK Set to mint with (repeatable; every key is used in turn).")
    var keys: [String] = []

    /// The parsed URL (loopback only) and its TLS server name.
    func target() throws -> BenchTarget {
        try BenchTarget(url: self.url, serverName: self.serverName)
    }
}
