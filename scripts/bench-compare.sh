#!/usr/bin/env bash
# tokengate side by side with nginx and HAProxy, in one run on one machine, loopback only.
#
# A fixed backend (Debian's nginx, one worker, 100-byte body on 127.0.0.1:9100) is pinned to core 0. In front
# of it, one after another and pinned to core 0 too, with one worker/thread each:
#   nginx        TLS proxy, keepalive upstream, no token check
#   haproxy      TLS proxy, keepalive upstream, no token check
#   haproxy-jwt  the same with jwt_verify(HS256), the api-only flag and a per-user cutoff map
#   tokengate    `tokengate serve`, HS256 keys, full checks, access log off
#   nio-floor    (only when named in --proxies) Benchmarks' nio-floor-proxy: the gateway's TLS handler and two
#                NIO channels per client, requests passed on unchecked and unparsed (HTTP/1.1 only): what any
#                proxy built on SwiftNIO this way pays before doing any work (docs/performance.md, "The floors")
#   epoll-floor  (only when named in --proxies) Benchmarks' epoll-floor-proxy: the same do-nothing proxy on an
#                epoll event loop of its own with the gateway's TLSConnection, no NIO channels (HTTP/1.1 only)
# Each is driven from core 1 by wrk (HTTP/1.1, a different token per request through a Lua script), h2load
# (HTTP/2; N/A when ALPN does not give h2) and tokengate-bench's fixed-rate mode (latency at --rate req/s,
# measured from the intended send time), over HTTP/1.1 and, where ALPN gives h2, over HTTP/2 (--h2-clients
# connections × --h2-streams streams). Rounds are interleaved (nginx, haproxy, ..., then again), and the
# summary prints medians and the ratios tokengate ÷ each peer.
#
# Usage: scripts/bench-compare.sh [--rounds 3] [--duration 10] [--connections 64] [--rate 10000]
#                                 [--latency-duration 10] [--users 5000] [--proxies "nginx haproxy haproxy-jwt tokengate"]
#                                 [--h2-clients 16] [--h2-streams 10] [--out DIR] [--no-build]
#                                 [--gateway LABEL=PATH ...] [--phases "wrk h2load rate rate-h2"] [--app-fields]
# --gateway adds another tokengate binary as a proxy named LABEL (same configuration, same rounds): an A/B of
# two builds side by side, interleaved in one run (`--proxies "tokengate before" --gateway before=/path`).
# --phases picks the measurements: wrk (HTTP/1.1 closed loop), h2load (HTTP/2 closed loop), rate and rate-h2
# (tokengate-bench at the fixed --rate over HTTP/1.1 and HTTP/2).
# --app-fields sends, besides Host and the token, six fields of the kind a mobile app's requests carry (a
# browser-like User-Agent, Accept, Accept-Language, Accept-Encoding, an app version, Cache-Control) from wrk,
# h2load and tokengate-bench's fixed-rate phases, to every proxy alike.
# Needs root for apt-get when a tool is missing. Every process it starts is stopped on exit; every tool
# invocation has a timeout, so the run is bounded.
set -euo pipefail

ROUNDS=3
APP_FIELDS=0
DURATION=10
CONNECTIONS=64
RATE=10000
LATENCY_DURATION=10
USERS=5000
PROXIES="nginx haproxy haproxy-jwt tokengate"
H2_CLIENTS=16
H2_STREAMS=10
OUT=""
BUILD=1
PHASES="wrk h2load rate rate-h2"
declare -A GATEWAYS=()   # LABEL -> path of another tokengate binary (--gateway)
PROXY_CORE=0
CLIENT_CORE=1

