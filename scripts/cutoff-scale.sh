#!/usr/bin/env bash
# Cutoffs at scale: the persistent snapshot map, the SQLite change feed and PostgreSQL's (two instances), with many
# users, on this machine only (loopback; a throwaway PostgreSQL from scripts/postgres-test-server.sh).
#
#   scripts/cutoff-scale.sh [USERS]        (default 10000000; REVOCATIONS=300 RATE=100 by default)
#
# Runs the opt-in measurements of the test suite in a release build (they never run in scripts/test.sh):
# - SnapshotScaleMeasurement: resident bytes per user, lookup and one user's change, for the persistent map
#   (CutoffUserMap) and, for comparison, the dictionary of two optional times it replaced; short and UUID ids.
# - CutoffSyncScaleMeasurement, SQLite: a store of USERS rows (filled by Python's sqlite3), the sync service's
#   first load (a gateway's start) and its resident memory, then REVOCATIONS revocations committed by another
#   process (the path of `tokengate revoke`) at RATE per second while the service follows the change feed: the
#   time from each commit to the snapshot that enforces it (p50, p99, max).
# - CutoffSyncScaleMeasurement, PostgreSQL (copy mode): a table of USERS rows, two instances (two gateways) that
#   start on it, then REVOCATIONS revocations written through one of them at RATE per second (the admin API's
#   path: commit, NOTIFY) and timed until the other enforces each.
# Everything is bounded: the whole run is stopped after 25 minutes. Figures go to stdout, prefixed SCALE;
# docs/operations.md ("Sizing the cutoff snapshot") says what was measured here.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/opt/swift/usr/bin:$PATH
users="${1:-10000000}"
case "$users" in ''|*[!0-9]*) echo "usage: $0 [USERS]" >&2; exit 64 ;; esac
export TOKENGATE_SCALE_USERS="$users"
export TOKENGATE_SCALE_REVOCATIONS="${REVOCATIONS:-300}"
export TOKENGATE_SCALE_RATE="${RATE:-100}"
export TOKENGATE_TEST_POSTGRES_URL="$(bash scripts/postgres-test-server.sh start)"
trap 'bash scripts/postgres-test-server.sh stop >/dev/null 2>&1 || true' EXIT
timeout 1500 swift test -c release --scratch-path .build-release --filter 'SnapshotScaleMeasurement|CutoffSyncScaleMeasurement' 2>&1 \
    | grep -E '^SCALE|passed|failed|error:'
