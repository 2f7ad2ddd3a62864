#!/usr/bin/env bash
# Cutoffs at scale: the persistent snapshot map and the SQLite change feed with many users, on this machine only.
#
#   scripts/cutoff-scale.sh [USERS]        (default 10000000; REVOCATIONS=300 RATE=100 by default)
#
# Runs the opt-in measurements of the test suite in a release build (they never run in scripts/test.sh):
# - SnapshotScaleMeasurement: resident bytes per user, lookup and one user's change, for the persistent map
#   (CutoffUserMap) and, for comparison, the dictionary of two optional times it replaced; short and UUID ids.
# - CutoffSyncScaleMeasurement: a SQLite store of USERS rows (filled by Python's sqlite3), the sync service's
#   first load (a gateway's start) and its resident memory, then REVOCATIONS revocations committed by another
#   process at RATE per second while the service follows the change feed: the time from each commit to the
#   snapshot that enforces it (p50, p99, max).
# Everything is bounded: the whole run is stopped after 20 minutes. Figures go to stdout, prefixed SCALE;
# docs/operations.md ("Sizing the cutoff snapshot") says what was measured here.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/opt/swift/usr/bin:$PATH
users="${1:-10000000}"
case "$users" in ''|*[!0-9]*) echo "usage: $0 [USERS]" >&2; exit 64 ;; esac
export TOKENGATE_SCALE_USERS="$users"
export TOKENGATE_SCALE_REVOCATIONS="${REVOCATIONS:-300}"
export TOKENGATE_SCALE_RATE="${RATE:-100}"
timeout 1200 swift test -c release --filter 'SnapshotScaleMeasurement|CutoffSyncScaleMeasurement' 2>&1 \
    | grep -E '^SCALE|passed|failed|error:'
