#!/usr/bin/env bash
# Runs the token-minting examples of docs/examples/ and checks that tokengate accepts what each mints.
#
# Usage: scripts/test-examples.sh [TOKENGATE_BINARY]   (default: the debug build)
# For each language installed (scripts/install-deps.sh test installs them all from Debian 12): mint an api token
# for a user id with a quote, an apostrophe and a non-ASCII letter (JSON escaping), then
#   - `tokengate token verify --accept api` with the key set the secret came from: valid, that user, kind api,
#     `iat` within 10 s of now, the kid as given;
#   - the same token against another key set: refused as bad_signature;
#   - the same token on a session-only check: refused as wrong_kind (the example sets api_only: true).
# Exit status: 0 when every check passed, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
export PATH="/opt/swift/usr/bin:$PATH"
tokengate="${1:-${TOKENGATE_BIN:-$(swift build --show-bin-path)/tokengate}}"
examples="$repo/docs/examples"
work="$(mktemp -d /tmp/tokengate-examples.XXXXXX)"
trap 'rm -rf "$work"' EXIT
failures=0
ok() { echo "  ok    $*"; }
bad() { echo "  FAIL  $*"; failures=$((failures + 1)); }
skip() { echo "  skip  $*"; }

"$tokengate" keygen --alg HS256 --kid site-2026 --out "$work/keys" > /dev/null
"$tokengate" keygen --alg HS256 --kid site-2026 --out "$work/other" > /dev/null
# The raw secret, as an hmac_file holds it, from the JWK's base64url "k" (with a trailing newline, which every
# example must ignore as tokengate does).
/usr/bin/python3 - "$work/keys/private.jwks" "$work/secret" <<'PY'
import base64, json, sys
k = json.load(open(sys.argv[1]))["keys"][0]["k"]
open(sys.argv[2], "wb").write(base64.urlsafe_b64decode(k + "=" * (-len(k) % 4)) + b"\n")
PY
user="o'brien \"josé\""
export GOCACHE="$work/go-cache" GOPATH=/usr/share/gocode GO111MODULE=off

check() {
  local language="$1"; shift
  local started token result now
  started="$(date +%s)"
  if ! token="$("$@" "$work/secret" "$user" site-2026 2> "$work/err")"; then
    sed 's/^/        /' "$work/err" | tail -5; bad "$language: the example failed"; return
  fi
  result="$("$tokengate" token verify --keys "$work/keys/public.jwks" --accept api -- "$token" || true)"
  now="$(date +%s)"
  if /usr/bin/python3 -c '
import json, sys
r = json.loads(sys.argv[1]); user = sys.argv[2]; started, now = int(sys.argv[3]), int(sys.argv[4])
sys.exit(0 if r.get("sub") == user and r.get("kind") == "api" and r.get("kid") == "site-2026" and started - 10 <= r.get("iat", 0) <= now + 1 else 1)
' "$result" "$user" "$started" "$now"; then
    ok "$language: token verify --accept api: $result"
  else bad "$language: token verify: $result"; fi
  result="$("$tokengate" token verify --keys "$work/other/public.jwks" -- "$token" || true)"
  if [ "$result" = '{"error":"invalid_token","reason":"bad_signature"}' ]; then ok "$language: another key set: bad_signature"
  else bad "$language: another key set: $result"; fi
  result="$("$tokengate" token verify --keys "$work/keys/public.jwks" --accept session -- "$token" || true)"
  if [ "$result" = '{"error":"invalid_token","reason":"wrong_kind"}' ]; then ok "$language: a session-only check: wrong_kind"
  else bad "$language: a session-only check: $result"; fi
}

echo "== token-minting examples (docs/examples)"
if /usr/bin/python3 -c 'import jwt' 2> /dev/null; then check "Python (PyJWT $(/usr/bin/python3 -c 'import jwt; print(jwt.__version__)'))" /usr/bin/python3 "$examples/mint.py"
else skip "Python: python3-jwt is not installed"; fi
if command -v ruby > /dev/null && ruby -e 'require "jwt"' 2> /dev/null; then check "Ruby (ruby-jwt $(ruby -rjwt -e 'print JWT::VERSION::STRING' 2> /dev/null || echo '?'))" ruby "$examples/mint.rb"
else skip "Ruby: ruby-jwt is not installed"; fi
if command -v go > /dev/null && [ -d /usr/share/gocode/src/github.com/golang-jwt/jwt ]; then check "Go ($(go version | awk '{print $3}'), golang-jwt)" go run "$examples/mint.go"
else skip "Go: golang-go or golang-github-golang-jwt-jwt-dev is not installed"; fi
if command -v node > /dev/null; then check "JavaScript (Node.js $(node --version), node:crypto)" node "$examples/mint.mjs"
else skip "JavaScript: nodejs is not installed"; fi
if command -v php > /dev/null; then check "PHP ($(php -r 'echo PHP_VERSION;'), hash_hmac)" php "$examples/mint.php"
else skip "PHP: php-cli is not installed"; fi
if command -v java > /dev/null; then check "Java ($(java -version 2>&1 | head -1 | cut -d'"' -f2), javax.crypto)" java "$examples/Mint.java"
else skip "Java: a JDK is not installed"; fi

if [ "$failures" -eq 0 ]; then echo "test-examples: all checks passed"
else echo "test-examples: $failures check(s) failed"; exit 1; fi
