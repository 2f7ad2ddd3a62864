#!/usr/bin/env bash
# Memory per slow reader, and what slow readers leave to everyone else: tokengate in front of a fixed backend
# (Debian's nginx, one worker, a static file of --bytes on /big and its connection count on /status) with N
# trickle readers (scripts/slow-readers/trickle_readers.py: TLS, HTTP/1.1, a 4 KiB receive buffer, --rate bytes a
# second each) on a public route whose upstream allows 64 backend connections.
#
# The gateway's VmRSS is read from /proc before the readers (after a warm-up of 200 requests) and once every
# reader has sent its request and 5 s have passed; the difference over N is the memory per slow reader. The
# kernel's TCP memory (/proc/net/sockstat, `mem` pages: every socket's buffers on the machine, so run it on a
# quiet one) is read at the same moments. At that moment the backend's open connections (nginx stub_status)
# and 50 requests of another client (status codes, median and slowest time; for /big and for a 100-byte
# /small) show whether the readers hold backend connections or slow anyone else down; the same requests are
# timed before the readers for comparison. The configuration (scripts/slow-readers/tokengate.yaml) turns the
# rate check off by default so that no reader is cut during the measurement (--min-rate sets
# limits.response_min_rate, with a 2 s response_send_timeout, to watch them being cut instead), and sets
# response_buffer_total from --total (default 1GiB: every reader fits; `--total 0` shows the old behaviour).
#
# Usage: scripts/slow-readers.sh [--readers 1000] [--bytes 200000] [--rate 10] [--total 1GiB] [--min-rate 0]
#                                [--gateway PATH] [--port 28543] [--backend-port 29200] [--no-build]
# Loopback only, bounded: at most 5000 readers, each run under three minutes; every process it starts is stopped.
set -euo pipefail

READERS=1000
BYTES=200000
RATE=10
TOTAL=1GiB
MIN_RATE=0
GATEWAY=""
PORT=28543
BACKEND_PORT=29200
BUILD=1
while [ $# -gt 0 ]; do
    case "$1" in
        --readers) READERS="$2"; shift 2 ;;
        --bytes) BYTES="$2"; shift 2 ;;
        --rate) RATE="$2"; shift 2 ;;
        --total) TOTAL="$2"; shift 2 ;;
        --min-rate) MIN_RATE="$2"; shift 2 ;;
        --gateway) GATEWAY="$2"; shift 2 ;;
        --port) PORT="$2"; shift 2 ;;
        --backend-port) BACKEND_PORT="$2"; shift 2 ;;
        --no-build) BUILD=0; shift ;;
        -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
        *) echo "unknown option: $1" >&2; exit 2 ;;
    esac
done
for number in "$READERS" "$BYTES" "$RATE" "$MIN_RATE" "$PORT" "$BACKEND_PORT"; do
    [[ "$number" =~ ^[0-9]+$ ]] || { echo "options take non-negative integers" >&2; exit 2; }
