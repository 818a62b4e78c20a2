#!/usr/bin/env bash
# `bt` of the panicking CPU on the Debian guest's ELF dump (`kcrash-harness linux`, directory in
# KCRASH_LINUX_GUEST or the argument), side by side with crash's `bt` and drgn's stack trace of
# the crashed thread, from the shell's start to its exit:
#   - kcrash cold: no name-index cache (each run starts with an empty one), as on the first open
#     of a vmlinux;
#   - kcrash warm: the cache as the first open left it;
#   - crash and drgn, which keep no cache between runs.
# Each warm command runs once to warm the page cache, then RUNS times (default 5); prints the
# median wall time and the largest peak RSS (/usr/bin/time).
set -euo pipefail
. "$(dirname "$0")/measure.sh" "$@"
cache=$(mktemp -d)
trap 'rm -rf "$cache" "$tmp"' EXIT
export KCRASH_INDEX_CACHE=$cache

printf '%-58s %8s %12s\n' "command ($runs runs)" "median" "peak RSS"
measure_cold "kcrash bt vmcore.elf vmlinux (cold: no index cache)" "rm -rf '$cache'/*" \
    "$kcrash" -s -c bt vmcore.elf vmlinux
measure "kcrash bt vmcore.elf vmlinux (warm index cache)" \
    "$kcrash" -s -c bt vmcore.elf vmlinux
printf 'bt\nq\n' >"$cache/crash-input"
measure "crash -s vmlinux vmcore.elf < bt" \
    sh -c "exec crash -s vmlinux vmcore.elf < '$cache/crash-input'"
measure "drgn vmcore.elf vmlinux, crashed_thread().stack_trace()" \
    drgn -q -c vmcore.elf -s vmlinux -e 'print(prog.crashed_thread().stack_trace())'
