//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif
import TokengateConfig
import TokengateHTTP

/// A route's CORS policy (`cors:`) as the request path uses it: the field values built once at load, and the
/// two decisions — what a preflight is answered, and what an actual response carries.
///
/// An origin passes only when it equals a configured one (lower-cased, byte for byte): never by prefix,
/// suffix or pattern, and `null` (sandboxed frames, `file:` pages) never, unless `*` is configured. A
/// response to an origin that does not pass carries no CORS field at all (only `Vary: Origin`, so a cache
/// does not hand one origin's answer to another), and the browser keeps it from the page.
///
/// A class, built once per configuration: the request path holds one reference to it rather than copying its
/// sets and lists.
final class CORSPolicy: Sendable {
    enum Preflight: Equatable {
        /// Not a preflight (no `Origin`, or no `Access-Control-Request-Method`): the request goes on as any other.
        case notPreflight
        /// A preflight the policy allows: answered `204` with these fields.
        case allowed([ResponseField])
        /// A preflight from an origin, or for a method or header, the policy does not allow: answered `403`
        /// without CORS fields.
        case refused
    }

    private let origins: Set<String>
    private let anyOrigin: Bool
    private let methods: Set<String>
    private let headers: Set<String>
    private let credentials: Bool
    /// Built once: the preflight's `Access-Control-Allow-Methods` … `Max-Age` fields and the actual response's
    /// `Access-Control-Expose-Headers`.
    private let preflightFields: [ResponseField]
    private let exposeField: ResponseField?
    /// `Vary: Origin` alone, for a response whose origin did not pass (shared storage: no allocation per request).
    let varyOnly: [ResponseField]
    /// The configured origins (lower-case) with the fields an actual response to each gets, built once: the
    /// request path finds its origin's by comparing bytes where the field lies, and allocates nothing.
    private let actualFields: [(origin: [UInt8], fields: [ResponseField])]
    /// The fields for any origin under `*`.
    private let anyOriginFields: [ResponseField]

    /// The request headers a page may send without asking (Fetch's CORS-safelisted names whose values are
    /// always safelisted); `content-type` is not among them, since only three of its values are.
    private static let safelistedHeaders: Set<String> = ["accept", "accept-language", "content-language"]
    private static let safelistedMethods: Set<String> = ["GET", "HEAD", "POST"]

    init(_ configuration: CORSConfiguration) {
        self.anyOrigin = configuration.allowsAnyOrigin
        self.origins = Set(configuration.origins)
        self.methods = Set(configuration.methods)
        self.headers = Set(configuration.headers)
        self.credentials = configuration.credentials
        var fields = [ResponseField("access-control-allow-methods", configuration.methods.joined(separator: ", "))]
        if !configuration.headers.isEmpty {
            fields.append(ResponseField("access-control-allow-headers", configuration.headers.joined(separator: ", ")))
        }
        if let maxAge = configuration.maxAge {
            fields.append(ResponseField("access-control-max-age", String(maxAge.components.seconds)))
        }
        self.preflightFields = fields
        self.exposeField = configuration.exposeHeaders.isEmpty
            ? nil : ResponseField("access-control-expose-headers", configuration.exposeHeaders.joined(separator: ", "))
        self.varyOnly = self.anyOrigin ? [] : [ResponseField("vary", "origin")]
        let credentials = configuration.credentials
        let exposeField = self.exposeField
        func responseFieldsFor(_ origin: String) -> [ResponseField] {
            var fields = [ResponseField("access-control-allow-origin", origin), ResponseField("vary", "origin")]
            if credentials { fields.append(ResponseField("access-control-allow-credentials", "true")) }
            if let exposeField { fields.append(exposeField) }
            return fields
        }
        self.actualFields = configuration.origins.filter { $0 != "*" }.map { (Array($0.utf8), responseFieldsFor($0)) }
        var anyFields = [ResponseField("access-control-allow-origin", "*")]
        if let exposeField { anyFields.append(exposeField) }
        self.anyOriginFields = anyFields
    }

