#!/usr/bin/env bash
# Instructions per request, counted by valgrind's callgrind: deterministic where wall-clock figures are noise.
#
# A backend (Debian's nginx, 100-byte body) and, for each gateway binary named, `tokengate serve` under
# `valgrind --tool=callgrind` with the benchmark configuration (scripts/bench/tokengate.yaml: HS256, full
# checks, access log off, one event loop). One client connection (h2load, one request at a time) sends
# --warmup requests, the counters are zeroed (`callgrind_control --zero`), --requests more requests are sent,
# and the counters are dumped: the dump's instruction total over --requests is the figure, for HTTP/1.1 and for
# HTTP/2 on the same connection shape. Everything the process does in that window counts: the event loop, TLS,
# parsing, the token check, the upstream exchange, timers.
#
# Usage: scripts/callgrind-requests.sh [--requests 2000] [--warmup 200] [--protocols "1.1 2"]
#                                      [--gateway LABEL=PATH ...] [--peers "nginx haproxy ..."]
#                                      [--out DIR] [--port-base 18400]
#                                      [--route-setting "key: value" ...] [--header "name: value" ...]
#                                      [--alg HS256|ES256] [--verified-cache N] [--forward-auth]
# Without --gateway it measures the release build of this checkout (built when missing). With several, the
# ratio of each to the first is printed: an A/B of two builds (`--gateway before=/path --gateway after=/path`).
# --peers measures other proxies the same way, after the gateways, behind the same backend and with the same
# requests (the token is passed through by those that do not check it):
#   nginx        Debian's nginx as the TLS proxy (scripts/bench/proxy-nginx.conf), in one process
#   haproxy      HAProxy 2.6 as the TLS proxy (scripts/bench/haproxy.cfg), one thread
#   haproxy-jwt  the same with jwt_verify(HS256), the api-only flag and the cutoff map (haproxy-jwt.cfg)
#   nio-floor    Benchmarks' nio-floor-proxy (HTTP/1.1 only; built there first)
#   epoll-floor  Benchmarks' epoll-floor-proxy (HTTP/1.1 only; built there first)
# --alg ES256 signs the one token with a P-256 key instead of the HS256 secret (for the gateways; haproxy-jwt
# checks HS256 only); --verified-cache N sets `tokens.verified_cache.entries` (0 measures every request's full
# verification; omit it for builds older than that setting, which refuse it). The one client reuses its token, so
# from the second request on a cached build serves it from its cache.
# --route-setting adds a key to the gateway's one route, its value in flow style (`cors: { … }`), and --header
# sends a field with every request (an `origin: …` for a CORS route): the cost of a route's policy is the same
# binary measured with and without them.
# --forward-auth also measures each gateway's forward_auth check (a plain loopback listener, `headers: forwarded`):
# the same client sends the same token as a check of GET /api/bench, HTTP/1.1 only; the row is LABEL-check.
# Loopback only; every process it starts is stopped on exit.
#
# Debian 12's valgrind (3.19) cannot read the DWARF the Swift 6 toolchain writes: each binary is measured as a
# copy without its debug sections (the symbol table stays, so callgrind_annotate still names functions). And
# valgrind stops in libdispatch's signal thread (scripts/callgrind/sigsuspend-copy.c says why): the gateway runs
# with that small library preloaded.
set -euo pipefail

REQUESTS=2000
WARMUP=200
PROTOCOLS="1.1 2"
OUT=""
PORT_BASE=18400
ALG=HS256
VERIFIED_CACHE=""
FORWARD_AUTH=""
LABELS=()
PEERS=""
ROUTE_SETTINGS=()
HEADERS=()
declare -A GATEWAYS=()

