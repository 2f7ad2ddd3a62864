#!/usr/bin/env bash
# A soak of `tokengate serve`: minutes of mixed valid and hostile traffic on loopback, then checks that the
# gateway came through it flat.
#
# Usage: scripts/soak.sh [--minutes N | --seconds N] [--warmup SECONDS] [--bin DIR] [--no-build] [--keep]
#   --minutes N   length of the traffic (default 10); --seconds for a short run (scripts/test.sh: --seconds 60)
#   --warmup S    seconds before the memory trend is measured (default 120, or a third of a run under 6 minutes)
#   --bin DIR     where tokengate and tokengate-bench are (default: `swift build --show-bin-path`, built first
#                 unless --no-build); e.g. .build-asan/debug to soak the AddressSanitizer build
#   --keep        keep the working directory (logs, samples, reports) and print its path
#
# Traffic, all at once and each bounded by the run's length:
#   valid     tokengate-bench over HTTP/1.1 and HTTP/2 at a fixed rate (api tokens, with forged-signature and
#             form-body tokens mixed in; --strict: every answer must be the expected one), h2load over HTTP/2
#             and HTTP/1.1 with one user's token, and curl once a second with a random user's token
#   hostile   request smuggling shapes, slowloris heads, slow bodies, slow readers, connection floods, forged
#             and oversized tokens (scripts/soak/hostile.py), and the HTTP/2 attack scripts (scripts/h2-attacks)
#   faults    a separate upstream (scripts/soak/faulty_backend.py) that closes, resets, answers garbage, cuts
#             bodies short, sends malformed chunks, oversized heads, two answers or nothing in time
#   reloads   SIGHUP once a minute (every 20 s in runs under 3 minutes), alternating two configurations
#   revokes   `tokengate revoke` of another user every 10 s, whose token must then get 401 within 5 s
# Checks (exit 1 when one fails):
#   - resident memory grows less than 1 MB/min (least-squares slope of 5-second samples after the warm-up; runs
#     of 6 minutes or more, shorter ones report the trend only)
#   - open file descriptors come back to the baseline (measured before the traffic) within 30 s of its end
#   - no 5xx to valid traffic (healthy upstream, unrevoked tokens), and every valid answer the expected one
#   - every reload was taken (tokengate_config_reloads_total) and none refused
#   - no token (nor the HMAC secret) in the gateway's output: its log and access log
# Loopback only; every process started is stopped on exit.
set -euo pipefail

DURATION=600
WARMUP=""
BIN=""
BUILD=1
KEEP=0
while [ $# -gt 0 ]; do
    case "$1" in
        --minutes) DURATION=$(( $2 * 60 )); shift 2 ;;
        --seconds) DURATION="$2"; shift 2 ;;
        --warmup) WARMUP="$2"; shift 2 ;;
        --bin) BIN="$2"; shift 2 ;;
        --no-build) BUILD=0; shift ;;
        --keep) KEEP=1; shift ;;
        -h|--help) sed -n '2,33p' "$0"; exit 0 ;;
        *) echo "soak.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
[[ "$DURATION" =~ ^[0-9]+$ ]] && [ "$DURATION" -ge 30 ] && [ "$DURATION" -le 7200 ] || {
    echo "soak.sh: the run is 30 s to 2 h" >&2; exit 2; }
if [ -z "$WARMUP" ]; then
    if [ "$DURATION" -ge 360 ]; then WARMUP=120; else WARMUP=$(( DURATION / 3 )); fi
fi
RELOAD_EVERY=60
[ "$DURATION" -ge 180 ] || RELOAD_EVERY=20

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
export PATH="/opt/swift/usr/bin:$PATH"
log() { printf '[soak %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

missing=()
command -v nginx >/dev/null || missing+=(nginx)
command -v h2load >/dev/null || missing+=(nghttp2-client)
command -v curl >/dev/null || missing+=(curl)
command -v openssl >/dev/null || missing+=(openssl)
if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]}"
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    $SUDO service nginx stop >/dev/null 2>&1 || true   # Debian starts its own daemon; this run starts its own
fi
python3 -c 'import h2' 2>/dev/null || { log "the HTTP/2 attack scripts need Python's h2 (scripts/install-deps.sh test)"; exit 2; }