while [ $# -gt 0 ]; do
    case "$1" in
        --rounds) ROUNDS="$2"; shift 2 ;;
        --duration) DURATION="$2"; shift 2 ;;
        --connections) CONNECTIONS="$2"; shift 2 ;;
        --rate) RATE="$2"; shift 2 ;;
        --latency-duration) LATENCY_DURATION="$2"; shift 2 ;;
        --users) USERS="$2"; shift 2 ;;
        --proxies) PROXIES="$2"; shift 2 ;;
        --h2-clients) H2_CLIENTS="$2"; shift 2 ;;
        --h2-streams) H2_STREAMS="$2"; shift 2 ;;
        --out) OUT="$2"; shift 2 ;;
        --no-build) BUILD=0; shift ;;
        --phases) PHASES="$2"; shift 2 ;;
        --app-fields) APP_FIELDS=1; shift ;;
        --gateway)
            label="${2%%=*}"; path="${2#*=}"
            [[ "$label" =~ ^[a-z0-9][a-z0-9-]*$ ]] && [ "$label" != "$2" ] || {
                echo "--gateway takes LABEL=PATH (LABEL: lower-case letters, digits, '-')" >&2; exit 2; }
            case "$label" in nginx|haproxy|haproxy-jwt|tokengate|nio-floor|epoll-floor) echo "--gateway: '$label' is a built-in proxy name" >&2; exit 2 ;; esac
            [ -x "$path" ] || { echo "--gateway $label: $path is not an executable" >&2; exit 2; }
            GATEWAYS[$label]="$(cd "$(dirname "$path")" && pwd)/$(basename "$path")"
            shift 2 ;;
        -h|--help) sed -n '2,31p' "$0"; exit 0 ;;
        *) echo "unknown option: $1" >&2; exit 2 ;;
    esac
done
for number in "$ROUNDS" "$DURATION" "$CONNECTIONS" "$RATE" "$LATENCY_DURATION" "$USERS" "$H2_CLIENTS" "$H2_STREAMS"; do
    [[ "$number" =~ ^[0-9]+$ ]] && [ "$number" -gt 0 ] || { echo "options take positive integers" >&2; exit 2; }
done
for phase in $PHASES; do
    case "$phase" in wrk|h2load|rate|rate-h2) ;; *) echo "--phases: unknown phase '$phase' (wrk h2load rate rate-h2)" >&2; exit 2 ;; esac
done
for label in "${!GATEWAYS[@]}"; do
    [[ " $PROXIES " == *" $label "* ]] || { echo "--gateway $label: add '$label' to --proxies to run it" >&2; exit 2; }
done
for proxy in $PROXIES; do
    case "$proxy" in nginx|haproxy|haproxy-jwt|tokengate|nio-floor|epoll-floor) ;;
        *) [ -n "${GATEWAYS[$proxy]:-}" ] || { echo "--proxies: '$proxy' is neither a built-in proxy nor a --gateway label" >&2; exit 2; } ;;
    esac
done
[ "$DURATION" -le 600 ] && [ "$LATENCY_DURATION" -le 600 ] && [ "$ROUNDS" -le 50 ] || {
    echo "bounded runs only: --duration and --latency-duration at most 600, --rounds at most 50" >&2; exit 2; }

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
TEMPLATES="$ROOT/scripts/bench"
ulimit -n 65536 2>/dev/null || true
export PATH="/opt/swift/usr/bin:$PATH"

log() { printf '[bench-compare %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

# --- Tools: Debian packages only. ----------------------------------------------------------------------------
missing=()
command -v nginx >/dev/null || missing+=(nginx)
command -v haproxy >/dev/null || missing+=(haproxy)
command -v wrk >/dev/null || missing+=(wrk)
command -v h2load >/dev/null || missing+=(nghttp2-client)
command -v openssl >/dev/null || missing+=(openssl)
command -v python3 >/dev/null || missing+=(python3)
command -v taskset >/dev/null || missing+=(util-linux)
if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]}"
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
    # The packages start their own daemons where an init system runs them: stop and disable those, they
    # would hold the ports and the cores.
    if command -v systemctl >/dev/null && systemctl is-system-running >/dev/null 2>&1; then
        $SUDO systemctl disable --now nginx haproxy >/dev/null 2>&1 || true
    else
        $SUDO service nginx stop >/dev/null 2>&1 || true
        $SUDO service haproxy stop >/dev/null 2>&1 || true
    fi
