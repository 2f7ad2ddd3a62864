//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

internal import CTokengateOpenSSL

// MARK: Configured server names the certificate does not cover.

extension TLSServerContext {
    /// The names of `serverNames` that the leaf certificate in `certificatePath` is not valid for.
    ///
    /// `server_names` only chooses which certificate answers an SNI name; a client asking for a name its
    /// certificate does not hold still gets that certificate, and then fails its own name check. That is a
    /// configuration mistake (a typo, a certificate renewed without a name) which nothing else reports
    /// until clients fail, so ``GatewayServer`` warns about it at start and in `check-config`.
    ///
    /// Checked with `X509_check_host` (DNS subjectAltNames, the certificate's wildcards; the subject CN only
    /// when there are none, as clients do). A configured wildcard `*.example.com` is covered when a name
    /// one label under it is. Empty when the file cannot be read or parsed: loading the certificate
    /// reports that, as an error.
    public static func serverNamesNotCovered(_ serverNames: [String], certificatePath: String) -> [String] {
        guard !serverNames.isEmpty,
            let bytes = try? PEMFile.readAll(path: certificatePath), PEMFile.looksLikePEM(bytes),
            let chain = try? Self.parseCertificates(bytes, path: certificatePath)
        else {
            return []
        }
        defer { chain.forEach { X509_free($0) } }
        return serverNames.filter { !Self.certificate(chain[0], covers: $0) }
    }

    private static func certificate(_ leaf: OpaquePointer, covers name: String) -> Bool {
        // A label no certificate would name on its own: only a wildcard of the certificate matches it.
        let probe = name.hasPrefix("*.") ? "tokengate-sni-probe" + name.dropFirst(1) : Substring(name)
        return String(probe).withCString { X509_check_host(leaf, $0, strlen($0), 0, nil) == 1 }
    }
}
