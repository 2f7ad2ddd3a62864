#!/usr/bin/env bash
# Memory per idle TLS connection: tokengate holding N idle keep-alive TLS connections.
#
# A fixed backend (Debian's nginx, one worker, 127.0.0.1:29100; the gateway on 28443) and the gateway (`tokengate serve`,
# scripts/bench/tokengate-idle.yaml: event_loops 1, idle_timeout 600s, max_connections 20000) are pinned to
# core 0; `tokengate-bench idle` on core 1 opens the connections (TLS handshake + one request each, HTTP/1.1 or HTTP/2),
# holds them idle and reads the gateway's VmRSS/RssAnon from /proc. Several gateway binaries can be measured
# in one run, interleaved round by round (--gateway LABEL=PATH, repeatable), to compare before and after.
#
# Usage: scripts/bench-idle.sh [--connections 10000] [--hold 30] [--rounds 1] [--http 1.1|2] [--gateway LABEL=PATH]...
#                              [--port 28443] [--backend-port 29100] [--out DIR] [--no-build]
# Every process it starts is stopped on exit; every tool invocation has a timeout.
set -euo pipefail

CONNECTIONS=10000
HOLD=30
ROUNDS=1
HTTP=1.1
GATEWAYS=()
OUT=""
BUILD=1
PROXY_CORE=0
CLIENT_CORE=1
# Not bench-compare's 8443/9100: other runs on the same machine may hold those.
PORT=28443
BACKEND_PORT=29100

while [ $# -gt 0 ]; do
    case "$1" in
        --connections) CONNECTIONS="$2"; shift 2 ;;
        --hold) HOLD="$2"; shift 2 ;;
        --rounds) ROUNDS="$2"; shift 2 ;;
        --http) HTTP="$2"; shift 2 ;;
        --gateway) GATEWAYS+=("$2"); shift 2 ;;
        --port) PORT="$2"; shift 2 ;;
        --backend-port) BACKEND_PORT="$2"; shift 2 ;;
        --out) OUT="$2"; shift 2 ;;
        --no-build) BUILD=0; shift ;;
        -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
        *) echo "unknown option: $1" >&2; exit 2 ;;
    esac
done
[ "$HTTP" = 1.1 ] || [ "$HTTP" = 2 ] || { echo "--http takes 1.1 or 2" >&2; exit 2; }
for number in "$CONNECTIONS" "$HOLD" "$ROUNDS" "$PORT" "$BACKEND_PORT"; do
    [[ "$number" =~ ^[0-9]+$ ]] || { echo "options take non-negative integers" >&2; exit 2; }