fi
if [ "$(nproc)" -lt 2 ]; then
    log "needs 2 cores (proxy on core $PROXY_CORE, load on core $CLIENT_CORE); found $(nproc)"
    exit 2
fi

# --- Build. -----------------------------------------------------------------------------------------------------
if [ "$BUILD" = 1 ]; then
    log "building tokengate and tokengate-bench (release)"
    (cd "$ROOT" && swift build -c release --product tokengate >/dev/null && swift build -c release --product tokengate-bench >/dev/null)
fi
# The floors (Benchmarks/), built only when named: FLOORS[name] is the executable.
declare -A FLOORS=()
for floor in nio-floor epoll-floor; do
    [[ " $PROXIES " == *" $floor "* ]] || continue
    if [ "$BUILD" = 1 ]; then
        log "building $floor-proxy (release, Benchmarks/)"
        (cd "$ROOT/Benchmarks" && swift build -c release --product "$floor-proxy" >/dev/null)
    fi
    FLOORS[$floor]="$(cd "$ROOT/Benchmarks" && swift build -c release --show-bin-path)/$floor-proxy"
    [ -x "${FLOORS[$floor]}" ] || { log "missing ${FLOORS[$floor]} (run without --no-build)"; exit 2; }
done
BIN="$(cd "$ROOT" && swift build -c release --show-bin-path)"
TOKENGATE="$BIN/tokengate"
BENCH="$BIN/tokengate-bench"
[ -x "$TOKENGATE" ] && [ -x "$BENCH" ] || { log "missing $TOKENGATE or $BENCH (run without --no-build)"; exit 2; }

# --- Everything we start is stopped on exit. ---------------------------------------------------------------------
TMP="$(mktemp -d /tmp/tokengate-bench.XXXXXX)"
# shellcheck source=bench/processes.sh
source "$TEMPLATES/processes.sh"
[ -n "$OUT" ] || OUT="$TMP/results"
mkdir -p "$OUT"

# --- Keys, certificate, tokens and cutoffs, all in the temporary directory. ----------------------------------------
log "generating a certificate, an HS256 key, $USERS tokens and cutoffs in $TMP"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
    -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -keyout "$TMP/key.pem" -out "$TMP/cert.pem" 2>/dev/null
cat "$TMP/cert.pem" "$TMP/key.pem" > "$TMP/haproxy.pem"
# HAProxy 2.6 takes an HMAC secret as a literal string in its configuration, so the secret is printable:
# 64 hex characters (256 bits of randomness), used as bytes by every party.
SECRET="$(openssl rand -hex 32)"
K="$(printf %s "$SECRET" | openssl base64 -A | tr '+/' '-_' | tr -d '=')"
printf '{"keys":[{"kty":"oct","kid":"bench","alg":"HS256","use":"sig","k":"%s"}]}\n' "$K" > "$TMP/hs256.jwks"
chmod 600 "$TMP/hs256.jwks" "$TMP/key.pem" "$TMP/haproxy.pem"
"$BENCH" cutoffs --users "$USERS" --out "$TMP/cutoffs.json" --haproxy-map "$TMP/cutoffs.map"
"$BENCH" mint --key "$TMP/hs256.jwks" --users "$USERS" --kind api --out "$TMP/tokens.txt"
ONE_TOKEN="$(head -n 1 "$TMP/tokens.txt")"
BODY="$(printf 'x%.0s' $(seq 1 99))"   # 99 bytes + nginx adds nothing: see the length check below

render() {  # template -> $TMP/name
    sed -e "s|@TMP@|$TMP|g" -e "s|@SECRET@|$SECRET|g" -e "s|@BODY@|$BODY\\\\n|g" "$TEMPLATES/$1" > "$TMP/$1"
}
for file in backend-nginx.conf proxy-nginx.conf haproxy.cfg haproxy-jwt.cfg tokengate.yaml; do render "$file"; done
chmod 600 "$TMP/haproxy-jwt.cfg"

