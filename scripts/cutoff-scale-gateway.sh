#!/usr/bin/env bash
# The gateway with many users' cutoffs, end to end on loopback: `tokengate serve` processes in front of a fixed
# nginx backend, driven by tokengate-bench, with a SQLite store (the `tokengate revoke` path) and then two gateways
# sharing a throwaway PostgreSQL (copy mode, scripts/postgres-test-server.sh).
#
#   scripts/cutoff-scale-gateway.sh [USERS]     (default 10000000)
#
# Settings (environment): RATE=2000 requests/s in the latency rounds, DURATION=10 s per round, ROUNDS=3,
# REVOCATION_RATE=100 revocations/s, PROBES=20 timed revocations per store (each given PROBE_TIMEOUT=10 s to
# be enforced), PHASES="sqlite postgres",
# TOKENGATE_BIN (default .build-release/release/tokengate, built by scripts/cutoff-scale.sh or
# `swift build -c release --scratch-path .build-release`), BENCH_BIN (tokengate-bench, default next to it).
#
# What it prints (lines prefixed SCALE; docs/operations.md, "Sizing the cutoff snapshot", has the figures):
# - startup: from `serve` to `/readyz` answering 200 (the whole store read, the listeners bound), the CPU time the
#   gateway used until then, the load average, and the gateway's resident memory (VmRSS) then and its peak (VmHWM)
#   at the end;
# - enforcement: PROBES users, each given a token, then revoked (SQLite: `tokengate revoke --user`, a process
#   of its own; PostgreSQL: the admin API of gateway A), and the time from the revocation's return until
#   the gateway (SQLite) or gateway B (PostgreSQL) answers that token 401, polled over one keep-alive TLS
#   connection every millisecond;
# - p99 under revocations (SQLite): ROUNDS pairs of fixed-rate runs (tokengate-bench --rate RATE, api tokens of
#   5,000 users that are in the store), one quiet and one while another process commits REVOCATION_RATE
#   revocations a second to the store, interleaved; the p99 of each and their medians.
# Bounded: every run has a duration, every wait a timeout, and the whole script stops after 40 minutes.
# Loopback only; every process started here is stopped on exit.
set -euo pipefail
# The bound: the whole run under timeout(1), which stops it (and with it the cleanup below) after 40 minutes.
if [ -z "${CUTOFF_SCALE_BOUNDED:-}" ]; then
    CUTOFF_SCALE_BOUNDED=1 exec timeout 2400 "$0" "$@"
fi
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
USERS="${1:-10000000}"
case "$USERS" in ''|*[!0-9]*) echo "usage: $0 [USERS]" >&2; exit 64 ;; esac
RATE="${RATE:-2000}"
DURATION="${DURATION:-10}"
ROUNDS="${ROUNDS:-3}"
REVOCATION_RATE="${REVOCATION_RATE:-100}"
PROBES="${PROBES:-20}"
PROBE_TIMEOUT="${PROBE_TIMEOUT:-10}"
PHASES="${PHASES:-sqlite postgres}"
TOKENGATE="${TOKENGATE_BIN:-$ROOT/.build-release/release/tokengate}"
BENCH="${BENCH_BIN:-$(dirname "$TOKENGATE")/tokengate-bench}"
[ -x "$TOKENGATE" ] && [ -x "$BENCH" ] || { echo "missing $TOKENGATE or $BENCH" >&2; exit 2; }

TMP="$(mktemp -d /tmp/tokengate-scale.XXXXXX)"
STARTED_PIDS=()
PG_STARTED=0
cleanup() {
    for pid in "${STARTED_PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    [ "$PG_STARTED" = 1 ] && bash "$ROOT/scripts/postgres-test-server.sh" stop >/dev/null 2>&1 || true
    rm -rf "$TMP"
}
trap cleanup EXIT
log() { echo "cutoff-scale-gateway: $*" >&2; }

# --- Certificate, key, backend. ----------------------------------------------------------------------------------
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
    -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" -keyout "$TMP/key.pem" -out "$TMP/cert.pem" 2>/dev/null
K="$(openssl rand 32 | openssl base64 -A | tr '+/' '-_' | tr -d '=')"
printf '{"keys":[{"kty":"oct","kid":"bench","alg":"HS256","use":"sig","k":"%s"}]}\n' "$K" > "$TMP/hs256.jwks"
chmod 600 "$TMP/hs256.jwks" "$TMP/key.pem"
BODY="$(printf 'x%.0s' $(seq 1 99))"
sed -e "s|@TMP@|$TMP|g" -e "s|@BODY@|$BODY\\\\n|g" "$ROOT/scripts/bench/backend-nginx.conf" > "$TMP/backend-nginx.conf"
nginx -p "$TMP" -e "$TMP/backend-error.log" -c "$TMP/backend-nginx.conf" &
STARTED_PIDS+=("$!")

