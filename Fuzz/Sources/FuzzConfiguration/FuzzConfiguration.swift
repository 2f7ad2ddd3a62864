//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//
import CFuzzDriver
import Foundation
import TokengateConfig

/// libFuzzer's entry point: the input is a configuration file. It is loaded as `check-config` and `serve` load
/// one (YAML preflight, libyaml, the typed decoder and every validation), with file checks off so that the fuzzer
/// explores the decoder rather than the file system. A configuration that loads then builds its route table,
/// lists its warnings and compares itself for a reload, as `serve` does with it.
///
/// Besides not crashing, errors must be ``ConfigurationError`` with a message: a configuration that fails in
/// any other way would reach the operator as a bare Swift error.
@main
enum FuzzConfiguration {
    static func main() {
        var argc = CommandLine.argc
        var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in fuzzConfiguration(data, size) })
    }
}

/// The one-input function, under the name libFuzzer's runtime also links against.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzConfiguration(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    guard let yaml = String(validating: bytes, as: UTF8.self) else {
        return 0  // GatewayConfiguration.load refuses non-UTF-8 before parsing (its own unit-tested check).
    }
    do {
        let configuration = try GatewayConfiguration(
            yaml: yaml,
            sourcePath: "/nonexistent/tokengate-fuzz/tokengate.yaml",
            checkFiles: false
        )
        _ = configuration.makeRouteTable()
        _ = configuration.warnings
        guard configuration.restartOnlyChanges(comparedTo: configuration).isEmpty else {
            fatalError("a configuration differs from itself for a reload")
        }
    } catch let error as ConfigurationError {
        guard !error.description.isEmpty else { fatalError("a configuration error without a message") }
    } catch {
        fatalError("a configuration failed with an error that is not a ConfigurationError: \(error)")
    }
    return 0
}
