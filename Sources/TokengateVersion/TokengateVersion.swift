//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// The version of tokengate: the one place it is written down.
///
/// `tokengate --version`, `tokengate version`, the `serve` startup log line and the admin listener read it from
/// here; `scripts/release.sh` reads the `string` line of this file to name the tarball, the `.deb` and the image
/// tag, so a release can never carry two different numbers. The two formats that cannot read it from here, the
/// Dockerfile's label default and the kustomizations' image tag, spell it out, and `scripts/check-docs.sh` fails
/// when they differ. Semantic versioning: before 1.0, a minor release may change the configuration or the CLI
/// (CHANGELOG.md and docs/upgrading.md say how), a patch release never.
public enum TokengateVersion {
    /// `MAJOR.MINOR.PATCH`, as in CHANGELOG.md.
    public static let string = "0.2.0"
}
