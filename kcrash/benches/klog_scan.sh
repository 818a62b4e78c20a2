#!/usr/bin/env bash
# Finding the KLog without debug information, side by side with finding it through DWARF: the
# Debian guest's dumps (`kcrash-harness linux`, directory in KCRASH_LINUX_GUEST or the argument)
# read by `klog -s`
#   - with no image: the descriptor found by scanning the dump's memory (512 MB of RAM);
#   - with vmlinux and klogtest.ko: the layout from the module's DWARF (the symbol index cache
#     warm, as after a first open);
#   - drgn with the same vmlinux and .ko, reading one field of KLogs (its DWARF path).
# Each command runs once to warm the page cache, then RUNS times (default 5); prints the median
# wall time and the largest peak RSS (/usr/bin/time).
set -euo pipefail
guest=${1:-${KCRASH_LINUX_GUEST:?give the Linux guest directory}}
runs=${RUNS:-5}
kcrash=$(cd "$(dirname "$0")/../.." && pwd)/target/release/kcrash
[ -x "$kcrash" ] || { echo "build it first: cargo build --release -p kcrash" >&2; exit 2; }
cd "$guest"
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT

measure() {
    local label=$1
    shift
    "$@" >/dev/null 2>&1
    local times=() peak=0
    for _ in $(seq "$runs"); do
        local out
        /usr/bin/time -o "$tmp" -f '%e %M' "$@" >/dev/null 2>&1
        out=$(tail -n 1 "$tmp")
        times+=("${out% *}")
        [ "${out#* }" -gt "$peak" ] && peak=${out#* }
    done
    local median
    median=$(printf '%s\n' "${times[@]}" | sort -n | sed -n "$(((runs + 1) / 2))p")
    printf '%-58s %6s s %8s KiB\n' "$label" "$median" "$peak"
}

printf '%-58s %8s %12s\n' "command ($runs runs)" "median" "peak RSS"
measure "kcrash klog -s vmcore.elf (scan, no image)" \
    "$kcrash" -s -c 'klog -s' vmcore.elf
measure "kcrash klog -s vmcore.elf vmlinux klogtest.ko (DWARF)" \
    "$kcrash" -s -c 'klog -s' vmcore.elf vmlinux klogtest.ko
measure "drgn vmcore.elf vmlinux klogtest.ko, one KLogs field" \
    drgn -q -c vmcore.elf -s vmlinux -s klogtest.ko -e 'print(prog["KLogs"][2].next_write)'
measure "kcrash klog -s vmcore.kdump (scan, no image)" \
    "$kcrash" -s -c 'klog -s' vmcore.kdump
measure "kcrash klog -s vmcore.kdump vmlinux klogtest.ko (DWARF)" \
    "$kcrash" -s -c 'klog -s' vmcore.kdump vmlinux klogtest.ko
