//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//
import CFuzzDriver
import Foundation
@testable import TokengateHTTP

/// The input is an `application/x-www-form-urlencoded` request body, read as a `form:access_token` token source
/// reads it (``FormURLEncoded``) and stripped of the field as the request is forwarded.
///
/// Besides not crashing: once the field is removed, no pair of that name may be left, nor any other pair
/// changed, added or lost; and the removal never makes a `;` hide a field of that name (parsers that split on
/// `;` would read a token the gateway never checked).
@main
enum FuzzFormBody {
    static func main() {
        var argc = CommandLine.argc
        var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in fuzzFormBody(data, size) })
    }
}

let field = "access_token"

/// The one-input function, under the name libFuzzer's runtime also links against.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzFormBody(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let body = Array(UnsafeBufferPointer(start: data, count: size))
    _ = FormURLEncoded.values(named: field, in: body)
    let hidden = FormURLEncoded.hasSemicolonField(named: field, in: body)
    let stripped = FormURLEncoded.removing(field, from: body)
    guard FormURLEncoded.values(named: field, in: stripped).isEmpty else {
        fatalError("the field is still there after it was removed")
    }
    let before = FormURLEncoded.pairs(body).filter { $0.name != field }.map { Array(body[$0.range]) }
    let after = FormURLEncoded.pairs(stripped).map { Array(stripped[$0.range]) }
    guard before == after else { fatalError("removing the field changed the other pairs") }
    // Removing pairs never makes a `;` hide the field where none did (the check runs before the removal).
    guard hidden || !FormURLEncoded.hasSemicolonField(named: field, in: stripped) else {
        fatalError("removing the field made a ';' hide one")
    }
    return 0
}
