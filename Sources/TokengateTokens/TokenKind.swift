//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// The two kinds of token (DESIGN §1): an *api* token (`api_only: true`) for the mobile apps, valid until a
/// cutoff (or its own `exp`) ends it; a *session* token, the website's login cookie, which also expires after
/// the session max-age.
public enum TokenKind: String, Sendable, Hashable {
    case api
    case session
}
