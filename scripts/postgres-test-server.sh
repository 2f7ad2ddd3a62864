#!/usr/bin/env bash
#===----------------------------------------------------------------------===//
# This source file is part of tokengate. Licensed under the Apache License v2.0.
#===----------------------------------------------------------------------===//
#
# A throwaway PostgreSQL 15 server for the tests of the PostgreSQL cutoff store. Test-only: trust
# authentication on loopback, no password, data in a temporary directory; except for the members of the role
# tokengate_password_login, which must give their password (scram-sha-256), for the password rotation tests.
#
#   scripts/postgres-test-server.sh start    # initdb + start (idempotent); prints the URL on stdout
#   scripts/postgres-test-server.sh url      # prints the URL of the running server
#   scripts/postgres-test-server.sh pause    # stops the server but keeps its data (store-down tests)
#   scripts/postgres-test-server.sh resume   # starts a paused server again on the same port
#   scripts/postgres-test-server.sh stop     # stops the server and removes its directory (idempotent)
#
# Typical use (.ci/run):
#   export TOKENGATE_TEST_POSTGRES_URL="$(scripts/postgres-test-server.sh start)"
#   trap 'scripts/postgres-test-server.sh stop' EXIT
#   swift test ...
#
# Environment (all optional):
#   TOKENGATE_PG_DIR   data/socket/log directory      (default /tmp/tokengate-pg-$UID)
#   TOKENGATE_PG_PORT  first port to try              (default 25432, below the kernel's ephemeral range, where
#                      a client connection's TIME_WAIT can hold a port; the next free one up to +100 is used)
#   TOKENGATE_PG_BIN   PostgreSQL binaries            (default /usr/lib/postgresql/15/bin)
#
# PostgreSQL refuses to run as root, so as root the server runs as the `postgres` system user (created if
# missing) and the directory is chowned to it. Everything but the URL goes to stderr.
set -euo pipefail

DIR="${TOKENGATE_PG_DIR:-/tmp/tokengate-pg-$(id -u)}"
FIRST_PORT="${TOKENGATE_PG_PORT:-25432}"
PGBIN="${TOKENGATE_PG_BIN:-/usr/lib/postgresql/15/bin}"
DATA="$DIR/data"
TEST_USER="tokengate"
TEST_DB="tokengate"

log() { echo "postgres-test-server: $*" >&2; }

# Runs a command as the OS user that owns the server (postgres when we are root, ourselves otherwise).
as_owner() {
    if [ "$(id -u)" = 0 ]; then
        # runuser keeps no tty requirements and needs no password; fall back to su.
        if command -v runuser >/dev/null 2>&1; then
            runuser -u postgres -- "$@"
        else
            su -s /bin/sh postgres -c "$(printf '%q ' "$@")"
        fi
    else
        "$@"
    fi
}

ensure_binaries() {
    if [ -x "$PGBIN/initdb" ] && [ -x "$PGBIN/pg_ctl" ]; then
        return
    fi
    if [ "$(id -u)" != 0 ]; then
        log "PostgreSQL binaries not found in $PGBIN and not root; install Debian's postgresql-15 package"
        exit 1
    fi
    log "installing Debian's postgresql-15 package"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq postgresql-15 >&2
    if [ ! -x "$PGBIN/initdb" ]; then
        log "postgresql-15 installed but $PGBIN/initdb is missing"
        exit 1
    fi
}

ensure_os_user() {
    [ "$(id -u)" = 0 ] || return 0
    if ! id postgres >/dev/null 2>&1; then
        log "creating the postgres system user"
        useradd --system --home-dir /var/lib/postgresql --shell /bin/sh postgres
    fi
}

port_in_use() {
    # bash's /dev/tcp: a successful connect means something listens there.
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

is_running() {
    [ -f "$DATA/PG_VERSION" ] && as_owner "$PGBIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1
}

url() {
    local port
    port="$(cat "$DIR/port")"
    echo "postgres://$TEST_USER@127.0.0.1:$port/$TEST_DB"
}

# Closes every inherited descriptor but 0-2 (and bash's own 255) in the current (sub)shell. The server is a
# daemon: anything it inherits stays open as long as it runs, and some callers wait for their descriptors to
# close (swift-corelibs-foundation's Process notices a child's exit that way, so it would wait for the server).
close_inherited_fds() {
    local fd
    for fd in /proc/$BASHPID/fd/*; do
        fd="${fd##*/}"
        if [ "$fd" -gt 2 ] && [ "$fd" != 255 ]; then
            eval "exec $fd>&-" 2>/dev/null || true
        fi
    done
}

