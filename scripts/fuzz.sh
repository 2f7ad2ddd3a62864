#!/usr/bin/env bash
# Fuzzes the parsers a client or an operator's file reaches first, with libFuzzer (Fuzz/, one executable per
# parser): builds them with `-sanitize=fuzzer,address`, seeds each corpus from the test fixtures, checks that
# inputs over the limits fail in bounded time and memory, then runs each target for a bounded time.
#
# Usage: scripts/fuzz.sh [--seconds N] [--targets "FuzzTokenVerifier ..."] [--jobs N] [--no-build]
#   --seconds N  how long each target fuzzes (default 10; scripts/test.sh runs 3)
#   --targets    which targets (default: all of them, listed below)
#   --jobs N     run N targets side by side (default 1: the machine is shared)
#   --no-build   use the targets already built
#
# Targets:
#   FuzzTokenVerifier  raw bytes as a token, against every fixture key set (TokengateTokens)
#   FuzzTokenClaims    raw bytes as a token's header and payload JSON, signed by the harness (TokengateTokens)
#   FuzzJSONBody       raw bytes as a JSON request body with a token field, scanned and stripped (TokengateTokens)
#   FuzzConfiguration  raw bytes as a configuration file (TokengateConfig)
#   FuzzHTTP1Request   a client's bytes on one connection, read whole, byte by byte and in chunks: the same
#                      requests either way (HTTP1RequestParser)
#   FuzzHTTP1Response  a backend's bytes on one connection, likewise (HTTP1ResponseParser)
#   FuzzCookieHeader   a cookie name and Cookie header values, read and stripped (CookieHeader)
#   FuzzFormBody       a form body, read and stripped of its token field (FormURLEncoded)
#   FuzzProxyProtocol  a connection's first bytes on a PROXY protocol listener, whole and prefix by prefix
#                      (ProxyProtocolParser)
#
# Corpora grow in Fuzz/.corpus/<target> (kept between runs, never committed). A crash, a timeout (-timeout) or
# an input that needs more than -rss_limit_mb stops the run with the input saved as Fuzz/.artifacts/<target>-*,
# and the script fails: minimise it (`<binary> -minimize_crash=1 -runs=10000 <file>`), turn it into a test in
# the module's own test target, fix it, and keep the test.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"
# A finding is reported by libFuzzer and AddressSanitizer; Swift's own backtracer would only add noise.
export SWIFT_BACKTRACE=enable=no

SECONDS_PER_TARGET=10
# The sanitized build they share: TokengateTokens, TokengateHTTP and TokengateConfig with SwiftNIO's NIOCore and
# NIOHTTP1 and Yams; nothing with sockets, TLS or metrics.
ALL_TARGETS="FuzzTokenVerifier FuzzTokenClaims FuzzJSONBody FuzzConfiguration FuzzHTTP1Request FuzzHTTP1Response
    FuzzCookieHeader FuzzFormBody FuzzProxyProtocol"
TARGETS="$ALL_TARGETS"
JOBS=1
BUILD=1
while [ $# -gt 0 ]; do
    case "$1" in
        --seconds) SECONDS_PER_TARGET="$2"; shift 2 ;;
        --targets) TARGETS="$2"; shift 2 ;;
        --jobs) JOBS="$2"; shift 2 ;;
        --no-build) BUILD=0; shift ;;
        *) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    esac
done

# Per-input bounds, the same for fuzzing and for the over-the-limit inputs below. Every parser refuses more than
# its limit (8 KiB tokens, 16 KiB request heads, 80 KiB response heads, 1 MiB configurations) as it reads, so an
# input taking 10 s or 512 MiB is a finding: the slowest over-the-limit input takes 2.5 s on a quiet machine in
# this unoptimised, sanitized build (and several times that on a loaded shared one, hence the margin; libFuzzer's
# timeout is wall-clock), typical ones a few milliseconds; anything worse than linear in the input would take
# minutes at these sizes.
TIMEOUT=10
RSS_LIMIT_MB=512
declare -A MAX_LEN=(
    [FuzzTokenVerifier]=9000     # past TokenVerifier.maxTokenLength (8192), so the length check is fuzzed too
    [FuzzTokenClaims]=7000       # header + payload that still encode under 8192 bytes
    [FuzzJSONBody]=65536         # limits.max_token_body_bytes' default (64 KiB)
    [FuzzConfiguration]=65536    # real configurations are a few KiB; 1 MiB is checked below, unfuzzed
    [FuzzHTTP1Request]=20000     # past max_header_bytes' default (16 KiB)
    [FuzzHTTP1Response]=90000    # past the response head limit (80 KiB)
    [FuzzCookieHeader]=16384
    [FuzzFormBody]=65536         # limits.max_token_body_bytes' default (64 KiB)
    [FuzzProxyProtocol]=4096     # past the v2 header's limit (2048)
)

