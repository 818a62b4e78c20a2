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
. "$(dirname "$0")/measure.sh" "$@"

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