done
[ "$CONNECTIONS" -ge 1 ] && [ "$CONNECTIONS" -le 19000 ] && [ "$HOLD" -le 200 ] && [ "$ROUNDS" -ge 1 ] && [ "$ROUNDS" -le 20 ] || {
    echo "bounded runs only: --connections 1..19000, --hold at most 200 (below the config's timeouts), --rounds 1..20" >&2; exit 2; }

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
TEMPLATES="$ROOT/scripts/bench"
export PATH="/opt/swift/usr/bin:$PATH"
log() { printf '[bench-idle %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

for tool in nginx openssl taskset; do
    command -v "$tool" >/dev/null || { log "missing $tool (scripts/bench-compare.sh installs the tools)"; exit 2; }
done
# The gateway needs one descriptor per connection plus its own; the bench raises its own limit in-process.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
[ "$(ulimit -n)" = unlimited ] || [ "$(ulimit -n)" -ge $((CONNECTIONS + 1024)) ] || {
    log "the file descriptor limit ($(ulimit -n)) is too low for $CONNECTIONS connections"; exit 2; }

if [ "$BUILD" = 1 ]; then
    log "building tokengate and tokengate-bench (release)"
    (cd "$ROOT" && swift build -c release --product tokengate >/dev/null && swift build -c release --product tokengate-bench >/dev/null)
fi
BIN="$(cd "$ROOT" && swift build -c release --show-bin-path)"
BENCH="$BIN/tokengate-bench"
[ ${#GATEWAYS[@]} -gt 0 ] || GATEWAYS=("tokengate=$BIN/tokengate")
for entry in "${GATEWAYS[@]}"; do
    [ -x "${entry#*=}" ] || { log "not executable: ${entry#*=}"; exit 2; }
done
[ -x "$BENCH" ] || { log "missing $BENCH (run without --no-build)"; exit 2; }

TMP="$(mktemp -d /tmp/tokengate-idle.XXXXXX)"
# shellcheck source=bench/processes.sh
source "$TEMPLATES/processes.sh"
[ -n "$OUT" ] || OUT="$TMP/results"
mkdir -p "$OUT"

log "generating a certificate, an HS256 key and cutoffs in $TMP"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
    -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -keyout "$TMP/key.pem" -out "$TMP/cert.pem" 2>/dev/null
K="$(openssl rand 32 | openssl base64 -A | tr '+/' '-_' | tr -d '=')"
printf '{"keys":[{"kty":"oct","kid":"bench","alg":"HS256","use":"sig","k":"%s"}]}\n' "$K" > "$TMP/hs256.jwks"
chmod 600 "$TMP/hs256.jwks" "$TMP/key.pem"
"$BENCH" cutoffs --users 1000 --out "$TMP/cutoffs.json" --haproxy-map "$TMP/cutoffs.map"
BODY="$(printf 'x%.0s' $(seq 1 99))"
for file in backend-nginx.conf tokengate-idle.yaml; do
    sed -e "s|@TMP@|$TMP|g" -e "s|@BODY@|$BODY\\\\n|g" -e "s|127.0.0.1:9100|127.0.0.1:$BACKEND_PORT|g" \
        -e "s|127.0.0.1:8443|127.0.0.1:$PORT|g" "$TEMPLATES/$file" > "$TMP/$file"
done

for port in "$PORT" "$BACKEND_PORT"; do
    ! port_busy "$port" || { log "port $port is in use (another run?); pick others with --port/--backend-port"; exit 1; }
done
taskset -c "$PROXY_CORE" nginx -p "$TMP" -e "$TMP/backend-error.log" -c "$TMP/backend-nginx.conf" &
STARTED_PIDS+=("$!")
wait_port "$BACKEND_PORT" "$!" || { log "the backend did not start"; exit 1; }

SUMMARY="$OUT/summary.tsv"
printf 'round\tgateway\tconnections_idle\topen_at_end\tclosed_during_hold\tfailed\trss_kib_per_conn\tanon_kib_per_conn\tmarginal_rss_kib\tmarginal_anon_kib\trss_mib_idle\n' > "$SUMMARY"
for round in $(seq 1 "$ROUNDS"); do
    for entry in "${GATEWAYS[@]}"; do
        label="${entry%%=*}"; gateway="${entry#*=}"
        log "round $round/$ROUNDS: $label ($CONNECTIONS HTTP/$HTTP connections, hold ${HOLD}s)"
        ! port_busy "$PORT" || { log "port $PORT is in use"; exit 1; }
        taskset -c "$PROXY_CORE" "$gateway" serve --config "$TMP/tokengate-idle.yaml" >"$TMP/gateway-$label.log" 2>&1 &
        pid=$!
        STARTED_PIDS+=("$pid")
        wait_port "$PORT" "$pid" || { log "$label did not start"; tail -n 20 "$TMP/gateway-$label.log" >&2; exit 1; }
        json="$OUT/idle-$label-h$HTTP-round$round.json"
        timeout $((HOLD + 600)) taskset -c "$CLIENT_CORE" "$BENCH" idle --url "https://127.0.0.1:$PORT/api/bench" \
            --cacert "$TMP/cert.pem" --key "$TMP/hs256.jwks" --connections "$CONNECTIONS" --hold "$HOLD" --http "$HTTP" \
            --gateway-pid "$pid" --json "$json" | tee "$OUT/idle-$label-h$HTTP-round$round.txt" || log "$label: the bench failed"
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        cp "$TMP/gateway-$label.log" "$OUT/gateway-$label-round$round.log"
        [ -s "$json" ] || continue
        python3 - "$json" "$round" "$label" >> "$SUMMARY" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
stages = {s["name"]: s for s in r["stages"]}
per = {(p["from"], p["to"]): p for p in r["per_connection"]}
main, marginal = per.get(("before", "idle")) or per.get(("start", "idle")), per.get(("half", "idle"))
f = lambda p, k: "NA" if p is None else "%.1f" % p[k]
print("\t".join([sys.argv[2], sys.argv[3], str(stages["idle"]["open_connections"]), str(stages["end"]["open_connections"]),
                 str(r["closed_during_hold"]), str(sum(r["failures"].values())), f(main, "rss_kib"), f(main, "anon_kib"),
                 f(marginal, "rss_kib"), f(marginal, "anon_kib"), "%.1f" % (stages["idle"]["memory"]["rss_kib"] / 1024)]))
PY
    done
done
column -t -s $'\t' "$SUMMARY"
log "results: $OUT"
if [ "$OUT" = "$TMP/results" ]; then
    cp -r "$OUT" "/tmp/tokengate-idle-results.$$"
    log "copied to /tmp/tokengate-idle-results.$$ (the temporary directory is removed on exit)"
fi
