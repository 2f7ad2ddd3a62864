//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateHTTP

/// `tokengate_tls_certificate_expiry_timestamp_seconds{listener, certificate}`: when each certificate the
/// public listeners serve stops being valid (its leaf's `notAfter`), so an alert can fire weeks before a
/// renewal that failed silently takes the site down. Written at each scrape from the generation serving, so a
/// reload that swapped a certificate shows the new one and the replaced one's series is gone.
enum CertificateExpiryMetric {
    struct Certificate {
        /// The listener's address as configured.
        let listener: String
        /// The certificate file as the configuration names it.
        let file: String
        let notAfter: Int64
    }

    static let name = "tokengate_tls_certificate_expiry_timestamp_seconds"

    static func exposition(_ certificates: [Certificate]) -> String {
        guard !certificates.isEmpty else { return "" }
        var text = "# HELP \(Self.name) When each served certificate expires (its notAfter), as UNIX time.\n"
        text += "# TYPE \(Self.name) gauge\n"
        for certificate in certificates {
            text += "\(Self.name){listener=\"\(Self.escaped(certificate.listener))\",certificate=\"\(Self.escaped(certificate.file))\"} \(certificate.notAfter)\n"
        }
        return text
    }

    /// A label value as the text format needs it: backslash, quote and newline escaped.
    static func escaped(_ value: String) -> String {
        var text = ""
        for character in value {
            switch character {
            case "\\": text += "\\\\"
            case "\"": text += "\\\""
            case "\n": text += "\\n"
            default: text.append(character)
            }
        }
        return text
    }
}
