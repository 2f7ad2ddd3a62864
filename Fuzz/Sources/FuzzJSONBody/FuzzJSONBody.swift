//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//
import CFuzzDriver
import Foundation
import TokengateTokens

/// The input is a request body, scanned for a `json:access_token` token source as the gateway scans it
/// (``JSONTopLevelMembers``), then stripped of the token member as it is forwarded.
///
/// Besides not crashing, the strict scanner must never accept what a standard parser reads differently:
/// a body it accepts must be a JSON object to Foundation too, with the same token (or none), and the body it
/// forwards must be that object without the token and nothing else changed. A disagreement is a body on which
/// the gateway and a backend would see different tokens or different data.
@main
enum FuzzJSONBody {
    static func main() {
        var argc = CommandLine.argc
        var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
        exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in fuzzJSONBody(data, size) })
    }
}

let field = "access_token"

/// The one-input function, under the name libFuzzer's runtime also links against.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzJSONBody(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let body = Array(UnsafeBufferPointer(start: data, count: size))
    guard let object = try? JSONTopLevelMembers(parsing: body, keepingMembersNamed: field) else { return 0 }
    let standard: NSDictionary
    do {
        guard let dictionary = try JSONSerialization.jsonObject(with: Data(body)) as? NSDictionary else {
            fatalError("the scanner accepted a body that Foundation reads as something other than an object")
        }
        standard = dictionary
    } catch {
        // RFC 8259 §6 lets a parser limit the range of numbers, and Foundation refuses one beyond a Double's
        // (`1e999`); the gateway forwards such a body's bytes as they are, so the backend's parser decides.
        // Only that refusal is expected.
        guard "\(error)".contains("is not representable in Swift") else {
            fatalError("the scanner accepted a body that Foundation does not read as a JSON object: \(error)")
        }
        return 0
    }
    switch object.members.count {
    case 0:
        guard standard[field] == nil else { fatalError("the scanner found no token where Foundation finds one") }
    case 1:
        let member = object.members[0]
        if let token = object.stringValue(of: member) {
            guard (standard[field] as? String) == token else {
                fatalError("the scanner's token differs from Foundation's reading of the body")
            }
        } else {
            guard !(standard[field] is String) else { fatalError("the scanner saw no string where Foundation does") }
        }
        guard let stripped = JSONTopLevelMembers.removingMember(named: field, from: body) else {
            fatalError("a body with one token member could not be stripped")
        }
        guard let forwarded = (try? JSONSerialization.jsonObject(with: Data(stripped))) as? NSDictionary else {
            fatalError("the stripped body is not a JSON object to Foundation")
        }
        let expected = standard.mutableCopy() as! NSMutableDictionary
        expected.removeObject(forKey: field)
        guard forwarded.isEqual(expected) else {
            fatalError("stripping the token changed more than the token member")
        }
        guard let again = try? JSONTopLevelMembers(parsing: stripped, keepingMembersNamed: field),
            again.members.isEmpty
        else { fatalError("the stripped body still names the token field, or is no longer valid") }
    default:
        // Named twice: refused by the gateway (`repeated`), whatever a parser would keep.
        guard JSONTopLevelMembers.removingMember(named: field, from: body) == nil else {
            fatalError("a body naming the token twice was stripped of one of them")
        }
    }
    return 0
}
