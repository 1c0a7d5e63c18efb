#!/usr/bin/env bash
# The `traceml` command's error paths under a sanitizer build (tests/run's
# ASan lane: build-asan/bin/traceml, leaks detected): each bad input is one
# error line and a non-zero exit, and leaves no leak or memory error behind.
# Prints "cli_errors: N passed, N failed".
#
#   tests/cli_errors.sh build-asan/bin/traceml
set -u
bin=$(realpath "${1:?usage: tests/cli_errors.sh TRACEML}")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0
failed=0

# check NAME ARGS...: exits non-zero, says "traceml: error:" or "usage",
# and the sanitizer says nothing
check() {
    local name=$1 rc
    shift
    (cd "$tmp" && "$bin" "$@") > "$tmp/out" 2>&1
    rc=$?
    if [ "$rc" -ne 0 ] && grep -qE 'traceml: error:|usage' "$tmp/out" &&
        ! grep -qE 'Sanitizer|runtime error' "$tmp/out"; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "FAIL $name (exit $rc):"
        head -20 "$tmp/out"
    fi
}

# check_says TEXT NAME ARGS...: the same, and the output says TEXT
check_says() {
    local text=$1 before=$failed
    shift
    check "$@"
    if [ "$failed" -eq "$before" ] && ! grep -qF -- "$text" "$tmp/out"; then
        passed=$((passed - 1))
        failed=$((failed + 1))
        echo "FAIL $1: does not say '$text':"
        head -20 "$tmp/out"
    fi
}

check "run: missing script" run "$tmp/missing.py"
check "run: missing script with its arguments" run "$tmp/missing.py" --epochs 3 --args "-x 1"
check "run: missing command after --" run -- "$tmp/missing-command"
check "run: unknown option" run --no-such-option train.py
check "run: bad --nproc-per-node" run --nproc-per-node zero train.py
check "view: missing run folder" view "$tmp/no-run"
check "compare: one operand" compare "$tmp/a.json"
check "export: missing run folder" export --chrome-trace "$tmp/no-run"
check "unknown command" no-such-command
check "no command"
printf '{"trials": [], "apply": "%s"}' "$(printf 'num_workers=1,%.0s' $(seq 20))" > "$tmp/long.json"
echo 'print("never run")' > "$tmp/x.py"
check_says "more than the 255" "run: --apply of an over-long setting string" run --apply "$tmp/long.json" "$tmp/x.py"
echo "cli_errors: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
