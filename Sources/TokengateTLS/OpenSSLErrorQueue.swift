//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import CTokengateOpenSSL

/// Reads OpenSSL's thread-local error queue into a short reason string for logs.
///
/// Only `ERR_reason_error_string` texts are used (e.g. `no shared cipher`, `wrong version number`). The
/// per-entry "data" strings are deliberately ignored: they can hold file contents or peer-controlled bytes.
/// The queue is per thread, so callers must call `ERR_clear_error()` before the OpenSSL call whose failure
/// they want to describe and drain right after it, on the same thread, with no other OpenSSL call in between.
enum OpenSSLErrorQueue {
    /// Drains the queue and returns its distinct reasons joined by `"; "`, or `fallback` when it is empty.
    static func drainReasons(fallback: String) -> String {
        var reasons: [String] = []
        // Bounded: a corrupt state could in theory keep producing entries; 16 is far more than any real stack.
        for _ in 0..<16 {
            let code = ERR_get_error()
            if code == 0 {
                break
            }
            let reason: String
            if let text = ERR_reason_error_string(code) {
                reason = String(cString: text)
            } else {
                reason = "error \(ERR_GET_REASON(code))"
            }
            if !reasons.contains(reason) {
                reasons.append(reason)
            }
        }
        ERR_clear_error()
        return reasons.isEmpty ? fallback : reasons.joined(separator: "; ")
    }
}