if [ -z "$BIN" ]; then
    if [ "$BUILD" = 1 ]; then
        log "building tokengate and tokengate-bench"
        (cd "$ROOT" && swift build --product tokengate >/dev/null && swift build --product tokengate-bench >/dev/null)
    fi
    BIN="$(cd "$ROOT" && swift build --show-bin-path)"
fi
TOKENGATE="$BIN/tokengate"
BENCH="$BIN/tokengate-bench"
[ -x "$TOKENGATE" ] && [ -x "$BENCH" ] || { log "missing $TOKENGATE or $BENCH"; exit 2; }

TMP="$(mktemp -d /tmp/tokengate-soak.XXXXXX)"
# shellcheck source=bench/processes.sh
source "$ROOT/scripts/bench/processes.sh"
if [ "$KEEP" = 1 ]; then
    trap 'cleanup_keep' EXIT
    cleanup_keep() { local keep="$TMP"; TMP="/nonexistent-soak-tmp"; cleanup; log "kept $keep"; }
fi

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
PORT="$(free_port)"; ADMIN="$(free_port)"; NGINX_PORT="$(free_port)"; FAULTY_PORT="$(free_port)"

# --- Keys, certificate, tokens, configuration. -------------------------------------------------------------------
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
    -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -keyout "$TMP/key.pem" -out "$TMP/cert.pem" 2>/dev/null
SECRET_B64="$(openssl rand 32 | openssl base64 -A | tr '+/' '-_' | tr -d '=')"
printf '{"keys":[{"kty":"oct","kid":"soak","alg":"HS256","use":"sig","k":"%s"}]}\n' "$SECRET_B64" > "$TMP/hs256.jwks"
chmod 600 "$TMP/hs256.jwks" "$TMP/key.pem"
"$BENCH" mint --key "$TMP/hs256.jwks" --users 200 --kind api --out "$TMP/tokens.txt" >/dev/null
"$BENCH" mint --key "$TMP/hs256.jwks" --users 500 --kind revoked --out "$TMP/victims.txt" >/dev/null
mapfile -t TOKENS < "$TMP/tokens.txt"
mapfile -t VICTIMS < "$TMP/victims.txt"
head -c 1048576 /dev/urandom > "$TMP/big.bin"
mkdir -p "$TMP/www/public"
mv "$TMP/big.bin" "$TMP/www/public/big"

write_config() {  # variant (a or b): the two differ in what a reload may change (a limit, an upstream timeout)
    local body_limit=10MiB response_timeout=2s
    if [ "$1" = b ]; then body_limit=11MiB; response_timeout=3s; fi
    cat > "$TMP/tokengate.yaml.new" <<EOF
listen:
  - address: 127.0.0.1:$PORT
    tls:
      certificates:
        - { cert: cert.pem, key: key.pem }
admin:
  address: 127.0.0.1:$ADMIN
keys:
  - jwks: hs256.jwks
tokens:
  algorithms: [HS256]
cutoffs:
  sqlite: cutoffs.db
upstreams:
  healthy:
    targets: [ "http://127.0.0.1:$NGINX_PORT" ]
    idle_timeout: 2s
  faulty:
    targets: [ "http://127.0.0.1:$FAULTY_PORT" ]
    response_timeout: $response_timeout
    idle_timeout: 2s
routes:
  - path_prefix: /healthy/
    upstream: healthy
    accept: [api]
    sources: [ authorization, "form:access_token" ]
  - path_prefix: /faulty/
    upstream: faulty
    accept: [api]
  # Public, and the catch-all: every other path goes to the healthy backend without a token (the HTTP/2
  # attack scripts' follow-up requests must be answered 200).
  - path_prefix: /
    upstream: healthy
    accept: none
limits:
  max_body_bytes: $body_limit
  idle_timeout: 5s
  request_header_timeout: 5s
  request_body_timeout: 5s
event_loops: 2
# The mix sends badly signed and revoked tokens from one address, at a rate the failed-token guard (1/s after a
# burst of 20) would answer 429: what the soak checks is the answer to each token.
rate_limits: { failed_tokens: off }
log:
  level: info
  access_log: true
EOF
    mv "$TMP/tokengate.yaml.new" "$TMP/tokengate.yaml"
}
write_config a
"$TOKENGATE" check-config "$TMP/tokengate.yaml" > "$TMP/check-config.txt" 2>&1 || {
    cat "$TMP/check-config.txt" >&2; exit 1; }

