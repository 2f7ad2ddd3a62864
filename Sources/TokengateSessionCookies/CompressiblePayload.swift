//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import CTokengateZlib

/// The payload shape itsdangerous and `django.core.signing` share: URL-safe base64 of compact JSON, or `.` then
/// URL-safe base64 of that JSON compressed with zlib, whichever is shorter.
enum CompressiblePayload {
    /// Decodes the payload text into `scratch` (at least `text.count` bytes), inflates it when compressed
    /// (into a separate buffer of ``SessionCookieLimits/maxInflatedLength`` bytes, taken only then), and reads
    /// the fields at `pointers`.
    static func read(
        _ text: UnsafeRawBufferPointer, scratch: UnsafeMutableRawPointer, pointers: [SessionJSONPointer],
        hasAPIFlag: Bool
    ) -> SessionRead {
        let compressed = text.first == UInt8(ascii: ".")
        let encoded = compressed ? UnsafeRawBufferPointer(rebasing: text[1...]) : text
        guard !encoded.isEmpty, let decoded = SessionBase64.urlSafeUnpadded.decode(encoded, into: scratch) else {
            return .rejected(.badEncoding)
        }
        guard compressed else {
            return Self.scan(scratch.assumingMemoryBound(to: UInt8.self), decoded, pointers, hasAPIFlag)
        }
        return withUnsafeTemporaryAllocation(byteCount: SessionCookieLimits.maxInflatedLength, alignment: 16) {
            output -> SessionRead in
            switch BoundedInflate.inflate(UnsafeRawBufferPointer(start: scratch, count: decoded), into: output) {
            case .inflated(let inflated):
                return Self.scan(output.baseAddress!.assumingMemoryBound(to: UInt8.self), inflated, pointers, hasAPIFlag)
            case .tooLarge:
                return .rejected(.inflatedTooLarge)
            case .invalid:
                return .rejected(.badCompression)
            }
        }
    }

    private static func scan(
        _ json: UnsafeMutablePointer<UInt8>, _ length: Int, _ pointers: [SessionJSONPointer], _ hasAPIFlag: Bool
    ) -> SessionRead {
        guard length > 0, json[0] == UInt8(ascii: "{") else { return .rejected(.notJSON) }
        var scanner = SessionJSONScanner(base: json, count: length, pointers: pointers)
        if let failure = scanner.scan() { return .rejected(RailsCookieCodec.rejection(failure)) }
        return SessionFieldReader.read(scanner, first: 0, hasAPIFlag: hasAPIFlag)
    }

    /// The payload text for `json`: compressed when that is shorter by more than one byte (the `.` it costs), as
    /// both itsdangerous and Django decide.
    static func make(_ json: [UInt8]) -> [UInt8] {
        var bound = compressBound(uLong(json.count))
        var compressed = [UInt8](repeating: 0, count: Int(bound))
        let status = compressed.withUnsafeMutableBytes { out in
            json.withUnsafeBytes { input in
                compress2(
                    out.baseAddress!.assumingMemoryBound(to: Bytef.self), &bound,
                    input.baseAddress!.assumingMemoryBound(to: Bytef.self), uLong(json.count), Z_BEST_COMPRESSION)
            }
        }
        if status == Z_OK, Int(bound) < json.count - 1 {
            compressed.removeSubrange(Int(bound)...)
            return [UInt8(ascii: ".")] + SessionBase64.urlSafeUnpadded.encode(compressed)
        }
        return SessionBase64.urlSafeUnpadded.encode(json)
    }
}