# Loopback only, trust for every user: this server holds nothing but test data. Members of
# tokengate_password_login (a role the tests create) must give their password, so the tests can check that a
# rotated password is used. Written at every start, so a data directory made by an older version of this script
# gets the line too; a running server is told to reload it.
write_hba() {
    local wanted
    wanted="local all all trust
host all +tokengate_password_login 127.0.0.1/32 scram-sha-256
host all all 127.0.0.1/32 trust"
    if [ "$(cat "$DATA/pg_hba.conf" 2>/dev/null)" = "$wanted" ]; then
        return
    fi
    printf '%s\n' "$wanted" >"$DATA/pg_hba.conf"
    if [ "$(id -u)" = 0 ]; then chown postgres: "$DATA/pg_hba.conf"; fi
    if is_running; then
        as_owner "$PGBIN/pg_ctl" -D "$DATA" reload >&2
    fi
}

start_server() {
    (
        close_inherited_fds
        as_owner "$PGBIN/pg_ctl" -D "$DATA" -l "$DIR/server.log" -w -t 30 start >&2
    ) || {
        log "the server did not start; its log:"
        tail -n 30 "$DIR/server.log" >&2 || true
        exit 1
    }
}

cmd_start() {
    if is_running; then
        write_hba
        url
        return
    fi
    ensure_binaries
    ensure_os_user
    if [ ! -f "$DATA/PG_VERSION" ]; then
        rm -rf "$DIR"
        mkdir -p "$DIR"
        chmod 700 "$DIR"
        local port="$FIRST_PORT"
        while port_in_use "$port"; do
            port=$((port + 1))
            if [ "$port" -gt $((FIRST_PORT + 100)) ]; then
                log "no free port in $FIRST_PORT..$((FIRST_PORT + 100))"
                exit 1
            fi
        done
        echo "$port" >"$DIR/port"
        [ "$(id -u)" = 0 ] && chown -R postgres: "$DIR"
        log "initdb in $DATA"
        as_owner "$PGBIN/initdb" -D "$DATA" -U "$TEST_USER" --auth=trust -E UTF8 --locale=C.UTF-8 >"$DIR/initdb.log" 2>&1 || {
            cat "$DIR/initdb.log" >&2
            exit 1
        }
        cat >>"$DATA/postgresql.conf" <<EOF
# tokengate test server
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$DIR'
max_connections = 200
fsync = on
synchronous_commit = on
log_min_messages = warning
EOF
        [ "$(id -u)" = 0 ] && chown postgres: "$DATA/postgresql.conf"
        write_hba
        start_server
        as_owner "$PGBIN/createdb" -h 127.0.0.1 -p "$port" -U "$TEST_USER" "$TEST_DB" >&2
    else
        write_hba
        start_server
    fi
    log "running: $(url)"
    url
}

cmd_pause() {
    if is_running; then
        as_owner "$PGBIN/pg_ctl" -D "$DATA" -m fast -w stop >&2
    fi
}

cmd_resume() {
    if [ ! -f "$DATA/PG_VERSION" ]; then
        log "no server in $DIR; use start"
        exit 1
    fi
    is_running || start_server
}

cmd_stop() {
    if [ -f "$DATA/PG_VERSION" ] && is_running; then
        as_owner "$PGBIN/pg_ctl" -D "$DATA" -m fast -w stop >&2 || true
    fi
    rm -rf "$DIR"
}

case "${1:-}" in
start) cmd_start ;;
stop) cmd_stop ;;
url)
    if is_running; then url; else
        log "not running"
        exit 1
    fi
    ;;
pause) cmd_pause ;;
resume) cmd_resume ;;
*)
    echo "usage: $0 start|stop|url|pause|resume" >&2
    exit 2
    ;;
esac
