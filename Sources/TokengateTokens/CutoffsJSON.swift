//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// The cutoffs JSON format, read and written with every user id kept byte for byte:
///
/// ```json
/// {"global_revoked_before": 1714564800,
///  "users": {"alice": {"revoked_before": 1714564800, "api_revoked_before": 1714568400}}}
/// ```
///
/// The `file` cutoff store reads it, the PostgreSQL store's snapshot cache writes and reads it, and `tokengate token
/// verify --cutoffs` reads it: one reader, so all three accept and refuse the same files.
///
/// ### Why not Foundation
/// `JSONSerialization` and `JSONDecoder` hand over `[String: …]` dictionaries, whose keys compare by Unicode
/// canonical equivalence: a file holding `"josé"` (U+00E9) and `"jose\u0301"` came out as one key, spelt the first
/// way and carrying the second one's cutoffs. A token for the second spelling then had no cutoff at all (user ids
/// are opaque, ``CutoffUserKey``), and the first one's could move back. The members are read here with
/// ``JSONTopLevelMembers``, which keeps each name's bytes; writing goes through the same rules by hand.
///
/// ### Rules
/// Every member is optional, and `null` means none. A time is a non-negative whole number of UNIX seconds that fits
/// in 64 bits, in any JSON spelling of one (`1700000000`, `1700000000.0`, `1.7e9`; what Python and other writers
/// produce); a fraction or a negative time is refused. Anything else — an unknown member, a member twice,
/// the same user twice, a user id ``UserIDRules`` refuses, a boolean, a string — is an error naming the member,
/// because a typo that silently dropped a cutoff would let revoked tokens in.
public enum CutoffsJSON {
    /// What a file holds.
    public struct Contents: Sendable, Equatable {
        public var globalRevokedBefore: Int64?
        public var users: CutoffUserMap

        public init(globalRevokedBefore: Int64? = nil, users: CutoffUserMap = [:]) {
            self.globalRevokedBefore = globalRevokedBefore
            self.users = users
        }
    }

    /// Reads `json`.
    /// - Throws: ``CutoffFileError`` with code `invalid_json` (not one JSON object) or `invalid_value`, and a message
    ///   naming the member at fault. The message quotes a user id only once the id passed ``UserIDRules`` (no
    ///   control characters), cut to 80 characters.
    public static func parse(_ json: [UInt8]) throws(CutoffFileError) -> Contents {
        // RFC 8259 §8.1 lets a parser ignore a byte order mark, and editors on Windows write one.
        let json = json.starts(with: [0xEF, 0xBB, 0xBF]) ? Array(json.dropFirst(3)) : json
        let top: JSONTopLevelMembers
        do {
            top = try JSONTopLevelMembers(parsing: json)
        } catch let error where error.code == .notAnObject && Self.startsAJSONValue(json) {
            throw CutoffFileError(code: "invalid_json", message: "the top level must be a JSON object")
        } catch {
            throw CutoffFileError(code: "invalid_json", message: "not valid JSON (\(error))")
        }
        var contents = Contents()
        let allowed = ["global_revoked_before", "users"]
        for (name, value) in try Self.members(top, of: json, allowed: allowed, place: "at the top level") {
            if name == "global_revoked_before" {
                contents.globalRevokedBefore = try Self.time(value, at: "global_revoked_before")
            } else if !Self.isNull(value) {
                contents.users = try Self.users(Array(value))
            }
        }
        return contents
    }