cat > "$TMP/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $TMP/nginx.pid;
error_log $TMP/nginx-error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $TMP/nginx-body;
    proxy_temp_path $TMP/nginx-proxy;
    fastcgi_temp_path $TMP/nginx-fastcgi;
    uwsgi_temp_path $TMP/nginx-uwsgi;
    scgi_temp_path $TMP/nginx-scgi;
    keepalive_requests 100000;
    client_max_body_size 20m;
    server {
        listen 127.0.0.1:$NGINX_PORT backlog=1024;
        location /public/ { root $TMP/www; }
        location / { default_type text/plain; return 200 "healthy backend\n"; }
    }
}
EOF

# --- Servers. ------------------------------------------------------------------------------------------------------
nginx -p "$TMP" -c "$TMP/nginx.conf" &
STARTED_PIDS+=($!)
wait_port "$NGINX_PORT" "$!" || { log "nginx did not start"; cat "$TMP/nginx-error.log" >&2; exit 1; }
python3 "$ROOT/scripts/soak/faulty_backend.py" "$FAULTY_PORT" &
STARTED_PIDS+=($!)
wait_port "$FAULTY_PORT" "$!" || { log "the faulty backend did not start"; exit 1; }
"$TOKENGATE" serve --config "$TMP/tokengate.yaml" > "$TMP/gateway.out" 2> "$TMP/gateway.err" &
GATEWAY=$!
STARTED_PIDS+=("$GATEWAY")
wait_port "$PORT" "$GATEWAY" || { log "the gateway did not start"; tail -20 "$TMP/gateway.err" >&2; exit 1; }

CURL=(curl -sS -o /dev/null -w '%{http_code}' --max-time 10 --cacert "$TMP/cert.pem" --resolve "localhost:$PORT:127.0.0.1")
URL="https://localhost:$PORT"
fds() { ls "/proc/$GATEWAY/fd" | wc -l; }
rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$GATEWAY/status"; }

# Prime both upstreams and the public route, let idle connections close, then take the baseline.
for path in /healthy/prime /faulty/ok; do
    "${CURL[@]}" -H "Authorization: Bearer ${TOKENS[0]}" "$URL$path" > /dev/null || true
done
"${CURL[@]}" "$URL/public/big" > /dev/null || true
sleep 7
BASE_FDS="$(fds)"
BASE_RSS="$(rss_kib)"
log "gateway pid $GATEWAY on 127.0.0.1:$PORT: $BASE_FDS open files, $((BASE_RSS / 1024)) MiB resident; traffic for $DURATION s (warm-up $WARMUP s)"

START=$(date +%s)
END=$((START + DURATION))
remaining() { echo $(( END - $(date +%s) )); }
mkdir -p "$TMP/reports"
WORKERS=()

