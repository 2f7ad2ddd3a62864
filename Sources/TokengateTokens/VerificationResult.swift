//===----------------------------------------------------------------------===//
// This source file is part of tokengate. Licensed under the Apache License v2.0.
//===----------------------------------------------------------------------===//

/// The outcome of one verification, returned by value (no existential, no error throwing on the hot path).
public enum VerificationResult: Sendable, Hashable {
    case valid(VerifiedToken)
    case invalid(RejectionReason)
}