# --- The backend. ------------------------------------------------------------------------------------------------
taskset -c "$PROXY_CORE" nginx -p "$TMP" -e "$TMP/backend-error.log" -c "$TMP/backend-nginx.conf" &
BACKEND_PID=$!
STARTED_PIDS+=("$BACKEND_PID")
wait_port 9100 "$BACKEND_PID" || { log "the backend did not start"; cat "$TMP/backend-error.log" >&2; exit 1; }
LENGTH="$(python3 - <<'EOF'
import socket
s = socket.create_connection(("127.0.0.1", 9100)); s.sendall(b"GET / HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n")
data = b""
while True:
    chunk = s.recv(65536)
    if not chunk: break
    data += chunk
print(len(data.split(b"\r\n\r\n", 1)[1]))
EOF
)"
[ "$LENGTH" = 100 ] || { log "the backend body is $LENGTH bytes, not 100"; exit 1; }

# --- Proxies. ----------------------------------------------------------------------------------------------------
PROXY_PID=""
start_proxy() {
    case "$1" in
        nginx)
            taskset -c "$PROXY_CORE" nginx -p "$TMP" -e "$TMP/proxy-nginx-error.log" -c "$TMP/proxy-nginx.conf" & ;;
        haproxy)
            taskset -c "$PROXY_CORE" haproxy -db -f "$TMP/haproxy.cfg" >"$TMP/haproxy.log" 2>&1 & ;;
        haproxy-jwt)
            taskset -c "$PROXY_CORE" haproxy -db -f "$TMP/haproxy-jwt.cfg" >"$TMP/haproxy-jwt.log" 2>&1 & ;;
        tokengate)
            # One event loop (`event_loops: 1` in scripts/bench/tokengate.yaml), like the peers' one worker.
            taskset -c "$PROXY_CORE" "$TOKENGATE" serve --config "$TMP/tokengate.yaml" >"$TMP/tokengate.log" 2>&1 & ;;
        nio-floor|epoll-floor)
            taskset -c "$PROXY_CORE" "${FLOORS[$1]}" --listen 127.0.0.1:8443 --backend 127.0.0.1:9100 \
                --cert "$TMP/cert.pem" --key "$TMP/key.pem" >"$TMP/$1.log" 2>&1 & ;;
        *)  # another tokengate build (--gateway LABEL=PATH), same configuration
            taskset -c "$PROXY_CORE" "${GATEWAYS[$1]}" serve --config "$TMP/tokengate.yaml" >"$TMP/$1.log" 2>&1 & ;;
    esac
    PROXY_PID=$!
    STARTED_PIDS+=("$PROXY_PID")
    wait_port 8443 "$PROXY_PID" || { log "$1 did not start"; tail -n 20 "$TMP"/*.log >&2; exit 1; }
}
stop_proxy() {
    kill -TERM "$PROXY_PID" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$PROXY_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$PROXY_PID" 2>/dev/null || true
    wait "$PROXY_PID" 2>/dev/null || true
    wait_gone 8443 || { log "port 8443 still busy"; exit 1; }
}
proxy_pids() {  # the proxy process and its children (nginx's worker), comma-separated
    local pids="$PROXY_PID" child
    for child in $(pgrep -P "$PROXY_PID" || true); do pids="$pids,$child"; done
    echo "$pids"
}
cpu_ticks() {  # summed utime+stime of comma-separated pids
    local total=0 pid fields
    for pid in ${1//,/ }; do
        if [ -r "/proc/$pid/stat" ]; then
            fields="$(sed 's/.*) //' "/proc/$pid/stat")"
            set -- $fields
            total=$((total + ${12} + ${13}))
        fi
    done
    echo "$total"
}
TICKS="$(getconf CLK_TCK)"

RESULTS="$OUT/results.tsv"
printf 'round\tproxy\tprotocol\trequests_per_s\tcpu_us_per_request\tp50_ms\tp99_ms\tbad_answers\tnote\n' > "$RESULTS"
URL="https://127.0.0.1:8443/api/bench"

# --app-fields: the same fields for wrk (one per line in BENCH_FIELDS, read by rotate-tokens.lua), h2load and
# tokengate-bench (-H each).
APP_FIELD_LINES=(
    "User-Agent: Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0 Safari/537.36"
    "Accept: application/json, text/plain, */*"
    "Accept-Language: en-GB,en;q=0.9,de;q=0.8"
    "Accept-Encoding: gzip, deflate, br"
    "X-Client-Version: ios-7.12.3-build-4411"
    "Cache-Control: no-cache"
)
FIELD_ARGS=()
wrk_fields() { [ "$APP_FIELDS" = 1 ] && printf '%s\n' "${APP_FIELD_LINES[@]}" || true; }
if [ "$APP_FIELDS" = 1 ]; then
    for line in "${APP_FIELD_LINES[@]}"; do FIELD_ARGS+=(-H "$line"); done