# --- Valid traffic. ------------------------------------------------------------------------------------------------
bench_loop() {  # http-version connections streams
    local n=0 chunk
    while [ "$(remaining)" -ge 5 ]; do
        chunk=$(( $(remaining) < 30 ? $(remaining) : 30 ))
        "$BENCH" run --url "https://127.0.0.1:$PORT/healthy/bench" --server-name localhost --cacert "$TMP/cert.pem" --key "$TMP/hs256.jwks" \
            --http "$1" --connections "$2" ${3:+--streams "$3"} --rate 100 --duration "$chunk" --users 200 \
            --mix api=90,bad_signature=5,form=5 --strict --json "$TMP/reports/bench-h$1-$n.json" \
            > "$TMP/reports/bench-h$1-$n.txt" 2>&1 || echo "bench-h$1-$n" >> "$TMP/reports/failed"
        n=$((n + 1))
    done
}
bench_loop 1.1 8 "" & WORKERS+=($!)
bench_loop 2 2 5 & WORKERS+=($!)

h2load_loop() {  # extra-flag name
    local n=0 chunk token
    while [ "$(remaining)" -ge 5 ]; do
        chunk=$(( $(remaining) < 20 ? $(remaining) : 20 ))
        token="${TOKENS[$((RANDOM % ${#TOKENS[@]}))]}"
        timeout $((chunk + 15)) h2load $1 -D "$chunk" -c 2 -m 4 --rps 20 -H "authorization: Bearer $token" \
            "https://127.0.0.1:$PORT/healthy/h2load" > "$TMP/reports/h2load-$2-$n.txt" 2>&1 || true
        n=$((n + 1))
    done
}
h2load_loop "" h2 & WORKERS+=($!)
h2load_loop "--h1" h1 & WORKERS+=($!)

