//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//
import CFuzzDriver
import Foundation
@testable import TokengateHTTP

/// The input is a cookie name, a newline, and one or more `Cookie` header values separated by newlines, read as
/// a `cookie:NAME` token source reads them (``CookieHeader``) and stripped as the request is forwarded.
///
/// Besides not crashing: once the cookie is removed, no value of that name may be left for the backend to read,
/// and every other cookie must arrive with the values the gateway read from it.
@main
enum FuzzCookieHeader {
    static func main() {
        var argc = CommandLine.argc
        var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in fuzzCookieHeader(data, size) })
    }
}

/// The one-input function, under the name libFuzzer's runtime also links against.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzCookieHeader(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    // Header values reach the extractor as Strings made from the field's bytes.
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    guard lines.count >= 2 else { return 0 }
    let name = lines.removeFirst()
    guard !name.isEmpty else { return 0 }
    let values = CookieHeader.values(named: name, in: lines)
    let remaining = CookieHeader.removing(name, from: lines)
    guard let remaining else { return 0 }
    guard CookieHeader.values(named: name, in: [remaining]).isEmpty else {
        fatalError("a cookie named \(name) is still there after it was removed")
    }
    _ = values
    // Every other cookie the gateway read goes on with the same values: the first and last 16 names, so that
    // the check stays linear in the input (every name would make it quadratic and time out on large headers,
    // on the harness's account, not the parser's).
    var seen = Set<String>()
    let names = otherNames(in: lines).filter { $0 != name && seen.insert($0).inserted }
    for other in names.prefix(16) + names.suffix(max(0, min(16, names.count - 16))) {
        guard CookieHeader.values(named: other, in: lines) == CookieHeader.values(named: other, in: [remaining]) else {
            fatalError("removing \(name) changed the cookie \(other)")
        }
    }
    return 0
}

/// The cookie names in `headers` as the gateway splits them: pieces between `;` with an `=`, trimmed.
func otherNames(in headers: [String]) -> [String] {
    headers.flatMap { header in
        header.split(separator: ";").compactMap { pair -> String? in
            guard let equals = pair.firstIndex(of: "=") else { return nil }
            let name = pair[..<equals].trimmingOWS()
            return name.isEmpty ? nil : String(name)
        }
    }
}