fi

run_wrk() {  # round proxy
    local pids before after output requests rps seconds non2xx errors
    pids="$(proxy_pids)"
    before="$(cpu_ticks "$pids")"
    output="$(BENCH_TOKENS="$TMP/tokens.txt" BENCH_FIELDS="$(wrk_fields)" timeout $((DURATION + 30)) taskset -c "$CLIENT_CORE" \
        wrk -t 1 -c "$CONNECTIONS" -d "${DURATION}s" --latency -s "$TEMPLATES/rotate-tokens.lua" "$URL" 2>&1)" || true
    after="$(cpu_ticks "$pids")"
    echo "$output" > "$OUT/wrk-$2-round$1.txt"
    requests="$(echo "$output" | awk '/requests in/ {print $1}')"
    rps="$(echo "$output" | awk '/^Requests\/sec/ {print $2}')"
    non2xx="$(echo "$output" | awk '/Non-2xx/ {print $NF}')"
    errors="$(echo "$output" | awk -F'[ ,]+' '/Socket errors/ {print $4+$6+$8+$10}')"
    [ -n "$requests" ] && [ -n "$rps" ] || { printf '%s\t%s\thttp1.1\tNA\tNA\tNA\tNA\tNA\twrk failed\n' "$1" "$2" >> "$RESULTS"; return; }
    local cpu_us
    cpu_us="$(python3 -c "print(round(($after-$before)*1e6/$TICKS/max($requests,1),2))")"
    printf '%s\t%s\thttp1.1\t%s\t%s\tNA\tNA\t%s\t\n' "$1" "$2" "$rps" "$cpu_us" "$(( ${non2xx:-0} + ${errors:-0} ))" >> "$RESULTS"
}

alpn() {  # what the proxy picks when offered h2 and http/1.1
    echo | timeout 10 openssl s_client -connect 127.0.0.1:8443 -servername localhost -alpn h2,http/1.1 2>/dev/null \
        | awk -F': ' '/^ALPN protocol/ {print $2}'
}

run_h2load() {  # round proxy
    local pids before after output done rps
    # Only where ALPN gives h2: h2load falls back to HTTP/1.1 *pipelining* (-m requests at once) otherwise,
    # which measures something else.
    if [ "$(alpn)" != h2 ]; then
        printf '%s\t%s\th2\tNA\tNA\tNA\tNA\tNA\tno h2 through ALPN\n' "$1" "$2" >> "$RESULTS"
        return
    fi
    pids="$(proxy_pids)"
    before="$(cpu_ticks "$pids")"
    output="$(timeout $((DURATION + 30)) taskset -c "$CLIENT_CORE" h2load -t 1 -c "$H2_CLIENTS" -m "$H2_STREAMS" \
        -D "$DURATION" -H "authorization: Bearer $ONE_TOKEN" "${FIELD_ARGS[@]}" "$URL" 2>&1)" || true
    after="$(cpu_ticks "$pids")"
    echo "$output" > "$OUT/h2load-$2-round$1.txt"
    if ! grep -q 'Application protocol: h2' <<< "$output"; then
        printf '%s\t%s\th2\tNA\tNA\tNA\tNA\tNA\tno h2 through ALPN\n' "$1" "$2" >> "$RESULTS"
        return
    fi
    done="$(echo "$output" | awk '/^requests:/ {print $6}')"
    rps="$(echo "$output" | awk '/^finished in/ {gsub(",", "", $4); print $4}')"
    local bad cpu_us
    bad="$(echo "$output" | awk '/^status codes:/ {gsub(",", ""); print $5+$7+$9}')"
    cpu_us="$(python3 -c "print(round(($after-$before)*1e6/$TICKS/max(${done:-0},1),2))")"
    printf '%s\t%s\th2\t%s\t%s\tNA\tNA\t%s\t\n' "$1" "$2" "${rps:-NA}" "$cpu_us" "${bad:-NA}" >> "$RESULTS"
}