# gateway_config NAME PORT ADMIN_PORT CUTOFFS_YAML
gateway_config() {
    cat > "$TMP/$1.yaml" <<EOF
listen:
  - address: 127.0.0.1:$2
    tls:
      certificates:
        - { cert: $TMP/cert.pem, key: $TMP/key.pem }
admin: { address: 127.0.0.1:$3 }
keys:
  - jwks: $TMP/hs256.jwks
tokens:
  algorithms: [HS256]
cutoffs: $4
upstreams:
  backend:
    targets: [ "http://127.0.0.1:9100" ]
routes:
  - path_prefix: /
    upstream: backend
    accept: [api]
    sources: [ authorization ]
event_loops: 1
log:
  level: warning
  access_log: false
EOF
}

# start_gateway NAME ADMIN_PORT: starts it, waits for /readyz, sets GATEWAY_PID and prints the startup figures.
start_gateway() {
    local started now
    started="$(date +%s.%N)"
    "$TOKENGATE" serve --config "$TMP/$1.yaml" > "$TMP/$1.log" 2>&1 &
    GATEWAY_PID=$!
    STARTED_PIDS+=("$GATEWAY_PID")
    for _ in $(seq 1 12000); do
        if curl -fsS -m 1 "http://127.0.0.1:$2/readyz" >/dev/null 2>&1; then
            now="$(date +%s.%N)"
            # CPU time (user + system, every thread) next to the wall time: on a shared machine the wall time is
            # mostly waiting for a core, the CPU time what the start costs.
            echo "SCALE gateway $1 users=$USERS startup=$(python3 -c "print(round($now - $started, 2))") s" \
                "cpu=$(python3 -c "import os; f = open('/proc/$GATEWAY_PID/stat').read().rsplit(')', 1)[1].split(); print(round((int(f[11]) + int(f[12])) / os.sysconf('SC_CLK_TCK'), 2))") s" \
                "rss=$(( $(awk '/VmRSS/ {print $2}' "/proc/$GATEWAY_PID/status") / 1024 )) MiB" \
                "load=$(cut -d' ' -f1 /proc/loadavg)"
            return 0
        fi
        kill -0 "$GATEWAY_PID" 2>/dev/null || { log "gateway $1 exited"; cat "$TMP/$1.log" >&2; exit 1; }
        sleep 0.01
    done
    log "gateway $1 not ready after 120 s"; cat "$TMP/$1.log" >&2; exit 1
}

peak() {  # peak NAME PID
    echo "SCALE gateway $1 peak rss=$(( $(awk '/VmHWM/ {print $2}' "/proc/$2/status") / 1024 )) MiB" \
        "rss now=$(( $(awk '/VmRSS/ {print $2}' "/proc/$2/status") / 1024 )) MiB"
}

# probes LABEL PORT REVOKE...: PROBES users get a token, are revoked by REVOKE (with {user} replaced), and the
# time from its return until PORT answers the token 401 is measured.
probes() {
    local label="$1" port="$2"; shift 2
    python3 - "$label" "$port" "$PROBES" "$TOKENGATE" "$TMP" "$PROBE_TIMEOUT" "$@" <<'EOF'
import http.client, ssl, subprocess, sys, time
label, port, probes, tokengate, tmp = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
limit = float(sys.argv[6])
revoke = sys.argv[7:]
context = ssl.create_default_context(cafile=tmp + "/cert.pem")
connection = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=5)
def status(token):
    connection.request("GET", "/probe", headers={"Authorization": "Bearer " + token, "Host": "localhost"})
    response = connection.getresponse(); response.read()
    return response.status
latencies = []
for i in range(probes):
    user = "probe-%d-%d" % (int(time.time()), i)
    token = subprocess.check_output([tokengate, "token", "mint", "--key", tmp + "/hs256.jwks", "--sub", user,
                                     "--api-only", "--iat", str(int(time.time()) - 5)], text=True).strip()
    assert status(token) == 200, "the probe's token is not accepted before its revocation"
    subprocess.run([part.replace("{user}", user) for part in revoke], check=True, stdout=subprocess.DEVNULL)
    returned = time.monotonic()
    while status(token) != 401:
        if time.monotonic() - returned > limit:
            sys.exit("not enforced within %g s" % limit)
        time.sleep(0.001)
    latencies.append(time.monotonic() - returned)
    time.sleep(0.05)
latencies.sort()
pick = lambda p: latencies[min(len(latencies) - 1, int(len(latencies) * p))] * 1000
print("SCALE enforce %s probes=%d after the revocation returned: p50=%.0f ms p99=%.0f ms max=%.0f ms"
      % (label, len(latencies), pick(0.5), pick(0.99), latencies[-1] * 1000))
EOF
}

# bench_round LABEL PORT PID: one fixed-rate run; prints its p99.
bench_round() {
    "$BENCH" run --url "https://127.0.0.1:$2/api/bench" --cacert "$TMP/cert.pem" --key "$TMP/hs256.jwks" \
        --rate "$RATE" --duration "$DURATION" --connections 32 --mix api=100 --users 5000 \
        --gateway-pid "$3" --json "$TMP/$1.json" > "$TMP/$1.txt" 2>&1 || { cat "$TMP/$1.txt" >&2; exit 1; }
    python3 - "$TMP/$1.json" "$1" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
l = r["latency_micros"]
print("SCALE round %s rate=%.0f/s p50=%d us p99=%d us max=%d us unexpected=%d errors=%d"
      % (sys.argv[2], r["requests_per_second"], l["p50"], l["p99"], l["max"], r["unexpected_statuses"], sum(r["errors"].values())))
EOF
}

