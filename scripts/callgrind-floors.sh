#!/usr/bin/env bash
# Instructions per request of a TLS proxy under valgrind's callgrind: a count that does not depend on what else
# the machine is doing, to set beside bench-compare.sh's CPU time per request (which does).
#
# For each proxy: the bench backend (nginx, one worker, 100-byte body) runs natively, the proxy runs under
# `valgrind --tool=callgrind`, h2load sends HTTP/1.1 keep-alive requests over --connections connections (one at
# a time on each). After a warm-up, the counters are zeroed, N requests run and the counts are dumped; then again
# with 2N. The difference, divided by N, is what one more request costs: the connections' handshakes and
# everything else the two runs share cancel out. User-space instructions only (valgrind does not see the kernel).
#
#   nio-floor    Benchmarks' nio-floor-proxy (SwiftNIO channels, the gateway's TLS handler)
#   epoll-floor  Benchmarks' epoll-floor-proxy (an epoll loop of its own, the gateway's TLSConnection)
#   nginx        Debian's nginx as the proxy (scripts/bench/proxy-nginx.conf, in one process: master_process off)
#
# Usage: scripts/callgrind-floors.sh [--proxies "nio-floor epoll-floor nginx"] [--requests 10000]
#                                   [--connections 16] [--no-build] [--out DIR]
# Loopback only (ports 18443 and 19100, refused if busy); every process it starts is stopped on exit. A run of
# the three proxies takes about 3 minutes (valgrind runs a proxy some 50 times slower).
set -euo pipefail

PROXIES="nio-floor epoll-floor nginx"
REQUESTS=10000
CONNECTIONS=16
BUILD=1
OUT=""
while [ $# -gt 0 ]; do
    case "$1" in
        --proxies) PROXIES="$2"; shift 2 ;;
        --requests) REQUESTS="$2"; shift 2 ;;
        --connections) CONNECTIONS="$2"; shift 2 ;;
        --no-build) BUILD=0; shift ;;
        --out) OUT="$2"; shift 2 ;;
        -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
        *) echo "unknown option: $1" >&2; exit 2 ;;
    esac
done
for number in "$REQUESTS" "$CONNECTIONS"; do
    [[ "$number" =~ ^[0-9]+$ ]] && [ "$number" -gt 0 ] || { echo "options take positive integers" >&2; exit 2; }
done
[ "$REQUESTS" -le 1000000 ] && [ "$CONNECTIONS" -le 1024 ] || { echo "bounded runs only" >&2; exit 2; }
for proxy in $PROXIES; do
    case "$proxy" in nio-floor|epoll-floor|nginx) ;; *) echo "--proxies: unknown proxy '$proxy'" >&2; exit 2 ;; esac
done

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
TEMPLATES="$ROOT/scripts/bench"
export PATH="/opt/swift/usr/bin:$PATH"
log() { printf '[callgrind-floors %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

missing=()
command -v nginx >/dev/null || missing+=(nginx)
command -v h2load >/dev/null || missing+=(nghttp2-client)
command -v valgrind >/dev/null || missing+=(valgrind)
command -v openssl >/dev/null || missing+=(openssl)
if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]}"
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
    $SUDO service nginx stop >/dev/null 2>&1 || true
fi

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

TMP="$(mktemp -d /tmp/tokengate-callgrind.XXXXXX)"
# shellcheck source=bench/processes.sh
source "$TEMPLATES/processes.sh"
# valgrind 3.19 (Debian 12) gives up on the DWARF that Swift 6 writes: run copies without it (the symbol table,
# which names the functions, stays).
for floor in "${!FLOORS[@]}"; do
    strip --strip-debug -o "$TMP/$floor-proxy" "${FLOORS[$floor]}"
    FLOORS[$floor]="$TMP/$floor-proxy"
done
[ -n "$OUT" ] || OUT="$TMP/results"
mkdir -p "$OUT"
for port in 18443 19100; do
    if port_busy "$port"; then log "port $port is busy"; exit 2; fi
done

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
    -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -keyout "$TMP/key.pem" -out "$TMP/cert.pem" 2>/dev/null
