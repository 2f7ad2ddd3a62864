#!/usr/bin/env bash
# Installs the system packages tokengate needs, only those that are missing (Debian 12, as root or with
# sudo). Usage: scripts/install-deps.sh [build|test]
#   build: the two declared system libraries (OpenSSL 3, libnghttp2) and what SwiftPM needs to find them.
#   test:  also the real clients and servers the test suite drives (curl, openssl, nghttp, python3 with
#          cryptography for the independent token implementation).
set -euo pipefail
profile="${1:-build}"

packages=(libssl-dev libnghttp2-dev pkg-config libsqlite3-dev)
if [ "$profile" = "test" ]; then
  packages+=(curl openssl nghttp2-client python3 python3-cryptography procps chromium)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "tokengate: installing system packages: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v swift >/dev/null 2>&1; then
  if [ -x /opt/swift/usr/bin/swift ]; then
    echo "export PATH=/opt/swift/usr/bin:\$PATH" > /dev/null
  else
    echo "tokengate: Swift 6 is needed (https://www.swift.org/install/linux/); 'swift' is not on PATH." >&2
    exit 1
  fi
fi