ROOT="$PWD"
FUZZ="$ROOT/Fuzz"
CORPUS="$FUZZ/.corpus"
ARTIFACTS="$FUZZ/.artifacts"
LIMITS="$FUZZ/.limits"
mkdir -p "$CORPUS" "$ARTIFACTS" "$LIMITS"

started=$(date +%s)
if [ "$BUILD" = 1 ]; then
    echo "fuzz.sh: building the targets with -sanitize=fuzzer,address"
    # All of them in one build (one plan, the modules compiled once, both cores busy); a product at a time when
    # only some are asked for. gold warns once per ASan register-check symbol it cannot export: noise.
    products=()
    [ "$TARGETS" = "$ALL_TARGETS" ] || for target in $TARGETS; do products+=("--product $target"); done
    for product in "${products[@]:-}"; do
        # shellcheck disable=SC2086
        (cd "$FUZZ" && swift build $product \
            -Xswiftc -sanitize=fuzzer,address -Xcc -fsanitize=fuzzer-no-link,address 2>&1) \
            | grep -v "warning: Cannot export local symbol" | grep -E "error|warning:|Compiling|complete" | tail -5
    done
fi
BIN="$(cd "$FUZZ" && swift build --show-bin-path)"
built=$(date +%s)
echo "fuzz.sh: build $((built - started)) s"

# Seeds, from the fixtures the unit tests use (so the fuzzer starts from inputs that reach deep).
python3 - "$ROOT" "$CORPUS" <<'PY'
import base64, hashlib, json, os, re, sys
root, corpus = sys.argv[1], sys.argv[2]

def seed(target, data):
    if isinstance(data, str):
        data = data.encode()
    folder = os.path.join(corpus, target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "seed-" + hashlib.sha1(data).hexdigest()), "wb") as out:
        out.write(data)

def unb64(part):
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))

fixtures = json.load(open(os.path.join(root, "Tests/TokengateTokensTests/Fixtures/test-only-tokens.json")))
for case in fixtures["cases"]:
    token = case["token"]
    seed("FuzzTokenVerifier", token)
    parts = token.split(".")
    if len(parts) == 3:
        try:
            header, payload = unb64(parts[0]), unb64(parts[1])
        except Exception:
            continue  # the deliberately broken encodings are verifier seeds only
        seed("FuzzTokenClaims", header + b"\n" + payload)
        if payload.startswith(b"{") and payload.endswith(b"}"):
            seed("FuzzJSONBody", payload)
            seed("FuzzJSONBody", b'{"access_token":"' + token.encode() + b'",' + payload[1:])
requests = [
    "GET / HTTP/1.1\r\nHost: a\r\n\r\n",
    "POST /v1/x?y=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhelloGET /b HTTP/1.1\r\nHost: a\r\n\r\n",
    "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n0\r\nX-T: 1\r\n\r\n",
    "\r\nGET http://a/b HTTP/1.0\r\nConnection: keep-alive\r\nCookie: a=b\r\n\r\n",
    "PUT /u HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
]
for request in requests:
    seed("FuzzHTTP1Request", request)
responses = [
    "\x00HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 204 No Content\r\n\r\n",
    "\x01HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\n",
    "\x02HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    "\x04HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\nuntil the close",
    "\x06HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n",
]
for response in responses:
    seed("FuzzHTTP1Response", response)
# The requests and responses the parser tests read (their valid lists and the ambiguities they refuse): Swift
# string literals without interpolation, unescaped.
def swift_strings(path):
    text = open(os.path.join(root, path)).read()
    found = []
    for literal in re.findall(r'"((?:[^"\\\n]|\\.)*)"', text):
        if "\\(" in literal or "HTTP/" not in literal:
            continue
        found.append(re.sub(r'\\(u\{([0-9a-fA-F]+)\}|.)', lambda m: chr(int(m.group(2), 16)) if m.group(2)
                            else {"r": "\r", "n": "\n", "t": "\t", "0": "\0"}.get(m.group(1), m.group(1)), literal))
    return found
