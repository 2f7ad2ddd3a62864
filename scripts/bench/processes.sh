# Sourced by bench-compare.sh and bench-idle.sh: every process a run starts is stopped on exit, and ports are
# waited for with a bound. The caller sets TMP (removed on exit) and appends the PIDs it starts to
# STARTED_PIDS.
# shellcheck shell=bash

STARTED_PIDS=()

cleanup() {  # TERM everything started, KILL what is still there 5 s later, remove the temporary directory
    local pid
    for pid in "${STARTED_PIDS[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${STARTED_PIDS[@]}"; do
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port_busy() {  # port: something listens there already
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

wait_port() {  # port, pid: until something listens (or the process died), at most 10 s
    for _ in $(seq 1 100); do
        if port_busy "$1"; then return 0; fi
        kill -0 "$2" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

wait_gone() {  # port: until nothing listens (the previous process is really gone), at most 10 s
    for _ in $(seq 1 100); do
        port_busy "$1" || return 0
        sleep 0.1
    done
    return 1
}