curl_loop() {
    local status version
    while [ "$(remaining)" -ge 2 ]; do
        version=--http2; [ $((RANDOM % 2)) = 0 ] && version=--http1.1
        status="$("${CURL[@]}" "$version" -H "Authorization: Bearer ${TOKENS[$((RANDOM % ${#TOKENS[@]}))]}" \
            "$URL/healthy/curl" || true)"
        echo "$status" >> "$TMP/reports/curl-statuses"
        sleep 1
    done
}
curl_loop & WORKERS+=($!)

# --- Hostile traffic and backend faults. -------------------------------------------------------------------------
for mode in smuggle slowloris slowbody slowread connflood badtokens; do
    python3 "$ROOT/scripts/soak/hostile.py" "$mode" "$PORT" "$((DURATION - 3))" "${TOKENS[1]}" \
        > "$TMP/reports/hostile-$mode.json" 2> "$TMP/reports/hostile-$mode.err" &
    WORKERS+=($!)
done
h2_attacks_loop() {
    local script
    while [ "$(remaining)" -ge 15 ]; do
        for script in ping_flood window_update_flood empty_data_flood made_you_reset rapid_reset continuation_flood \
            oversized_headers; do
            [ "$(remaining)" -ge 15 ] || break
            timeout 15 python3 "$ROOT/scripts/h2-attacks/$script.py" 127.0.0.1 "$PORT" \
                >> "$TMP/reports/h2-attacks.jsonl" 2>> "$TMP/reports/h2-attacks.err" \
                || echo "$script" >> "$TMP/reports/h2-attacks-failed"
            sleep 1
        done
    done
}
h2_attacks_loop & WORKERS+=($!)
faults_loop() {
    local fault
    while [ "$(remaining)" -ge 5 ]; do
        for fault in close reset garbage short chunks headers split twice early ok; do
            "${CURL[@]}" -H "Authorization: Bearer ${TOKENS[2]}" --data-binary "x=1" "$URL/faulty/$fault" \
                >> "$TMP/reports/fault-statuses" 2>/dev/null || true
            echo >> "$TMP/reports/fault-statuses"
            "${CURL[@]}" --http2 -H "Authorization: Bearer ${TOKENS[2]}" "$URL/faulty/$fault" \
                >> "$TMP/reports/fault-statuses" 2>/dev/null || true
            echo >> "$TMP/reports/fault-statuses"
        done
        sleep 0.5
    done
}
faults_loop & WORKERS+=($!)

# --- Reloads and revocations (this shell), samples. -------------------------------------------------------------
RELOADS=0
REVOKES=0
REVOKE_FAILURES=0
VARIANT=a
NEXT_RELOAD=$((START + RELOAD_EVERY))
NEXT_REVOKE=$((START + 5))
printf 'seconds\trss_kib\tfds\n' > "$TMP/samples.tsv"
NEXT_SAMPLE=$START
while [ "$(date +%s)" -lt "$END" ]; do
    now=$(date +%s)
    if [ "$now" -ge "$NEXT_SAMPLE" ]; then
        printf '%s\t%s\t%s\n' "$((now - START))" "$(rss_kib)" "$(fds)" >> "$TMP/samples.tsv"
        NEXT_SAMPLE=$((NEXT_SAMPLE + 5))
    fi
    if [ "$now" -ge "$NEXT_RELOAD" ] && [ "$now" -lt $((END - 5)) ]; then
        if [ "$VARIANT" = a ]; then VARIANT=b; else VARIANT=a; fi
        write_config "$VARIANT"
        kill -HUP "$GATEWAY"
        RELOADS=$((RELOADS + 1))
        NEXT_RELOAD=$((NEXT_RELOAD + RELOAD_EVERY))
    fi
    if [ "$now" -ge "$NEXT_REVOKE" ] && [ "$now" -lt $((END - 8)) ] && [ "$REVOKES" -lt "${#VICTIMS[@]}" ]; then
        victim="${VICTIMS[$REVOKES]}"
        user="bench-revoked-$REVOKES"
        before="$("${CURL[@]}" -H "Authorization: Bearer $victim" "$URL/healthy/victim" || true)"
        "$TOKENGATE" revoke --config "$TMP/tokengate.yaml" --user "$user" >> "$TMP/reports/revoke.txt" 2>&1 || {
            echo "revoke $user failed" >> "$TMP/reports/revoke-failures"; }
        after=""
        for _ in $(seq 1 10); do
            after="$("${CURL[@]}" -H "Authorization: Bearer $victim" "$URL/healthy/victim" || true)"
            [ "$after" = 401 ] && break
            sleep 0.5
        done
        if [ "$before" != 200 ] || [ "$after" != 401 ]; then
            echo "$user: $before before its revocation, $after after" >> "$TMP/reports/revoke-failures"
        fi
        REVOKES=$((REVOKES + 1))
        NEXT_REVOKE=$((NEXT_REVOKE + 10))
    fi
    sleep 0.5
    kill -0 "$GATEWAY" 2>/dev/null || { log "the gateway exited during the soak"; tail -30 "$TMP/gateway.err" >&2; exit 1; }
done
log "traffic ends; waiting for the clients"
for pid in "${WORKERS[@]}"; do wait "$pid" || true; done

# --- Checks. -------------------------------------------------------------------------------------------------------
failed=0
fail() { log "FAIL: $*"; failed=1; }

# File descriptors back to the baseline once the clients have gone and idle connections have timed out.
FINAL_FDS="$(fds)"
for _ in $(seq 1 60); do
    FINAL_FDS="$(fds)"
    [ "$FINAL_FDS" -le "$BASE_FDS" ] && break
    sleep 0.5
done
printf '%s\t%s\t%s\n' "$(( $(date +%s) - START ))" "$(rss_kib)" "$FINAL_FDS" >> "$TMP/samples.tsv"
[ "$FINAL_FDS" -le "$BASE_FDS" ] || fail "open files $FINAL_FDS, baseline $BASE_FDS ($(ls -l /proc/$GATEWAY/fd | tail -n +2 | awk '{print $NF}' | sed 's/[0-9]*//g' | sort | uniq -c | tr '\n' ' '))"

# Memory: the least-squares slope of resident memory after the warm-up.
SLOPE="$(awk -v warm="$WARMUP" -v dur="$DURATION" 'NR > 1 && $1 >= warm && $1 <= dur {
        n++; sx += $1; sy += $2; sxx += $1 * $1; sxy += $1 * $2 }
    END { if (n < 3) { print "none"; exit } d = n * sxx - sx * sx; if (d == 0) { print "none"; exit }
          printf "%.3f", (n * sxy - sx * sy) / d * 60 / 1024 }' "$TMP/samples.tsv")"
PEAK_RSS="$(awk 'NR > 1 && $2 > m { m = $2 } END { print m }' "$TMP/samples.tsv")"
# Only a run of 6 minutes or more is long enough for the trend to mean anything: in its first minutes the heap
# grows to the traffic's working set (a 60-second run sees 3-4 MB/min that levels off). A shorter run reports it.
if [ "$DURATION" -ge 360 ]; then
    if [ "$SLOPE" = none ]; then
        fail "too few memory samples after the warm-up"
    elif awk -v s="$SLOPE" 'BEGIN { exit !(s >= 1.0) }'; then
        fail "resident memory grew $SLOPE MB/min after the warm-up (limit 1 MB/min)"
    fi
fi

# Valid traffic: every tokengate-bench run strict-clean, no 5xx from h2load or curl.
BENCH_SENT=0; BENCH_5XX=0
for report in "$TMP"/reports/bench-*.json; do
    [ -e "$report" ] || continue
    read -r sent five <<< "$(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
print(r["requests_completed"], sum(v for k, v in r["statuses"].items() if k.startswith("5")))' "$report")"
    BENCH_SENT=$((BENCH_SENT + sent)); BENCH_5XX=$((BENCH_5XX + five))
done
[ "$BENCH_SENT" -gt 0 ] || fail "tokengate-bench completed no request"
[ "$BENCH_5XX" = 0 ] || fail "$BENCH_5XX answers 5xx to tokengate-bench's valid requests"
if [ -e "$TMP/reports/failed" ]; then
    for run in $(cat "$TMP/reports/failed"); do
        fail "tokengate-bench run $run had unexpected answers or errors: $(grep -iE 'unexpected|error' "$TMP/reports/$run.txt" | head -3 | tr '\n' ' ')"
    done
fi
H2LOAD_DONE=0; H2LOAD_5XX=0; H2LOAD_OTHER=0
for report in "$TMP"/reports/h2load-*.txt; do
    [ -e "$report" ] || continue
    line="$(grep -E '^status codes:' "$report" || true)"
    [ -n "$line" ] || { fail "h2load printed no status codes: $(tail -3 "$report" | tr '\n' ' ')"; continue; }
    read -r two three four five <<< "$(echo "$line" | sed -E 's/status codes: ([0-9]+) 2xx, ([0-9]+) 3xx, ([0-9]+) 4xx, ([0-9]+) 5xx/\1 \2 \3 \4/')"
    H2LOAD_DONE=$((H2LOAD_DONE + two)); H2LOAD_5XX=$((H2LOAD_5XX + five)); H2LOAD_OTHER=$((H2LOAD_OTHER + three + four))
done
[ "$H2LOAD_DONE" -gt 0 ] || fail "h2load got no 2xx answer"
[ "$H2LOAD_5XX" = 0 ] || fail "$H2LOAD_5XX answers 5xx to h2load's valid requests"
[ "$H2LOAD_OTHER" = 0 ] || fail "$H2LOAD_OTHER answers 3xx/4xx to h2load's valid requests"
CURL_OK="$(grep -c '^200$' "$TMP/reports/curl-statuses" || true)"
CURL_BAD="$(grep -vc '^200$' "$TMP/reports/curl-statuses" || true)"
[ "$CURL_OK" -gt 0 ] || fail "curl got no 200"
[ "$CURL_BAD" = 0 ] || fail "curl's valid requests got $(grep -v '^200$' "$TMP/reports/curl-statuses" | sort | uniq -c | tr '\n' ' ')"

# Hostile clients' own checks (smuggling never 2xx, bad tokens only 400/401/431).
for mode in smuggle slowloris slowbody slowread connflood badtokens; do
    python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
sys.exit(1 if r["failures"] or not r["counts"] else 0)' "$TMP/reports/hostile-$mode.json" 2>/dev/null \
        || fail "hostile $mode: $(cat "$TMP/reports/hostile-$mode.json" "$TMP/reports/hostile-$mode.err" 2>/dev/null | tail -3 | tr '\n' ' ')"
done
[ ! -e "$TMP/reports/h2-attacks-failed" ] || fail "HTTP/2 attacks not handled as expected: $(sort "$TMP/reports/h2-attacks-failed" | uniq -c | tr '\n' ' ')"
[ ! -e "$TMP/reports/revoke-failures" ] || fail "revocations: $(head -3 "$TMP/reports/revoke-failures" | tr '\n' ' ')"
[ "$REVOKES" -gt 0 ] || fail "no revocation ran"

# Reloads: each SIGHUP taken, none refused.
METRICS="$(curl -sS --max-time 5 "http://127.0.0.1:$ADMIN/metrics" || true)"
TAKEN="$(echo "$METRICS" | awk '$1 == "tokengate_config_reloads_total" { print $2 }')"
REFUSED="$(echo "$METRICS" | awk '$1 == "tokengate_config_reload_failures_total" { print $2 }')"
[ "${TAKEN:-0}" = "$RELOADS" ] || fail "$RELOADS reloads asked for, ${TAKEN:-none} taken"
[ "${REFUSED:-0}" = 0 ] || fail "$REFUSED reloads refused: $(grep -i reload "$TMP/gateway.err" | tail -2 | tr '\n' ' ')"

# No token, no secret in any log.
cat "$TMP/gateway.out" "$TMP/gateway.err" > "$TMP/all-logs"
LOG_LINES="$(wc -l < "$TMP/all-logs")"
[ "$LOG_LINES" -gt 0 ] || fail "the gateway logged nothing (the access log is on)"
if grep -Eq 'eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}' "$TMP/all-logs"; then
    fail "a token-shaped string is in the gateway's log"
fi
cut -d. -f3 "$TMP/tokens.txt" "$TMP/victims.txt" > "$TMP/signatures"
echo "$SECRET_B64" >> "$TMP/signatures"
if grep -Fq -f "$TMP/signatures" "$TMP/all-logs"; then fail "a token's signature or the HMAC secret is in the gateway's log"; fi

# --- Report. -------------------------------------------------------------------------------------------------------
FAULTS="$(grep -v '^$' "$TMP/reports/fault-statuses" 2>/dev/null | sort | uniq -c | awk '{ printf "%s×%s ", $1, $2 }')"
log "valid: tokengate-bench $BENCH_SENT answers (${BENCH_5XX} 5xx), h2load $H2LOAD_DONE 2xx (${H2LOAD_5XX} 5xx), curl $CURL_OK 200"
log "hostile: $(for m in smuggle slowloris slowbody slowread connflood badtokens; do python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(sys.argv[2], sum(r["counts"].values()), end="; ")' "$TMP/reports/hostile-$m.json" "$m" 2>/dev/null; done)HTTP/2 attacks $(wc -l < "$TMP/reports/h2-attacks.jsonl" 2>/dev/null || echo 0)"
log "faulty upstream answers: $FAULTS"
log "reloads $RELOADS (taken ${TAKEN:-?}), revocations $REVOKES, log lines $LOG_LINES"
log "memory: $((BASE_RSS / 1024)) MiB at the start, peak $((PEAK_RSS / 1024)) MiB, trend after warm-up $SLOPE MB/min; open files: baseline $BASE_FDS, end $FINAL_FDS"
if [ "$failed" = 0 ]; then log "soak passed"; else log "soak FAILED"; fi
exit "$failed"