for request in swift_strings("Tests/TokengateHTTPTests/HTTP1RequestParserTests.swift"):
    seed("FuzzHTTP1Request", request.encode())
for response in swift_strings("Tests/TokengateHTTPTests/HTTP1ResponseParserTests.swift"):
    if response.startswith("HTTP/"):
        seed("FuzzHTTP1Response", b"\x00" + response.encode())
for cookies in ["auth_token\nauth_token=a.b.c; other=1", "s\n s=\"q\" ;t=2; s=3\nu=4;s", "a\n=; a; a=b=c"]:
    seed("FuzzCookieHeader", cookies)
for header in [b"PROXY TCP4 192.0.2.1 198.51.100.1 56324 443\r\n\x16\x03", b"PROXY TCP6 2001:db8::1 ::1 1 2\r\n",
               b"PROXY UNKNOWN\r\n",
               b"\r\n\r\n\x00\r\nQUIT\n\x21\x11\x00\x12\xc0\x00\x02\x01\x0a\x00\x00\x01\x1f\x90\x01\xbb\x05\x00\x03abc",
               b"\r\n\r\n\x00\r\nQUIT\n\x20\x00\x00\x00"]:
    seed("FuzzProxyProtocol", header)
for form in ["access_token=a.b.c&x=1", "x=1;access_token=2&access_token=%41", "a&&=&access%5Ftoken=+%20&b=%zz"]:
    seed("FuzzFormBody", form)
for body in ['{}', '{"access_token":"a.b.c"}', '{"access_token":"a","access_token":"b"}',
             '{"acc\\u0065ss_token":"x","n":[1.5e3,-0,true,false,null,{"a":"\\ud83d\\ude00"}]}',
             ' {"a":{"access_token":"nested"},"access_token":"top"} ']:
    seed("FuzzJSONBody", body)

# Configurations: the shipped ones, the benchmark ones, the Kubernetes ones (base and overlay), and every
# YAML example in the docs.
configs = ["Config/tokengate.yaml", "Config/dev.yaml", "scripts/bench/tokengate.yaml",
           "scripts/bench/tokengate-idle.yaml", "deploy/docker/tokengate.yaml", "deploy/systemd/tokengate.yaml",
           "deploy/kubernetes/base/tokengate.yaml", "deploy/kubernetes/overlays/production/tokengate.yaml"]
for path in configs:
    seed("FuzzConfiguration", open(os.path.join(root, path), "rb").read())
for doc in sorted(os.listdir(os.path.join(root, "docs"))):
    if doc.endswith(".md"):
        text = open(os.path.join(root, "docs", doc)).read()
        for example in re.findall(r"```yaml\n(.*?)```", text, re.S):
            seed("FuzzConfiguration", example)
PY

# Inputs over the limits, and the shapes that cost a naive parser the most: each must be refused (or read) within
# -timeout seconds and -rss_limit_mb, run once through the target (libFuzzer runs files given as arguments once).
python3 - "$LIMITS" <<'PY'
import os, sys
limits = sys.argv[1]
def write(target, name, data):
    folder = os.path.join(limits, target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, name), "wb") as out:
        out.write(data if isinstance(data, bytes) else data.encode())

