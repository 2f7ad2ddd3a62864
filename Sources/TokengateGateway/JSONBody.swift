//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import Foundation

/// Rewriting a JSON request body to take the token field out.
enum JSONBody {
    /// The body re-serialized without the top-level member `field`, or `nil` when it is not a JSON object
    /// (the extractor has already refused such bodies, so `nil` here means "forward unchanged").
    static func removing(_ field: String, from bytes: [UInt8]) -> [UInt8]? {
        guard var object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any] else {
            return nil
        }
        object.removeValue(forKey: field)
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.withoutEscapingSlashes])
        else { return nil }
        return Array(data)
    }
}