fill_sqlite() {  # the users, as a site's bulk import would write them; the bench's 5,000 api users among them
    python3 - "$1" "$USERS" <<'EOF'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1]); n = int(sys.argv[2])
rows = (("bench-api-%d" % i if i < 5000 else "user-%d" % i, 1000 + i % 1000) for i in range(n))
c.executemany("INSERT INTO user_cutoffs (user_id, revoked_before, updated_at) VALUES (?, ?, 0)", rows)
c.commit(); c.close()
EOF
}

# --- SQLite: one gateway, `tokengate revoke` from another process. ----------------------------------------------
if [[ " $PHASES " == *" sqlite "* ]]; then
    gateway_config sqlite 18443 19901 "{ sqlite: $TMP/cutoffs.db }"
    start_gateway sqlite 19901 >/dev/null   # creates the store
    kill "$GATEWAY_PID"; wait "$GATEWAY_PID" || true
    log "filling $USERS users into SQLite"
    fill_sqlite "$TMP/cutoffs.db"
    start_gateway sqlite 19901
    SQLITE_PID="$GATEWAY_PID"
    probes sqlite 18443 "$TOKENGATE" revoke --config "$TMP/sqlite.yaml" --user "{user}"
    for round in $(seq 1 "$ROUNDS"); do
        bench_round "sqlite-quiet-$round" 18443 "$SQLITE_PID"
        python3 - "$TMP/cutoffs.db" "$REVOCATION_RATE" "$((DURATION + 2))" "$USERS" > "$TMP/writer-$round.txt" <<'EOF' &
import sqlite3, sys, time
c = sqlite3.connect(sys.argv[1], isolation_level=None); c.execute("PRAGMA busy_timeout = 5000")
rate, seconds, n = float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
start = time.time(); i = 0
while time.time() - start < seconds:
    time.sleep(max(0, start + i / rate - time.time()))
    # A cutoff in the past (2020): a real change of the row, which no token of the run was issued before.
    c.execute("UPDATE user_cutoffs SET revoked_before = ? WHERE user_id = ?", (1577836800 + i, "user-%d" % (5000 + i * 7919 % (n - 5000))))
    i += 1
print(i / (time.time() - start))
EOF
        WRITER=$!
        sleep 1
        bench_round "sqlite-revoking-$round" 18443 "$SQLITE_PID"
        wait "$WRITER"
        echo "SCALE writer round $round: $(cat "$TMP/writer-$round.txt") revocations/s committed"
    done
    peak sqlite "$SQLITE_PID"
    kill "$SQLITE_PID"; wait "$SQLITE_PID" || true
    rm -f "$TMP"/cutoffs.db*
fi

# --- PostgreSQL: two gateways sharing one database; the admin API of A, timed at B. -----------------------------
if [[ " $PHASES " == *" postgres "* ]]; then
    URL="$(bash "$ROOT/scripts/postgres-test-server.sh" start)"
    PG_STARTED=1
    TABLE="scale_$(date +%s)"
    gateway_config pg-a 18444 19902 "{ postgres: \"$URL\", table: $TABLE, resync_interval: 10m }"
    gateway_config pg-b 18445 19903 "{ postgres: \"$URL\", table: $TABLE, resync_interval: 10m }"
    start_gateway pg-a 19902 >/dev/null   # creates the tables
    kill "$GATEWAY_PID"; wait "$GATEWAY_PID" || true
    log "filling $USERS users into PostgreSQL"
    psql "$URL" -X -q -v ON_ERROR_STOP=1 -c "
        ALTER TABLE $TABLE DISABLE TRIGGER USER;
        INSERT INTO $TABLE (user_id, revoked_before, updated_at)
            SELECT CASE WHEN i < 5000 THEN 'bench-api-' || i ELSE 'user-' || i END, 1000 + i % 1000, 0
            FROM generate_series(0, $USERS - 1) AS i;
        ALTER TABLE $TABLE ENABLE TRIGGER USER;
        ANALYZE $TABLE;" >/dev/null
    start_gateway pg-a 19902
    A_PID="$GATEWAY_PID"
    start_gateway pg-b 19903
    B_PID="$GATEWAY_PID"
    probes "postgres (admin API at A, enforced at B)" 18445 \
        curl -fsS -m 5 -H "Content-Type: application/json" -d "{}" "http://127.0.0.1:19902/admin/users/{user}/password-changed"
    peak pg-a "$A_PID"
    peak pg-b "$B_PID"
    psql "$URL" -X -q -c "DROP TABLE $TABLE; DROP TABLE ${TABLE}_global" >/dev/null || true
fi
