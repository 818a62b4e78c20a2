#!/usr/bin/env bash
# kcrash's `trace` on full ftrace rings, side by side with trace-cmd on the same events.
#
# The guest: Debian's kernel under QEMU (`kcrash-harness linux`) whose /init, after the module
# ran, gives each CPU's top ring 64 MiB, enables every trace event and keeps both CPUs busy for
# WORKLOAD_SECONDS (default 60) so the rings fill and wrap, then crashes. Built once into the
# directory given as the first argument (default /var/tmp/kcrash-trace-guest, ~1.6 GB); an
# existing one is reused.
#
# Then, on its ELF dump with vmlinux and klogtest.ko, each RUNS times (default 5) after one
# untimed run that warms the page cache, the median wall time and the largest peak RSS of:
#   - kcrash trace: every ring of the dump rendered as `trace-cmd report -N` prints;
#   - kcrash trace --dat: the same rings written as a trace.dat;
#   - trace-cmd report on that trace.dat, the text it renders from its own file;
#   - kcrash trace --json.
# The event count is kcrash's line count of `trace`, checked against trace-cmd's.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=${1:-/var/tmp/kcrash-trace-guest}
seconds=${WORKLOAD_SECONDS:-60}
T=/sys/kernel/tracing
workload="echo 0 > $T/tracing_on; echo 65536 > $T/buffer_size_kb; echo 1 > $T/events/enable; \
echo 1 > $T/tracing_on; end=\$((\$(date +%s) + $seconds)); \
for c in 0 1; do (while [ \$(date +%s) -lt \$end ]; do ls -lR /sys/module > /dev/null 2>&1; \
cat /proc/meminfo /proc/interrupts > /dev/null; done) & done; wait; echo 0 > $T/tracing_on"
if [ ! -f "$dir/READY" ]; then
    echo "bench: building the guest in $dir (several minutes)" >&2
    (cd "$root" && cargo run --release --locked -q -p kcrash-harness -- linux --out "$dir" \
        --run "$workload" >/dev/null)
fi

. "$root/kcrash/benches/measure.sh" "$dir"
dat=$(mktemp --suffix=.dat)
trap 'rm -f "$tmp" "$dat"' EXIT
files=(vmcore.elf vmlinux klogtest.ko)
"$kcrash" -s -c "trace --dat $dat" "${files[@]}" >/dev/null
events=$("$kcrash" -s -c trace "${files[@]}" | grep -c '^ *[^ ].*\[[0-9][0-9]*\] ')
theirs=$(trace-cmd report -N -i "$dat" 2>/dev/null | grep -c '^ *[^ ].*\[[0-9][0-9]*\] ')
echo "$events events in the dump's rings (trace-cmd reads $theirs from kcrash's trace.dat)"
"$kcrash" -s -c "trace -s" "${files[@]}"

printf '%-58s %8s %12s\n' "command ($runs runs)" "median" "peak RSS"
measure "kcrash trace" "$kcrash" -s -c trace "${files[@]}"
measure "kcrash trace --dat FILE" "$kcrash" -s -c "trace --dat $dat" "${files[@]}"
measure "trace-cmd report -N -i FILE (kcrash's trace.dat)" trace-cmd report -N -i "$dat"
measure "kcrash trace --json" "$kcrash" -s -c "trace --json" "${files[@]}"