run_fixed_rate() {  # round proxy [h2]
    local protocol=fixed-rate json="$OUT/latency-$2-round$1.json" wire=(--connections "$CONNECTIONS")
    if [ "${3:-}" = h2 ]; then
        protocol=fixed-rate-h2
        json="$OUT/latency-h2-$2-round$1.json"
        wire=(--http 2 --connections "$H2_CLIENTS" --streams "$H2_STREAMS")
        if [ "$(alpn)" != h2 ]; then
            printf '%s\t%s\t%s\tNA\tNA\tNA\tNA\tNA\tno h2 through ALPN\n' "$1" "$2" "$protocol" >> "$RESULTS"
            return
        fi
    fi
    timeout $((LATENCY_DURATION + 60)) taskset -c "$CLIENT_CORE" "$BENCH" run --url "$URL" --cacert "$TMP/cert.pem" \
        --key "$TMP/hs256.jwks" --users "$USERS" --mix api=100 "${wire[@]}" --rate "$RATE" \
        --duration "$LATENCY_DURATION" "${FIELD_ARGS[@]}" --gateway-pid "$PROXY_PID" $(for p in $(pgrep -P "$PROXY_PID" || true); do echo --gateway-pid "$p"; done) \
        --json "$json" > "${json%.json}.txt" 2>&1 || true
    if [ ! -s "$json" ]; then
        printf '%s\t%s\t%s\tNA\tNA\tNA\tNA\tNA\ttokengate-bench failed\n' "$1" "$2" "$protocol" >> "$RESULTS"
        return
    fi
    python3 - "$json" "$1" "$2" "$protocol" >> "$RESULTS" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
lat = r["latency_micros"]
bad = r["unexpected_statuses"] + sum(r["errors"].values())
cpu = (r.get("gateway") or {}).get("cpu_micros_per_request")
print("\t".join([sys.argv[2], sys.argv[3], sys.argv[4], "%.0f" % r["requests_per_second"],
                 "NA" if cpu is None else "%.2f" % cpu, "%.3f" % (lat["p50"] / 1000), "%.3f" % (lat["p99"] / 1000),
                 str(bad), ""]))
EOF
}

# --- Rounds, interleaved. ------------------------------------------------------------------------------------------
for round in $(seq 1 "$ROUNDS"); do
    for proxy in $PROXIES; do
        log "round $round/$ROUNDS: $proxy"
        start_proxy "$proxy"
        # Warm up (connections, pools, caches) without recording.
        BENCH_TOKENS="$TMP/tokens.txt" timeout 20 taskset -c "$CLIENT_CORE" \
            wrk -t 1 -c "$CONNECTIONS" -d 1s -s "$TEMPLATES/rotate-tokens.lua" "$URL" >/dev/null 2>&1 || true
        for phase in $PHASES; do
            case "$phase" in
                wrk) run_wrk "$round" "$proxy" ;;
                h2load) run_h2load "$round" "$proxy" ;;
                rate) run_fixed_rate "$round" "$proxy" ;;
                rate-h2) run_fixed_rate "$round" "$proxy" h2 ;;
            esac
        done
        stop_proxy
    done
done

