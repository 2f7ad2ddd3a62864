//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// What an app callback delivered (``TokenCapture/deliveryFromCallback(_:callback:expectedState:now:)``): the
/// token itself (the flow without PKCE), or a PKCE authorization code to redeem with the verifier
/// (``CodeRedemption``).
public enum CallbackDelivery: Sendable, Hashable {
    case token(StoredToken)
    case code(AuthorizationCode)
}
