#!/usr/bin/env bash
# The newcomer's first command: installs what is missing, builds, and runs the gateway on its embedded
# default (a generated dev certificate and keys in .dev/, a SQLite cutoff store, a demo backend), then
# prints a curl line with a freshly minted token. Ctrl-C stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"
scripts/install-deps.sh build
swift build -c release --product tokengate
exec .build/release/tokengate dev "$@"
