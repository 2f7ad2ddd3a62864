//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

import TokengateVersion

/// Which tokengate answers on the admin listener: `GET /version` for a script or a fleet inventory, and the
/// `tokengate_build_info` gauge for a dashboard that must tell the instances of a rolling upgrade apart.
///
/// Both sit behind the admin secret like `/metrics` (only the probes are open): a version number tells an
/// attacker which advisories apply, and the probes' callers never need it.
package enum AdminVersion {
    /// The body of `GET /version`.
    package static let json = "{\"version\":\"\(TokengateVersion.string)\"}"

    /// The Prometheus convention for build information: a gauge fixed at 1 whose labels carry the facts, so a
    /// query can join it to any other series by instance.
    package static let buildInfoMetric = """
        # HELP tokengate_build_info The tokengate version this process runs (always 1).
        # TYPE tokengate_build_info gauge
        tokengate_build_info{version="\(TokengateVersion.string)"} 1

        """
}