write("FuzzTokenVerifier", "one-mebibyte", "a" * (1 << 20))
write("FuzzTokenVerifier", "just-over-the-limit", "eyJhbGciOiJIUzI1NiJ9." + "A" * 8160 + ".AAAA")
write("FuzzTokenVerifier", "many-dots", "." * 8192)
write("FuzzTokenClaims", "deep-array-claim", '{"alg":"HS256"}\n{"sub":"a","iat":1,"x":' + "[" * 6000)
write("FuzzTokenClaims", "deep-object-header", '{"a":' * 1200 + "\n{}")
write("FuzzTokenClaims", "long-escapes", '{"alg":"HS256"}\n{"sub":"' + "\\u0041" * 1000 + '","iat":1}')
# A body is scanned only within limits.max_token_body_bytes (64 KiB by default, 1 MiB at most): the worst
# shapes at the default, and one past the cap of nesting.
write("FuzzJSONBody", "deep-nesting", '{"a":' + "[" * 65000)
write("FuzzJSONBody", "many-members", "{" + ",".join(f'"k{i}":{i}' for i in range(7000)) + "}")
write("FuzzJSONBody", "many-tokens", "{" + ",".join('"access_token":"x"' for _ in range(3500)) + "}")
write("FuzzJSONBody", "long-escapes", '{"access_token":"' + "\\u0041" * 10900 + '"}')
write("FuzzHTTP1Request", "huge-head", "GET / HTTP/1.1\r\n" + "X-A: " + "a" * (1 << 20) + "\r\n\r\n")
write("FuzzHTTP1Request", "many-fields", "GET / HTTP/1.1\r\n" + "A: b\r\n" * 100000 + "\r\n")
write("FuzzHTTP1Request", "many-empty-lines", "\r\n" * 500000)
write("FuzzHTTP1Request", "long-chunk-line", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n1;" + "e" * 100000)
write("FuzzHTTP1Response", "huge-head", "\x00HTTP/1.1 200 OK\r\n" + "X-A: " + "a" * (1 << 20) + "\r\n\r\n")
write("FuzzHTTP1Response", "many-interim", "\x00" + "HTTP/1.1 103 Early Hints\r\n\r\n" * 20000)
write("FuzzCookieHeader", "many-cookies", "a\n" + "; ".join(f"c{i}=v" for i in range(4000)))
write("FuzzProxyProtocol", "long-v1-line", "PROXY TCP4 " + "1" * 4000)
write("FuzzProxyProtocol", "v2-announcing-64KiB", b"\r\n\r\n\x00\r\nQUIT\n\x21\x11\xff\xff" + b"\x00" * 4000)
write("FuzzFormBody", "many-pairs", "&".join(f"k{i}=v" for i in range(8000)))
write("FuzzFormBody", "many-semicolons", "x=" + ";" * 65000)
write("FuzzConfiguration", "over-one-mebibyte", "# " + "x" * (1 << 20) + "\n")
write("FuzzConfiguration", "deep-flow-nesting", "listeners: " + "[" * 100000)
write("FuzzConfiguration", "deep-block-nesting", "".join(" " * i + "a:\n" for i in range(2000)))
bomb = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
for level in range(1, 12):
    bomb.append(f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * 10) + "]")
write("FuzzConfiguration", "alias-bomb", "\n".join(bomb) + "\n")
write("FuzzConfiguration", "many-keys", "".join(f"k{i}: {i}\n" for i in range(20000)))
write("FuzzConfiguration", "long-scalar", "listeners: " + "x" * (1000 * 1000) + "\n")
PY

status=0
for target in $TARGETS; do
    begin=$(date +%s%N)
    if ! "$BIN/$target" -timeout="$TIMEOUT" -rss_limit_mb="$RSS_LIMIT_MB" -artifact_prefix="$ARTIFACTS/$target-" \
        "$LIMITS/$target"/* > "$ARTIFACTS/$target-limits.log" 2>&1; then
        echo "fuzz.sh: $target: an input over the limits was not refused in bounded time and memory" >&2
        tail -30 "$ARTIFACTS/$target-limits.log" >&2
        status=1
    fi
    echo "fuzz.sh: $target: $(ls "$LIMITS/$target" | wc -l) over-the-limit inputs in $(( ($(date +%s%N) - begin) / 1000000 )) ms"
done
[ "$status" = 0 ] || exit "$status"

run_target() {
    local target="$1"
    mkdir -p "$CORPUS/$target"
    local log="$ARTIFACTS/$target.log"
    if "$BIN/$target" "$CORPUS/$target" -max_total_time="$SECONDS_PER_TARGET" -max_len="${MAX_LEN[$target]}" \
        -timeout="$TIMEOUT" -rss_limit_mb="$RSS_LIMIT_MB" -artifact_prefix="$ARTIFACTS/$target-" \
        -print_final_stats=1 > "$log" 2>&1; then
        local runs
        runs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')"
        echo "fuzz.sh: $target: $runs inputs in ${SECONDS_PER_TARGET} s, corpus $(ls "$CORPUS/$target" | wc -l), no finding"
    else
        echo "fuzz.sh: $target: FINDING (input saved under Fuzz/.artifacts/$target-*):" >&2
        grep -E "ERROR|SUMMARY|Fatal error|fatal error|Test unit written" "$log" | head -10 >&2
        return 1
    fi
}

running=0
pids=()
for target in $TARGETS; do
    run_target "$target" &
    pids+=($!)
    running=$((running + 1))
    if [ "$running" -ge "$JOBS" ]; then
        wait "${pids[0]}" || status=1
        pids=("${pids[@]:1}")
        running=$((running - 1))
    fi
done
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
echo "fuzz.sh: $(( $(date +%s) - started )) s in all (build $((built - started)) s)"
exit "$status"