    /// `contents` in this format: members in a fixed order, users sorted by their ids' bytes, so that the same
    /// contents always give the same bytes.
    ///
    /// Writes only what ``parse(_:)`` reads back, whatever a store handed over, so that a snapshot cache is never
    /// unreadable when it is needed (a gateway starting while its database is down): a user id ``UserIDRules``
    /// refuses is left out (the verifier refuses a token carrying it, so its cutoffs can never apply; an
    /// `rp_table` may hold such ids), and a time before 1970 is written as 0, which rejects every token it did
    /// and, with a negative `iat`, a few more (fail closed).
    public static func write(_ contents: Contents) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64 + contents.users.count * 64)
        out += Array("{".utf8)
        if let global = contents.globalRevokedBefore {
            out += Array("\"global_revoked_before\":\(max(global, 0)),".utf8)
        }
        out += Array("\"users\":{".utf8)
        let users = contents.users.filter { UserIDRules.problem($0.key.id) == nil }
            .sorted { $0.key.id.utf8.lexicographicallyPrecedes($1.key.id.utf8) }
        for (index, (user, cutoffs)) in users.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            // Tokens' escaping: a valid id holds no control character, so only `"` and `\` are escaped.
            out += Array(TokenSigner.jsonString(user.id).utf8)
            var fields: [String] = []
            if let revoked = cutoffs.revokedBefore { fields.append("\"revoked_before\":\(max(revoked, 0))") }
            if let apiRevoked = cutoffs.apiRevokedBefore { fields.append("\"api_revoked_before\":\(max(apiRevoked, 0))") }
            out += Array((":{" + fields.joined(separator: ",") + "}").utf8)
        }
        out += Array("}}".utf8)
        return out
    }

    // MARK: Reading.

    private static func users(_ object: [UInt8]) throws(CutoffFileError) -> CutoffUserMap {
        let members: JSONTopLevelMembers
        do {
            members = try JSONTopLevelMembers(parsing: object)
        } catch {
            throw invalid("\"users\" must be an object of user id to cutoffs")
        }
        var users = CutoffUserMap()
        for member in members.members {
            if let problem = UserIDRules.problem(member.name) {
                throw invalid("a key of \"users\" is not a valid user id: the user id \(problem)")
            }
            let location = "users[\(Self.quoted(member.name))]"
            let key = CutoffUserKey(member.name)
            guard users[key] == nil else {
                throw invalid("\(location) appears twice")
            }
            users[key] = try Self.userCutoffs(Array(object[member.valueRange]), at: location)
        }
        return users
    }

    private static func userCutoffs(_ object: [UInt8], at location: String) throws(CutoffFileError) -> UserCutoffs {
        let members: JSONTopLevelMembers
        do {
            members = try JSONTopLevelMembers(parsing: object)
        } catch {
            throw invalid("\(location) must be an object")
        }
        var cutoffs = UserCutoffs()
        let allowed = ["revoked_before", "api_revoked_before"]
        for (name, value) in try Self.members(members, of: object, allowed: allowed, place: "in \(location)") {
            if name == "revoked_before" {
                cutoffs.revokedBefore = try Self.time(value, at: "\(location).revoked_before")
            } else {
                cutoffs.apiRevokedBefore = try Self.time(value, at: "\(location).api_revoked_before")
            }
        }
        return cutoffs
    }

    /// The members of an object of this format, each a name of `allowed` named once; `place` ends the messages
    /// ("at the top level", `in users["alice"]`).
    private static func members(
        _ members: JSONTopLevelMembers,
        of bytes: [UInt8],
        allowed: [String],
        place: String
    ) throws(CutoffFileError) -> [(name: String, value: ArraySlice<UInt8>)] {
        var seen: Set<String> = []
        var found: [(name: String, value: ArraySlice<UInt8>)] = []
        for member in members.members {
            guard allowed.contains(member.name) else {
                let expected = allowed.map { "\"\($0)\"" }.joined(separator: " and ")
                throw invalid("unknown key \(Self.quoted(member.name)) \(place) (expected \(expected))")
            }
            guard seen.insert(member.name).inserted else {
                throw invalid("\(Self.quoted(member.name)) appears twice \(place)")
            }
            found.append((member.name, bytes[member.valueRange]))
        }
        return found
    }

    /// `null`, or a whole number of seconds: digits (RFC 8259 already forbids leading zeros) that fit in an `Int64`,
    /// or a number written another way whose value is whole (`1700000000.0`, what Python's `json` writes for a
    /// float; `1.7e9`; `-0`), up to 2^53, where a `Double` still holds every integer.
    private static func time(_ value: ArraySlice<UInt8>, at location: String) throws(CutoffFileError) -> Int64? {
        if Self.isNull(value) { return nil }
        func refused(_ what: String) -> CutoffFileError {
            invalid("\(location) must be a non-negative integer of UNIX seconds or null, not \(what)")
        }
        guard let first = value.first, first == UInt8(ascii: "-") || Self.isDigit(first) else {
            throw refused(Self.kind(of: value))  // A string, a boolean, an array or an object.
        }
        if value.allSatisfy(Self.isDigit) {
            var seconds: Int64 = 0
            for byte in value {
                let (times10, overflow) = seconds.multipliedReportingOverflow(by: 10)
                let (sum, overflowed) = times10.addingReportingOverflow(Int64(byte - UInt8(ascii: "0")))
                guard !overflow, !overflowed else { throw refused("a number that large") }
                seconds = sum
            }
            return seconds
        }
        // The scan checked the number's syntax, so `Double` reads it.
        let number = Double(String(decoding: value, as: UTF8.self)) ?? .nan
        guard number == number.rounded() else { throw refused("a non-integer number") }
        guard number >= 0 else { throw refused("a negative number") }
        guard number <= 9_007_199_254_740_992 else { throw refused("a number that large") }
        return Int64(number)
    }

    private static func isDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }

    /// Whether the first byte after white space can begin a JSON value other than an object (`[1]`, `42`, `"x"`),
    /// so that the message says the shape is wrong rather than that it is not JSON.
    private static func startsAJSONValue(_ json: [UInt8]) -> Bool {
        let text = json.drop { [0x20, 0x09, 0x0A, 0x0D].contains($0) }
        guard let first = text.first else { return false }
        return Array("[\"-0123456789".utf8).contains(first)
            || ["true", "false", "null"].contains { text.starts(with: $0.utf8) }
    }

    private static func isNull(_ value: ArraySlice<UInt8>) -> Bool {
        value.elementsEqual("null".utf8)
    }

    /// What a JSON value that is not a number is, for the message (the scan already checked its syntax).
    private static func kind(of value: ArraySlice<UInt8>) -> String {
        switch value.first {
        case UInt8(ascii: "\""): "a string"
        case UInt8(ascii: "["): "an array"
        case UInt8(ascii: "{"): "an object"
        default: "a boolean"
        }
    }

    private static func invalid(_ message: String) -> CutoffFileError {
        CutoffFileError(code: "invalid_value", message: message)
    }

    // MARK: Writing.

    /// A name for a message: JSON-quoted, cut at 80 scalars (a `Character` can hold any number of combining
    /// marks), with every control and format character (C0, DEL, C1, the line and paragraph separators, bidi
    /// overrides and other invisible ones) escaped, so that none reaches a terminal or a log line.
    static func quoted(_ name: String) -> String {
        var text = "\""
        let scalars = name.unicodeScalars
        for scalar in scalars.prefix(80) {
            switch scalar.value {
            case 0x22: text += "\\\""
            case 0x5C: text += "\\\\"
            case _ where scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
                || scalar.properties.generalCategory == .format || scalar.properties.generalCategory == .lineSeparator
                || scalar.properties.generalCategory == .paragraphSeparator:
                let hex = String(scalar.value, radix: 16)
                text += "\\u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
            default: text.unicodeScalars.append(scalar)
            }
        }
        if scalars.count > 80 { text += "…" }
        return text + "\""
    }
}
