#!/usr/bin/env bash
# kcrash, drgn and crash answering the same questions about the Debian guest's ELF dump
# (`kcrash-harness linux`; directory in KCRASH_LINUX_GUEST or the first argument), one after the
# other in one run, each from its start to its exit:
#   - open and print KLogs[2] (the klogtest module's KLog), with vmlinux and klogtest.ko;
#   - the kernel's printk log (kcrash's and crash's `log`, drgn's print_dmesg);
#   - klog's job: every KLog ring merged and printed, newest first (kcrash's `klog 0 full`;
#     drgn running kcrash/benches/klog_drgn.py, a script that rebuilds the rings the drgn way;
#     crash has no reader for them).
# kcrash runs cold (an empty name-index cache before each run, as on the first open of a kernel
# build) and warm (the cache the first open left, when one was written); drgn and crash keep
# nothing between runs. Each command but the cold one runs once to warm the page cache, then
# RUNS times (default 5). Prints the median wall time, the largest peak RSS and each figure
# over kcrash cold's for the same question.
set -euo pipefail
bench=$(cd "$(dirname "$0")" && pwd)
. "$bench/measure.sh" "$@"
cache=$(mktemp -d)
trap 'rm -rf "$cache" "$tmp"' EXIT
export KCRASH_INDEX_CACHE=$cache
files=(vmcore.elf vmlinux klogtest.ko)

# The median and peak of RUNS runs of a command, as "median peak"; PREPARE (may be empty) runs
# untimed before each, and without one a run first warms the page cache.
runs_of() {
    local prepare=$1 times=() peak=0
    shift
    [ -n "$prepare" ] || "$@" >/dev/null 2>&1 || true
    for _ in $(seq "$runs"); do
        [ -z "$prepare" ] || sh -c "$prepare"
        local out
        out=$(timed "$@")
        times+=("${out% *}")
        [ "${out#* }" -gt "$peak" ] && peak=${out#* }
    done
    printf '%s %s\n' "$(printf '%s\n' "${times[@]}" | sort -n | sed -n "$(((runs + 1) / 2))p")" "$peak"
}

# One row: LABEL, then the figures of "median peak" against BASE's.
row() {
    local label=$1 figures=$2 base=$3
    local median=${figures% *} peak=${figures#* } base_median=${base% *} base_peak=${base#* }
    awk -v l="$label" -v m="$median" -v p="$peak" -v bm="$base_median" -v bp="$base_peak" 'BEGIN {
        printf "%-44s %7.2f s %8.0f MiB %7.2fx %6.2fx\n", l, m, p / 1024, m / bm, p / bp }'
}

# question TITLE KCRASH_COMMAND CRASH_INPUT DRGN_ARGUMENTS...: one block of rows (no crash
# row when CRASH_INPUT is empty).
question() {
    local title=$1 command=$2 crash_input=$3
    shift 3
    echo "== $title"
    local cold warm
    cold=$(runs_of "rm -rf '$cache'/*" "$kcrash" -s -c "$command" "${files[@]}")
    warm=$(runs_of "" "$kcrash" -s -c "$command" "${files[@]}")
    row "kcrash, cold" "$cold" "$cold"
    row "kcrash, warm" "$warm" "$cold"
    row "drgn" "$(runs_of "" drgn -q -c vmcore.elf -s vmlinux -s klogtest.ko "$@")" "$cold"
    if [ -n "$crash_input" ]; then
        printf '%s\nq\n' "$crash_input" >"$cache.crash"
        # A crash that cannot read the kernel prints nothing and exits: no answer, no figure.
        # The run that asks is the one that warms the page cache (":" spares runs_of its own).
        if crash -s vmlinux vmcore.elf <"$cache.crash" 2>/dev/null | grep -q '[^[:space:]]'; then
            row "crash" "$(runs_of ":" sh -c "exec crash -s vmlinux vmcore.elf < '$cache.crash'")" "$cold"
        else
            printf '%-44s %s\n' "crash" "no answer (it cannot read this kernel)"
        fi
    fi
}

printf '%-44s %9s %12s %8s %7s\n' "($runs runs each)" "median" "peak RSS" "time/" "RSS/"
printf '%-44s %9s %12s %8s %7s\n' "" "" "" "cold" "cold"
question "open and print KLogs[2]" "p KLogs[2]" "$(printf 'mod -s klogtest klogtest.ko\np KLogs[2]')" \
    -e "print(prog['KLogs'][2])"
question "the printk log" "log" "log" \
    -e "from drgn.helpers.linux.printk import print_dmesg; print_dmesg(prog)"
question "every KLog ring, merged (klog 0 full)" "klog 0 full" "" "$bench/klog_drgn.py"
rm -f "$cache.crash"
