//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation
import Testing

@testable import TokengateConfig

/// The repository's `Config/` directory, found from this file's location.
let configDirectory: String = {
    let file = #filePath
    var parts = file.split(separator: "/", omittingEmptySubsequences: false)
    parts.removeLast(3)  // TokengateConfigTests/TestSupport.swift, Tests
    return parts.joined(separator: "/") + "/Config"
}()

/// Parses `yaml` as `test.yaml` without file checks.
func parse(_ yaml: String, checkFiles: Bool = false) throws -> GatewayConfiguration {
    try GatewayConfiguration(yaml: yaml, sourcePath: "test.yaml", checkFiles: checkFiles)
}

/// The error parsing `yaml` throws, or `nil` when it parses.
func parseError(_ yaml: String, sourcePath: String = "test.yaml", checkFiles: Bool = false) -> ConfigurationError? {
    do {
        _ = try GatewayConfiguration(yaml: yaml, sourcePath: sourcePath, checkFiles: checkFiles)
        return nil
    } catch let error as ConfigurationError {
        return error
    } catch {
        Issue.record("unexpected error type \(type(of: error)): \(error)")
        return nil
    }
}

/// A small valid configuration; tests append or substitute sections.
/// Line numbers (1-based): 1 listen, 2 address, 3 tls, 4 keys, 5 cutoffs, 6 upstreams, 7 api, 8 routes,
/// 9 first route, 10 second route.
let minimalYAML = """
    listen:
      - address: 127.0.0.1:8443
        tls: { certificates: [ { cert: cert.pem, key: key.pem } ] }
    keys: [ { jwks: keys.jwks } ]
    cutoffs: { sqlite: cutoffs.db }
    upstreams:
      api: { targets: [ "http://127.0.0.1:9000" ] }
    routes:
      - { path_prefix: /api/, upstream: api, accept: [api] }
      - { path_prefix: /, upstream: api, accept: none }

    """

/// A scratch directory removed when the value is deinitialized.
final class TemporaryDirectory {
    let path: String

    init() throws {
        var template = Array("/tmp/tokengate-config-test-XXXXXX".utf8CString)
        guard let result = mkdtemp(&template) else {
            throw POSIXFailure(message: "mkdtemp failed")
        }
        self.path = String(cString: result)
    }

    /// Writes `contents` at `relativePath`, creating intermediate directories.
    func write(_ relativePath: String, contents: String) throws {
        try self.write(relativePath, bytes: Array(contents.utf8))
    }

    func write(_ relativePath: String, bytes: [UInt8]) throws {
        let full = self.path + "/" + relativePath
        var directory = ""
        for component in full.split(separator: "/").dropLast() {
            directory += "/" + component
            mkdir(directory, 0o755)
        }
        guard let file = fopen(full, "wb") else {
            throw POSIXFailure(message: "cannot create \(full)")
        }
        defer { fclose(file) }
        guard fwrite(bytes, 1, bytes.count, file) == bytes.count else {
            throw POSIXFailure(message: "cannot write \(full)")
        }
    }

    deinit {
        try? FileManager.default.removeItem(atPath: self.path)
    }
}

struct POSIXFailure: Error {
    var message: String
}
