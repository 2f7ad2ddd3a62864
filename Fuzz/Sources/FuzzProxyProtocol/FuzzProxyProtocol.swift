//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//
import CFuzzDriver
import Foundation
@testable import TokengateHTTP

/// The input is the first bytes a load balancer (or anyone on its network) sends a PROXY protocol listener,
/// read whole and then as the handler reads them, one prefix at a time (``ProxyProtocolParser``).
///
/// Besides not crashing: a header is never longer than the bytes given nor than the limit; every prefix of a
/// header that parses is incomplete, never refused; once a prefix is refused, no longer one is accepted; and an
/// address given is a canonical IP literal (it reparses to itself).
@main
enum FuzzProxyProtocol {
    static func main() {
        var argc = CommandLine.argc
        var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in fuzzProxyProtocol(data, size) })
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
func fuzzProxyProtocol(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let whole = ProxyProtocolParser.parse(bytes)
    switch whole {
    case .header(let source, let length):
        guard length <= bytes.count, length <= ProxyProtocolParser.maximumLength else {
            fatalError("a header of \(length) bytes from \(bytes.count)")
        }
        for cut in 0..<length {
            guard ProxyProtocolParser.parse(bytes.prefix(cut)) == .incomplete else {
                fatalError("a prefix of \(cut) bytes of a valid header was not incomplete")
            }
        }
        if let source {
            let text = Array(("PROXY " + (source.contains(":") ? "TCP6 " : "TCP4 ") + source + " " + source + " 1 2\r\n").utf8)
            guard ProxyProtocolParser.parse(text) == .header(source: source, length: text.count) else {
                fatalError("the address \(source) does not reparse to itself")
            }
        }
    case .invalid:
        // The parse is monotonic: more bytes never turn a refusal into a header.
        var refusedAt: Int?
        for cut in stride(from: 0, through: min(bytes.count, 200), by: 1) {
            let result = ProxyProtocolParser.parse(bytes.prefix(cut))
            if case .invalid = result, refusedAt == nil { refusedAt = cut }
            if refusedAt != nil, case .header = result {
                fatalError("a header after a refused prefix of \(refusedAt!) bytes")
            }
        }
    case .incomplete:
        guard bytes.count <= ProxyProtocolParser.maximumLength else {
            fatalError("still incomplete after \(bytes.count) bytes")
        }
    }
    return 0
}
