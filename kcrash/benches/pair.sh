#!/usr/bin/env bash
# Two commands side by side: each a shell command line, run in turn (A B A B ...) RUNS times
# after one warm-up each, every run timed as a whole process by /usr/bin/time. Prints for each
# the median wall and CPU (user + sys) seconds and the largest peak RSS, then the median of the
# pair-by-pair wall ratio A/B (a ratio holds when the machine's speed drifts; a single time does
# not).
#
# Usage: kcrash/benches/pair.sh RUNS 'COMMAND A' 'COMMAND B'
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 RUNS 'COMMAND A' 'COMMAND B'" >&2; exit 2; }
runs=$1 a=$2 b=$3
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT

# One run of a command line: "wall cpu peak-KiB".
one() {
    /usr/bin/time -o "$tmp" -f '%e %U %S %M' sh -c "$1" >/dev/null 2>&1 || true
    tail -n 1 "$tmp" | awk '{ print $1, $2 + $3, $4 }'
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

sh -c "$a" >/dev/null 2>&1 || true
sh -c "$b" >/dev/null 2>&1 || true
runs_a=() runs_b=()
for _ in $(seq "$runs"); do
    runs_a+=("$(one "$a")")
    runs_b+=("$(one "$b")")
done
report() {
    local label=$1
    shift
    printf '%s\n' "$@" >"$tmp.runs"
    printf '%s: wall %s s, cpu %s s, peak RSS %s KiB (median of %s; peak the largest)\n' "$label" \
        "$(cut -d' ' -f1 "$tmp.runs" | median)" "$(cut -d' ' -f2 "$tmp.runs" | median)" \
        "$(cut -d' ' -f3 "$tmp.runs" | sort -n | tail -n 1)" "$runs"
    rm -f "$tmp.runs"
}
report A "${runs_a[@]}"
report B "${runs_b[@]}"
ratios=$(for i in $(seq 0 $((runs - 1))); do
    echo "${runs_a[$i]%% *} ${runs_b[$i]%% *}" | awk '{ print ($2 > 0) ? $1 / $2 : 0 }'
done | median)
echo "A/B wall, pair by pair: $ratios (median)"