while [ $# -gt 0 ]; do
    case "$1" in
        --requests) REQUESTS="$2"; shift 2 ;;
        --warmup) WARMUP="$2"; shift 2 ;;
        --protocols) PROTOCOLS="$2"; shift 2 ;;
        --out) OUT="$2"; shift 2 ;;
        --port-base) PORT_BASE="$2"; shift 2 ;;
        --alg) ALG="$2"; shift 2 ;;
        --verified-cache) VERIFIED_CACHE="$2"; shift 2 ;;
        --forward-auth) FORWARD_AUTH=1; shift ;;
        --gateway)
            label="${2%%=*}"; path="${2#*=}"
            [ "$label" != "$2" ] && [ -x "$path" ] || { echo "--gateway takes LABEL=PATH to an executable" >&2; exit 2; }
            LABELS+=("$label"); GATEWAYS[$label]="$(cd "$(dirname "$path")" && pwd)/$(basename "$path")"
            shift 2 ;;
        --peers) PEERS="$2"; shift 2 ;;
        --route-setting) ROUTE_SETTINGS+=("$2"); shift 2 ;;
        --header) HEADERS+=(-H "$2"); shift 2 ;;
        -h|--help) sed -n '2,33p' "$0"; exit 0 ;;
        *) echo "unknown option: $1" >&2; exit 2 ;;
    esac
done
for number in "$REQUESTS" "$WARMUP" "$PORT_BASE"; do
    [[ "$number" =~ ^[0-9]+$ ]] && [ "$number" -gt 0 ] || { echo "options take positive integers" >&2; exit 2; }
done
[ "$REQUESTS" -le 100000 ] || { echo "--requests: at most 100000 (a bounded run)" >&2; exit 2; }
case "$ALG" in HS256|ES256) ;; *) echo "--alg: HS256 or ES256" >&2; exit 2 ;; esac
[ -z "$VERIFIED_CACHE" ] || [[ "$VERIFIED_CACHE" =~ ^[0-9]+$ ]] || { echo "--verified-cache takes a count" >&2; exit 2; }
for protocol in $PROTOCOLS; do
    case "$protocol" in 1.1|2) ;; *) echo "--protocols: 1.1 and/or 2" >&2; exit 2 ;; esac
done
for peer in $PEERS; do
    case "$peer" in nginx|haproxy|haproxy-jwt|nio-floor|epoll-floor) ;;
        *) echo "--peers: unknown proxy '$peer' (nginx, haproxy, haproxy-jwt, nio-floor, epoll-floor)" >&2; exit 2 ;;
    esac
    [ -z "${GATEWAYS[$peer]:-}" ] || { echo "--gateway $peer: the name of a peer" >&2; exit 2; }
done

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
TEMPLATES="$ROOT/scripts/bench"
export PATH="/opt/swift/usr/bin:$PATH"
log() { printf '[callgrind %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

missing=()
command -v valgrind >/dev/null || missing+=(valgrind)
command -v nginx >/dev/null || missing+=(nginx)
command -v h2load >/dev/null || missing+=(nghttp2-client)
command -v openssl >/dev/null || missing+=(openssl)
[[ " $PEERS " != *" haproxy"* ]] || command -v haproxy >/dev/null || missing+=(haproxy)
if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]}"
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
    $SUDO service nginx stop >/dev/null 2>&1 || true
    $SUDO service haproxy stop >/dev/null 2>&1 || true
fi