BODY="$(printf 'x%.0s' $(seq 1 99))"
render() {  # template -> $TMP/name, on this script's ports
    sed -e "s|@TMP@|$TMP|g" -e "s|@BODY@|$BODY\\\\n|g" -e "s|127.0.0.1:9100|127.0.0.1:19100|g" \
        -e "s|127.0.0.1:8443|127.0.0.1:18443|g" "$TEMPLATES/$1" > "$TMP/$1"
}
render backend-nginx.conf
render proxy-nginx.conf
# One process, so that valgrind sees the worker's instructions.
sed -i 's|^daemon off;|daemon off;\nmaster_process off;|' "$TMP/proxy-nginx.conf"

nginx -p "$TMP" -e "$TMP/backend-error.log" -c "$TMP/backend-nginx.conf" &
STARTED_PIDS+=("$!")
wait_port 19100 "$!" || { log "the backend did not start"; exit 1; }

URL="https://127.0.0.1:18443/api/bench"
load() {  # requests: h2load over HTTP/1.1, every answer must be a 2xx
    local output
    output="$(timeout 600 h2load --h1 -c "$CONNECTIONS" -n "$1" "$URL" 2>&1)" || true
    grep -q "status codes: $1 2xx" <<< "$output" || { log "not $1 2xx answers:"; echo "$output" >&2; return 1; }
}
control() {  # pid, callgrind_control option: valgrind takes the request when the proxy next runs, so poke it
    callgrind_control "$2" "$1" >/dev/null 2>&1 &
    local request=$!
    # An idle proxy sleeps in epoll_wait; a bare TCP connection (the same in every run, so it cancels) wakes it.
    while kill -0 "$request" 2>/dev/null; do sleep 0.5; port_busy 18443 || true; done
    wait "$request"
}
total() {  # callgrind dump file -> its instruction total
    awk '/^(summary|totals):/ {print $2; exit}' "$1"
}

printf 'proxy\trequests\tinstructions_n\tinstructions_2n\tinstructions_per_request\n' > "$OUT/callgrind.tsv"
for proxy in $PROXIES; do
    log "$proxy under callgrind"
    case "$proxy" in
        nginx) command=(nginx -p "$TMP" -e "$TMP/proxy-nginx-error.log" -c "$TMP/proxy-nginx.conf") ;;
        *) command=("${FLOORS[$proxy]}" --listen 127.0.0.1:18443 --backend 127.0.0.1:19100
                    --cert "$TMP/cert.pem" --key "$TMP/key.pem") ;;
    esac
    valgrind --tool=callgrind --callgrind-out-file="$TMP/$proxy.%p" "${command[@]}" > "$TMP/$proxy.log" 2>&1 &
    pid=$!
    STARTED_PIDS+=("$pid")
    for _ in $(seq 1 6); do wait_port 18443 "$pid" && break; done   # valgrind starts slowly: up to 60 s
    port_busy 18443 || { log "$proxy did not start"; tail -n 20 "$TMP/$proxy.log" >&2; exit 1; }
    load $((REQUESTS / 5))   # warm-up: first use of code and memory, not counted
    control "$pid" --zero
    load "$REQUESTS"
    control "$pid" --dump=n
    control "$pid" --zero
    load $((2 * REQUESTS))
    control "$pid" --dump=2n
    one="$(total "$(ls "$TMP/$proxy.$pid".* | sort | sed -n 1p)")"
    two="$(total "$(ls "$TMP/$proxy.$pid".* | sort | sed -n 2p)")"
    cp "$TMP/$proxy.$pid".* "$OUT/"
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    wait_gone 18443 || { log "port 18443 still busy"; exit 1; }
    printf '%s\t%s\t%s\t%s\t%s\n' "$proxy" "$REQUESTS" "$one" "$two" \
        "$(( (two - one) / REQUESTS ))" >> "$OUT/callgrind.tsv"
done
column -t "$OUT/callgrind.tsv"
log "dumps and results: $OUT (callgrind_annotate FILE shows where the instructions go)"
if [ "$OUT" = "$TMP/results" ]; then
    cp -r "$OUT" "/tmp/tokengate-callgrind-results.$$"
    log "copied to /tmp/tokengate-callgrind-results.$$ (the temporary directory is removed on exit)"
fi
