#!/usr/bin/env bash
# The test command (README, and exactly what .ci/run calls): installs what is missing, builds, and runs
# the whole suite — unit tests, handler tests, and the integration tests that drive the real gateway
# over loopback with curl, openssl s_client and the independent Python token implementation.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"
scripts/install-deps.sh test
swift build --build-tests
swift test --skip-build