if [ ${#LABELS[@]} -eq 0 ]; then
    (cd "$ROOT" && swift build -c release --product tokengate >/dev/null && swift build -c release --product tokengate-bench >/dev/null)
    LABELS=(tokengate)
    GATEWAYS[tokengate]="$(cd "$ROOT" && swift build -c release --show-bin-path)/tokengate"
fi
# TOKENGATE_BENCH: a tokengate-bench binary to mint the token and cutoffs with (default: this checkout's).
BENCH="${TOKENGATE_BENCH:-$(cd "$ROOT" && swift build -c release --show-bin-path)/tokengate-bench}"
[ -x "$BENCH" ] || (cd "$ROOT" && swift build -c release --product tokengate-bench >/dev/null)

declare -A FLOORS=()
for floor in nio-floor epoll-floor; do
    [[ " $PEERS " == *" $floor "* ]] || continue
    FLOORS[$floor]="$(cd "$ROOT/Benchmarks" && swift build -c release --show-bin-path)/$floor-proxy"
    [ -x "${FLOORS[$floor]}" ] || (cd "$ROOT/Benchmarks" && swift build -c release --product "$floor-proxy" >/dev/null)
done

TMP="$(mktemp -d /tmp/tokengate-callgrind.XXXXXX)"

log "$(valgrind --version)"
cc -shared -fPIC -O2 -o "$TMP/sigsuspend-copy.so" "$ROOT/scripts/callgrind/sigsuspend-copy.c"
# shellcheck source=bench/processes.sh
source "$TEMPLATES/processes.sh"
[ -n "$OUT" ] || OUT="$TMP/results"
mkdir -p "$OUT"
PROXY_PORT="$PORT_BASE"
BACKEND_PORT=$((PORT_BASE + 1))

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
    -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -keyout "$TMP/key.pem" -out "$TMP/cert.pem" 2>/dev/null
# A printable secret, because HAProxy's configuration takes the HS256 key as text; the JWK holds its bytes.
SECRET="$(openssl rand -hex 32)"
K="$(printf %s "$SECRET" | openssl base64 -A | tr '+/' '-_' | tr -d '=')"
printf '{"keys":[{"kty":"oct","kid":"bench","alg":"HS256","use":"sig","k":"%s"}]}\n' "$K" > "$TMP/hs256.jwks"
cat "$TMP/cert.pem" "$TMP/key.pem" > "$TMP/haproxy.pem"
chmod 600 "$TMP/hs256.jwks" "$TMP/key.pem" "$TMP/haproxy.pem"
if [ "$ALG" = HS256 ]; then
    SIGNING_KEY="$TMP/hs256.jwks" VERIFY_KEY=hs256.jwks
else
    "${GATEWAYS[${LABELS[0]}]}" keygen --alg ES256 --kid bench --out "$TMP/es256" >/dev/null
    SIGNING_KEY="$TMP/es256/private.jwks" VERIFY_KEY=es256/public.jwks
fi
"$BENCH" cutoffs --users 5000 --out "$TMP/cutoffs.json" --haproxy-map "$TMP/cutoffs.map" >/dev/null
"$BENCH" mint --key "$SIGNING_KEY" --users 1 --kind api --out "$TMP/tokens.txt" >/dev/null
TOKEN="$(head -n 1 "$TMP/tokens.txt")"
BODY="$(printf 'x%.0s' $(seq 1 99))"
sed -e "s|@TMP@|$TMP|g" -e "s|@BODY@|$BODY\\\\n|g" -e "s|9100|$BACKEND_PORT|g" "$TEMPLATES/backend-nginx.conf" > "$TMP/backend-nginx.conf"
for file in tokengate.yaml proxy-nginx.conf haproxy.cfg haproxy-jwt.cfg; do
    sed -e "s|@TMP@|$TMP|g" -e "s|@SECRET@|$SECRET|g" -e "s|8443|$PROXY_PORT|g" -e "s|9100|$BACKEND_PORT|g" \
        "$TEMPLATES/$file" > "$TMP/$file"
done
for setting in "${ROUTE_SETTINGS[@]}"; do
    # The template's one route ends with its `sources:` line: each setting goes after it, at its indent.
    python3 - "$TMP/tokengate.yaml" "$setting" <<'PY'
import re, sys
path, setting = sys.argv[1], sys.argv[2]
text = open(path).read()
line = re.search(r"^    sources: .*$", text, re.M)
assert line, "the benchmark template's route has no sources line"
open(path, "w").write(text[:line.end()] + "\n    " + setting.strip() + text[line.end():])
PY
    log "route setting: $setting"
done
# One process, so that valgrind sees the worker's instructions.
sed -i 's|^daemon off;|daemon off;\nmaster_process off;|' "$TMP/proxy-nginx.conf"
sed -i -e "s|jwks: hs256.jwks|jwks: $VERIFY_KEY|" -e "s|algorithms: \[HS256\]|algorithms: [$ALG]|" "$TMP/tokengate.yaml"
if [ -n "$VERIFIED_CACHE" ]; then
    sed -i "s|^  algorithms: \[$ALG\]|&\n  verified_cache: { entries: $VERIFIED_CACHE }|" "$TMP/tokengate.yaml"
fi
grep -q "algorithms: \[$ALG\]" "$TMP/tokengate.yaml" || { log "could not set the algorithm in the configuration"; exit 1; }
CHECK_PORT=$((PORT_BASE + 2))
if [ -n "$FORWARD_AUTH" ]; then
    sed -i "s|^listen:|&\n  - address: 127.0.0.1:$CHECK_PORT\n    forward_auth: { headers: forwarded, trusted_peers: [ 127.0.0.1/32 ] }|" "$TMP/tokengate.yaml"
fi

nginx -p "$TMP" -e "$TMP/backend-error.log" -c "$TMP/backend-nginx.conf" &
STARTED_PIDS+=($!)
wait_port "$BACKEND_PORT" "$!" || { log "the backend did not start"; cat "$TMP/backend-error.log" >&2; exit 1; }

for label in "${LABELS[@]}"; do
    objcopy --strip-debug "${GATEWAYS[$label]}" "$TMP/gateway-$label"
    GATEWAYS[$label]="$TMP/gateway-$label"
done
for floor in "${!FLOORS[@]}"; do
    objcopy --strip-debug "${FLOORS[$floor]}" "$TMP/$floor-proxy"
    FLOORS[$floor]="$TMP/$floor-proxy"
done

PROXIED_URL="https://127.0.0.1:$PROXY_PORT/api/bench"
URL="$PROXIED_URL"
EXTRA=()  # h2load -H arguments besides the token (a check's forwarded fields)
load() {  # protocol count: one connection, one request at a time; fails unless every answer is a 2xx
    local flags=() output
    [ "$1" = 1.1 ] && flags=(--h1)
    output="$(timeout 600 h2load "${flags[@]}" -n "$2" -c 1 -m 1 -H "authorization: Bearer $TOKEN" "${HEADERS[@]}" "${EXTRA[@]}" "$URL" 2>&1)" || true
    grep -q "status codes: $2 2xx" <<< "$output" || { log "not every answer was a 2xx:"; echo "$output" >&2; return 1; }
}

control() {  # pid option: valgrind takes the request the next time the process runs, so wake an idle one
    callgrind_control "$2" "$1" >/dev/null 2>&1 &
    local request=$!
    # A proxy without timers sleeps in epoll_wait; a bare TCP connection (accepted and closed) wakes it.
    while kill -0 "$request" 2>/dev/null; do sleep 0.5; port_busy "$PROXY_PORT" || true; done
    wait "$request"
}
proxy_command() {  # name -> COMMAND, the proxy's command line (and ENVIRONMENT for it)
    ENVIRONMENT=()
    case "$1" in
        nginx) COMMAND=(nginx -p "$TMP" -e "$TMP/proxy-nginx-error.log" -c "$TMP/proxy-nginx.conf") ;;
        haproxy|haproxy-jwt) COMMAND=(haproxy -db -f "$TMP/$1.cfg") ;;
        nio-floor|epoll-floor)
            COMMAND=("${FLOORS[$1]}" --listen "127.0.0.1:$PROXY_PORT" --backend "127.0.0.1:$BACKEND_PORT"
                --cert "$TMP/cert.pem" --key "$TMP/key.pem") ;;
        *)  # a tokengate build; valgrind stops in libdispatch's signal thread without the preload
            ENVIRONMENT=("LD_PRELOAD=$TMP/sigsuspend-copy.so")
            COMMAND=("${GATEWAYS[$1]}" serve --config "$TMP/tokengate.yaml") ;;
    esac
}