    /// The fields an actual response gets for a request whose first `Origin` value is `origin` (`nil`: none),
    /// compared without a copy (``RequestFields/withFirstValue(name:_:)``).
    func responseFields(originBytes origin: UnsafeRawBufferPointer?) -> [ResponseField] {
        if self.anyOrigin { return origin == nil ? [] : self.anyOriginFields }
        guard let origin else { return self.varyOnly }
        for entry in self.actualFields where entry.origin.count == origin.count {
            // A browser sends the origin lower-case, as it is kept: one `memcmp` settles the common case.
            let same = entry.origin.withUnsafeBytes { stored in
                if let left = stored.baseAddress, let right = origin.baseAddress, memcmp(left, right, origin.count) == 0 {
                    return true
                }
                return FieldBytes.equalsIgnoringCase(stored, origin)
            }
            if same { return entry.fields }
        }
        return self.varyOnly
    }

    /// The fields an actual response gets for the request's first `Origin` field, found without a full pass
    /// over the lines: they were checked when taken in (a token name with its colon right after it, CRLF at
    /// the end), so a line is `Origin` when its seventh byte is the colon and its first six spell the name;
    /// every other line is skipped by `memchr`, and the walk stops at the first match.
    func responseFields(for fields: RequestFields) -> [ResponseField] {
        fields.bytes.withUnsafeBytes { lines in
            guard let base = lines.baseAddress else { return self.responseFields(originBytes: nil) }
            var position = 0
            while position < lines.count, let found = memchr(base + position, 0x0A, lines.count - position) {
                let lineFeed = base.distance(to: UnsafeRawPointer(found))
                // `origin:` and the CR at least.
                if lineFeed - position >= 8, lines[position + 6] == UInt8(ascii: ":"),
                    FieldBytes.equalsIgnoringCase(UnsafeRawBufferPointer(rebasing: lines[position..<position + 6]), "origin")
                {
                    var start = position + 7
                    var end = lineFeed - 1
                    while start < end, lines[start] == 0x20 || lines[start] == 0x09 { start += 1 }
                    while end > start, lines[end - 1] == 0x20 || lines[end - 1] == 0x09 { end -= 1 }
                    return self.responseFields(originBytes: UnsafeRawBufferPointer(rebasing: lines[start..<end]))
                }
                position = lineFeed + 1
            }
            return self.responseFields(originBytes: nil)
        }
    }

    /// Whether `origin` (the request's `Origin` value) passes.
    func allows(origin: String) -> Bool {
        if self.anyOrigin { return true }
        return self.origins.contains(origin.lowercased())
    }

    /// Whether a cookie token from `origin` may count on an unsafe method: the origin passes by name and the
    /// policy allows credentials (a wildcard never does).
    func allowsCredentials(origin: String) -> Bool {
        self.credentials && !self.anyOrigin && self.origins.contains(origin.lowercased())
    }

    /// What an `OPTIONS` request is answered. `origins` are its `Origin` values (one is needed), `requestMethod`
    /// its `Access-Control-Request-Method` values, `requestHeaders` its `Access-Control-Request-Headers` values.
    func preflight(origins: [String], requestMethod: [String], requestHeaders: [String]) -> Preflight {
        guard !origins.isEmpty, !requestMethod.isEmpty else { return .notPreflight }
        guard origins.count == 1, requestMethod.count == 1, let origin = origins.first, self.allows(origin: origin) else {
            return .refused
        }
        let method = requestMethod[0].trimmingCharacters(in: " \t")
        guard self.methods.contains(method) || Self.safelistedMethods.contains(method) else { return .refused }
        for value in requestHeaders {
            for name in value.split(separator: ",") {
                let name = String(name).trimmingCharacters(in: " \t").lowercased()
                if name.isEmpty { continue }
                guard self.headers.contains(name) || Self.safelistedHeaders.contains(name) else { return .refused }
            }
        }
        return .allowed(self.originFields(origin.lowercased()) + self.preflightFields)
    }

    private func originFields(_ origin: String) -> [ResponseField] {
        if self.anyOrigin {
            return [ResponseField("access-control-allow-origin", "*")]
        }
        // The configured origin, which the request's equals but for case (a browser sends it lower-case).
        var fields = [ResponseField("access-control-allow-origin", origin), ResponseField("vary", "origin")]
        if self.credentials {
            fields.append(ResponseField("access-control-allow-credentials", "true"))
        }
        return fields
    }
}

extension String {
    fileprivate func trimmingCharacters(in set: String) -> String {
        var slice = Substring(self)
        while let first = slice.first, set.contains(first) { slice.removeFirst() }
        while let last = slice.last, set.contains(last) { slice.removeLast() }
        return String(slice)
    }
}
