# Sourced by the bench scripts on the Linux guest's dumps, with the script's arguments: goes to the
# guest directory (the first argument, else KCRASH_LINUX_GUEST), with `$kcrash` the release build
# and `$runs` RUNS (default 5). Then `measure LABEL COMMAND...` runs COMMAND once to warm the page
# cache, then $runs times under /usr/bin/time, and prints the median wall time and the largest
# peak RSS; `measure_cold LABEL PREPARE COMMAND...` runs PREPARE before each run, untimed, and
# has no warm-up run.
guest=${1:-${KCRASH_LINUX_GUEST:?give the Linux guest directory}}
runs=${RUNS:-5}
kcrash=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/target/release/kcrash
[ -x "$kcrash" ] || { echo "build it first: cargo build --release -p kcrash" >&2; exit 2; }
cd "$guest"
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT

# One run's "wall-seconds peak-KiB".
timed() {
    /usr/bin/time -o "$tmp" -f '%e %M' "$@" >/dev/null 2>&1 || true
    tail -n 1 "$tmp"
}

# Prints LABEL, the median wall time and the largest peak RSS of the runs' "wall peak" lines.
report() {
    local label=$1 times=() peak=0
    shift
    for out in "$@"; do
        times+=("${out% *}")
        [ "${out#* }" -gt "$peak" ] && peak=${out#* }
    done
    local median
    median=$(printf '%s\n' "${times[@]}" | sort -n | sed -n "$((($# + 1) / 2))p")
    printf '%-58s %6s s %8s KiB\n' "$label" "$median" "$peak"
}

measure() {
    local label=$1
    shift
    "$@" >/dev/null 2>&1 || true
    local runs_out=()
    for _ in $(seq "$runs"); do
        runs_out+=("$(timed "$@")")
    done
    report "$label" "${runs_out[@]}"
}

measure_cold() {
    local label=$1 prepare=$2
    shift 2
    local runs_out=()
    for _ in $(seq "$runs"); do
        sh -c "$prepare"
        runs_out+=("$(timed "$@")")
    done
    report "$label" "${runs_out[@]}"
}