RESULTS="$OUT/results.tsv"
printf 'gateway\tprotocol\trequests\tinstructions\tinstructions_per_request\n' > "$RESULTS"
RUNS=()  # label:protocol:target
for label in "${LABELS[@]}" $PEERS; do
    for protocol in $PROTOCOLS; do
        if [ "$protocol" = 2 ] && [ -n "${FLOORS[$label]:-}" ]; then
            continue  # the floors speak HTTP/1.1 only
        fi
        RUNS+=("$label:$protocol:proxied")
    done
done
if [ -n "$FORWARD_AUTH" ]; then
    for label in "${LABELS[@]}"; do RUNS+=("$label:1.1:check"); done
fi
for run in "${RUNS[@]}"; do
    IFS=: read -r label protocol target <<< "$run"
    {
        row="$label"
        URL="$PROXIED_URL"; EXTRA=()
        if [ "$target" = check ]; then
            row="$label-check"
            URL="http://127.0.0.1:$CHECK_PORT/check"
            EXTRA=(-H "x-forwarded-method: GET" -H "x-forwarded-uri: /api/bench" -H "x-forwarded-host: localhost"
                -H "x-forwarded-proto: https")
        fi
        log "$row, HTTP/$protocol: $WARMUP + $REQUESTS requests under callgrind"
        dump="$TMP/callgrind.$row.$protocol"
        proxy_command "$label"
        env "${ENVIRONMENT[@]}" valgrind --tool=callgrind --callgrind-out-file="$dump.%p" "${COMMAND[@]}" \
            >"$TMP/$label.log" 2>&1 &
        pid=$!
        STARTED_PIDS+=("$pid")
        # Up to 5 minutes: valgrind starts slowly, and more so on a machine shared with builds.
        for _ in $(seq 1 3000); do port_busy "$PROXY_PORT" && break; kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        port_busy "$PROXY_PORT" || { log "$label did not start"; tail -n 20 "$TMP/$label.log" >&2; exit 1; }
        load "$protocol" "$WARMUP"
        control "$pid" --zero
        load "$protocol" "$REQUESTS"
        control "$pid" --dump="measured"
        # The dump of the measured window is the newest part file: `<file>.<pid>.<n>`.
        part="$(ls -t "$dump.$pid".* 2>/dev/null | head -n 1)"
        total="$(awk '/^summary:/ {print $2}' "$part")"
        kill -TERM "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        wait_gone "$PROXY_PORT" || { log "port $PROXY_PORT still busy"; exit 1; }
        cp "$part" "$OUT/callgrind.$row.http$protocol.out"
        printf '%s\thttp/%s\t%s\t%s\t%s\n' "$row" "$protocol" "$REQUESTS" "$total" \
            "$(python3 -c "print(round($total/$REQUESTS))")" >> "$RESULTS"
    }
done

python3 - "$RESULTS" <<'EOF' | tee "$OUT/summary.txt"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
labels = list(dict.fromkeys(r["gateway"] for r in rows))
print(f"{'gateway':<14}{'protocol':<10}{'instructions/request':>22}{'ratio to ' + labels[0]:>20}")
for r in rows:
    base = next((b for b in rows if b["gateway"] == labels[0] and b["protocol"] == r["protocol"]), None)
    ratio = int(r["instructions_per_request"]) / int(base["instructions_per_request"]) if base else float("nan")
    print(f"{r['gateway']:<14}{r['protocol']:<10}{int(r['instructions_per_request']):>22,}{ratio:>20.4f}")
EOF
log "callgrind files and results: $OUT"
if [ "$OUT" = "$TMP/results" ]; then
    cp -r "$OUT" "/tmp/tokengate-callgrind-results.$$"
    log "copied to /tmp/tokengate-callgrind-results.$$ (the temporary directory is removed on exit)"
fi