done
[ "$READERS" -ge 1 ] && [ "$READERS" -le 5000 ] && [ "$BYTES" -le 100000000 ] || {
    echo "bounded runs only: --readers 1..5000, --bytes at most 100000000" >&2; exit 2; }

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
export PATH="/opt/swift/usr/bin:$PATH"
log() { printf '[slow-readers %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
for tool in nginx openssl curl python3; do
    command -v "$tool" >/dev/null || { log "missing $tool (scripts/install-deps.sh test installs it)"; exit 2; }
done
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
if [ -z "$GATEWAY" ]; then
    [ "$BUILD" = 0 ] || (cd "$ROOT" && swift build -c release --product tokengate >/dev/null)
    GATEWAY="$(cd "$ROOT" && swift build -c release --show-bin-path)/tokengate"
fi
[ -x "$GATEWAY" ] || { log "not executable: $GATEWAY"; exit 2; }

TMP="$(mktemp -d /tmp/tokengate-slow-readers.XXXXXX)"
# shellcheck source=bench/processes.sh
source "$ROOT/scripts/bench/processes.sh"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
    -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -keyout "$TMP/key.pem" -out "$TMP/cert.pem" 2>/dev/null
chmod 600 "$TMP/key.pem"
echo '{}' > "$TMP/cutoffs.json"
mkdir -p "$TMP/www"
chmod 755 "$TMP" "$TMP/www"  # nginx's worker (nobody) serves the file
head -c "$BYTES" /dev/zero | tr '\0' x > "$TMP/www/big"
head -c 100 /dev/zero | tr '\0' x > "$TMP/www/small"
chmod 644 "$TMP/www/big" "$TMP/www/small"
cat > "$TMP/backend-nginx.conf" <<NGINX
worker_processes 1;
daemon off;
pid $TMP/backend.pid;
error_log $TMP/backend-error.log warn;
events { worker_connections 8192; }
http {
    access_log off;
    client_body_temp_path $TMP/backend-body;
    proxy_temp_path $TMP/backend-proxy;
    fastcgi_temp_path $TMP/backend-fastcgi;
    uwsgi_temp_path $TMP/backend-uwsgi;
    scgi_temp_path $TMP/backend-scgi;
    keepalive_requests 1000000;
    server {
        listen 127.0.0.1:$BACKEND_PORT backlog=4096;
        root $TMP/www;
        location = /status { stub_status; }
        location / { default_type text/plain; }
    }
}
NGINX
sed -e "s|@PORT@|$PORT|g" -e "s|@BACKEND_PORT@|$BACKEND_PORT|g" -e "s|@TOTAL@|$TOTAL|g" \
    -e "s|@MIN_RATE@|$MIN_RATE|g" \
    "$ROOT/scripts/slow-readers/tokengate.yaml" > "$TMP/tokengate.yaml"

for port in "$PORT" "$BACKEND_PORT"; do
    ! port_busy "$port" || { log "port $port is in use; pick others with --port/--backend-port"; exit 1; }
done
nginx -p "$TMP" -e "$TMP/backend-error.log" -c "$TMP/backend-nginx.conf" &
STARTED_PIDS+=("$!")
wait_port "$BACKEND_PORT" "$!" || { log "the backend did not start"; exit 1; }
"$GATEWAY" serve --config "$TMP/tokengate.yaml" > "$TMP/gateway.log" 2>&1 &
pid=$!
STARTED_PIDS+=("$pid")
wait_port "$PORT" "$pid" || { log "the gateway did not start"; tail -n 20 "$TMP/gateway.log" >&2; exit 1; }

rss() { awk '/^VmRSS/ { print $2 }' "/proc/$pid/status"; }
backend_connections() { curl -s "http://127.0.0.1:$BACKEND_PORT/status" | awk '/^Active/ { print $3 - 1 }'; }
kernel_tcp_kib() { awk '/^TCP:/ { for (i = 1; i < NF; i++) if ($i == "mem") print $(i + 1) * 4 }' /proc/net/sockstat; }
others() {  # 50 requests of another client to $1: status codes counted, median and slowest time
    local path="$1" times="" codes=""
    for _ in $(seq 1 50); do
        line="$(curl -sk -o /dev/null -w '%{http_code} %{time_total}' --max-time 10 "https://127.0.0.1:$PORT$path")"
        codes="$codes ${line% *}"
        times="$times ${line#* }"
    done
    python3 - "$path" "$codes" "$times" <<'PY'
import collections, statistics, sys
codes = collections.Counter(sys.argv[2].split())
times = sorted(float(t) * 1000 for t in sys.argv[3].split())
print("%s: %s; median %.1f ms, slowest %.1f ms" % (sys.argv[1], " ".join("%sx%d" % c for c in sorted(codes.items())),
                                                   statistics.median(times), times[-1]))
PY
}

for _ in $(seq 1 200); do curl -sk -o /dev/null "https://127.0.0.1:$PORT/big"; done
sleep 1
before="$(rss)"
kernel_before="$(kernel_tcp_kib)"
log "gateway RSS before: $before KiB; kernel TCP memory: $kernel_before KiB; backend connections: $(backend_connections)"
log "others before: $(others /big) | $(others /small)"
log "$READERS trickle readers of $BYTES bytes at $RATE B/s, response_buffer_total $TOTAL"
python3 "$ROOT/scripts/slow-readers/trickle_readers.py" 127.0.0.1 "$PORT" /big --tls --count "$READERS" \
    --rate "$RATE" --seconds 170 --ready "$TMP/ready" > "$TMP/readers.json" &
readers=$!
STARTED_PIDS+=("$readers")
for _ in $(seq 1 1500); do [ -e "$TMP/ready" ] || { kill -0 "$readers" 2>/dev/null || break; sleep 0.1; }; done
[ -e "$TMP/ready" ] || { log "the readers did not all send their requests"; exit 1; }
sleep 5
during="$(rss)"
kernel_during="$(kernel_tcp_kib)"
log "gateway RSS with the readers: $during KiB; kernel TCP memory: $kernel_during KiB; backend connections: $(backend_connections)"
log "others with the readers: $(others /big) | $(others /small)"
python3 -c "print('memory per slow reader: %.1f KiB of gateway RSS (%d KiB over %d readers of %d bytes), %.1f KiB of kernel TCP memory' % (($during - $before) / $READERS, $during - $before, $READERS, $BYTES, ($kernel_during - $kernel_before) / $READERS))"
if [ "$MIN_RATE" -gt 0 ]; then
    # Below the rate the readers are cut once their 2 s (plus what they earned) are spent.
    sleep 10
    log "10 s later: gateway RSS $(rss) KiB; kernel TCP memory $(kernel_tcp_kib) KiB; $(grep ^TCP: /proc/net/sockstat);" \
        "client connections open:" \
        "$(ss -Htn state established "( sport = :$PORT )" | wc -l)"
fi
kill -TERM "$readers" 2>/dev/null || true
wait "$readers" 2>/dev/null || true
