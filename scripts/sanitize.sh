#!/usr/bin/env bash
# The unit and integration suites under AddressSanitizer (with LeakSanitizer) and ThreadSanitizer: memory errors
# and data races at the C boundaries (OpenSSL, libnghttp2, libpq, SQLite) and in the Swift code around them.
#
# Usage: scripts/sanitize.sh [--sanitizers "address thread"] [--filter REGEX ...] [--no-build]
#   --sanitizers  which runs (default both); each has its own scratch path, .build-asan and .build-tsan
#   --filter      test filter(s) passed to `swift test` (repeatable; default: every test target)
#   --no-build    use what an earlier run built
#
# Each sanitizer writes its reports to files (log_path) rather than only to stderr, so that a report from a
# process a test starts and reads (the tokengate binary under ServeCommandTests, for one) is not lost in that
# test's captured output; the run fails when any report file exists, or when a test fails.
#
# Slow on 2 cores: a sanitized build of everything takes several minutes each, and the tests run a few times
# slower than without (docs/hardening.md has the measured times).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/opt/swift/usr/bin:$PATH"

SANITIZERS="address thread"
FILTERS=()
BUILD=1
while [ $# -gt 0 ]; do
    case "$1" in
        --sanitizers) SANITIZERS="$2"; shift 2 ;;
        --filter) FILTERS+=(--filter "$2"); shift 2 ;;
        --no-build) BUILD=0; shift ;;
        *) echo "sanitize.sh: unknown option $1" >&2; exit 2 ;;
    esac
done

scripts/install-deps.sh test
if [ -z "${TOKENGATE_TEST_POSTGRES_URL:-}" ]; then
    # Its own server directory, so that a scripts/test.sh running beside it keeps its own.
    export TOKENGATE_PG_DIR="${TOKENGATE_PG_DIR:-/tmp/tokengate-pg-sanitize-$$}"
    TOKENGATE_TEST_POSTGRES_URL="$(bash scripts/postgres-test-server.sh start)"
    export TOKENGATE_TEST_POSTGRES_URL
    trap 'bash scripts/postgres-test-server.sh stop >/dev/null 2>&1 || true' EXIT
fi

SUPPRESSIONS="$PWD/scripts/sanitizers"
status=0
for sanitizer in $SANITIZERS; do
    case "$sanitizer" in
        address) scratch=.build-asan ;;
        thread) scratch=.build-tsan ;;
        *) echo "sanitize.sh: unknown sanitizer $sanitizer (address, thread)" >&2; exit 2 ;;
    esac
    reports="$PWD/$scratch/sanitizer-reports"
    rm -rf "$reports"
    mkdir -p "$reports"
    begin=$(date +%s)
    if [ "$BUILD" = 1 ]; then
        swift build --build-tests --sanitize="$sanitizer" --scratch-path "$scratch" 2>&1 | grep -E "error|warning: unre|Compiling|Build" | tail -3
    fi
    built=$(date +%s)
    # ASan stops at its first error (it cannot go on past one); TSan reports every race and goes on, so one run
    # shows all of them. detect_stack_use_after_return stays off: it makes every frame a heap allocation.
    # quarantine_size_mb=16 (default 256): the gateway tests bound resident memory (100 MB streamed through with
    # under 48 MiB of growth), and a 256 MB quarantine keeps that much freed memory resident on purpose; a use
    # after free is still caught within the last 16 MB freed, which is where a use-after-free in an event loop's
    # read-write cycle falls.
    export ASAN_OPTIONS="log_path=$reports/asan:detect_leaks=1:halt_on_error=1:detect_stack_use_after_return=0:quarantine_size_mb=16:suppressions=$SUPPRESSIONS/asan.supp"
    export LSAN_OPTIONS="suppressions=$SUPPRESSIONS/lsan.supp:print_suppressions=0"
    export TSAN_OPTIONS="log_path=$reports/tsan:halt_on_error=0:second_deadlock_stack=1:suppressions=$SUPPRESSIONS/tsan.supp"
    log="$PWD/$scratch/sanitize-test.log"
    : > "$log"
    # One run of the selection; for ASan without --filter two, because LeakSanitizer is off for the gateway tests:
    # they leave reference cycles behind at exit (EmbeddedChannels their tests never close, in-process gateways,
    # and upstream pool connections; docs/hardening.md, "Sanitizers", has the analysis). Every other test target
    # runs with leak checking on; AddressSanitizer's memory-error checks stay on for all of them.
    runs=("${FILTERS[@]}")
    if [ "$sanitizer" = address ] && [ ${#FILTERS[@]} = 0 ]; then runs=(--skip TokengateGatewayTests); fi
    for pass in 1 2; do
        if [ "$pass" = 2 ]; then
            [ "$sanitizer" = address ] && [ ${#FILTERS[@]} = 0 ] || break
            runs=(--filter TokengateGatewayTests)
            export ASAN_OPTIONS="${ASAN_OPTIONS/detect_leaks=1/detect_leaks=0}"
        fi
        if ! swift test --skip-build --no-parallel --sanitize="$sanitizer" --scratch-path "$scratch" "${runs[@]}" \
            >> "$log" 2>&1; then
            echo "sanitize.sh: $sanitizer: tests failed (log: $log)" >&2
            grep -E "✘|error:|failed" "$log" | head -20 >&2
            status=1
        fi
    done
    unset ASAN_OPTIONS LSAN_OPTIONS TSAN_OPTIONS
    finished=$(date +%s)
    count="$(ls "$reports" | wc -l)"
    summary="$(grep -E "Test run with" "$log" | sed 's/^[^A-Za-z]*//' | tr '\n' ' ')"
    echo "sanitize.sh: $sanitizer: build $((built - begin)) s, tests $((finished - built)) s, $count report file(s); $summary"
    if [ "$count" != 0 ]; then
        status=1
        for file in "$reports"/*; do
            echo "--- $file" >&2
            grep -E "^(==|WARNING|ERROR|SUMMARY|    #[0-9] )" "$file" | head -25 >&2
        done
    fi
done
exit "$status"