# --- Summary: medians per proxy and protocol, ratios tokengate ÷ peer. --------------------------------------------------
python3 - "$RESULTS" <<'EOF' | tee "$OUT/summary.txt"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
def med(proxy, protocol, column):
    values = [float(r[column]) for r in rows if r["proxy"] == proxy and r["protocol"] == protocol and r[column] not in ("NA", "")]
    return statistics.median(values) if values else None
def fmt(v, d=0):
    return "N/A" if v is None else f"{v:,.{d}f}"
proxies = list(dict.fromkeys(r["proxy"] for r in rows))
print("medians over rounds (bad = non-2xx answers + socket errors, summed over rounds)")
print(f"{'proxy':<13}{'h1 req/s':>11}{'h1 µs CPU/req':>15}{'h2 req/s':>11}{'h2 µs CPU/req':>15}"
      f"{'@rate p50 ms':>14}{'@rate p99 ms':>14}{'@rate req/s':>13}{'h2@rate p50':>13}{'h2@rate p99':>13}{'bad':>7}")
for p in proxies:
    bad = sum(int(r["bad_answers"]) for r in rows if r["proxy"] == p and r["bad_answers"] not in ("NA", ""))
    print(f"{p:<13}{fmt(med(p,'http1.1','requests_per_s')):>11}{fmt(med(p,'http1.1','cpu_us_per_request'),1):>15}"
          f"{fmt(med(p,'h2','requests_per_s')):>11}{fmt(med(p,'h2','cpu_us_per_request'),1):>15}"
          f"{fmt(med(p,'fixed-rate','p50_ms'),3):>14}{fmt(med(p,'fixed-rate','p99_ms'),3):>14}"
          f"{fmt(med(p,'fixed-rate','requests_per_s')):>13}"
          f"{fmt(med(p,'fixed-rate-h2','p50_ms'),3):>13}{fmt(med(p,'fixed-rate-h2','p99_ms'),3):>13}{bad:>7}")
if "tokengate" in proxies:
    print()
    print("ratios tokengate ÷ peer (req/s: higher is better for tokengate; CPU/req and p99: lower is better)")
    print(f"{'peer':<13}{'h1 req/s':>10}{'h1 CPU/req':>12}{'h2 req/s':>10}{'h2 CPU/req':>12}{'p99 @rate':>11}")
    def ratio(p, protocol, column):
        a, b = med("tokengate", protocol, column), med(p, protocol, column)
        return None if a is None or b in (None, 0) else a / b
    for p in proxies:
        if p == "tokengate":
            continue
        print(f"{p:<13}{fmt(ratio(p,'http1.1','requests_per_s'),2):>10}{fmt(ratio(p,'http1.1','cpu_us_per_request'),2):>12}"
              f"{fmt(ratio(p,'h2','requests_per_s'),2):>10}{fmt(ratio(p,'h2','cpu_us_per_request'),2):>12}"
              f"{fmt(ratio(p,'fixed-rate','p99_ms'),2):>11}")
if "epoll-floor" in proxies and "nio-floor" in proxies:
    print()
    print("the floors: epoll-floor ÷ nio-floor (HTTP/1.1; CPU/req: lower is better for the epoll loop)")
    def floors(column, protocol="http1.1"):
        a, b = med("epoll-floor", protocol, column), med("nio-floor", protocol, column)
        return None if a is None or b in (None, 0) else a / b
    print(f"{'h1 req/s':>10}{'h1 CPU/req':>12}{'p99 @rate':>11}")
    print(f"{fmt(floors('requests_per_s'),2):>10}{fmt(floors('cpu_us_per_request'),2):>12}"
          f"{fmt(floors('p99_ms','fixed-rate'),2):>11}")
EOF
log "raw results: $RESULTS (per-run outputs beside it)"
if [ "$OUT" = "$TMP/results" ]; then
    cp -r "$OUT" "/tmp/tokengate-bench-results.$$"
    log "copied to /tmp/tokengate-bench-results.$$ (the temporary directory is removed on exit)"
fi
