#!/bin/bash
# Times the ResNet-50 step prediction of one or more bench_predict builds on several cores, round
# after round, each process beside the CPU canaries (cpu_canary_*), so that a build's figures can be
# read against the core's speed at the moment: a shared host's cores run at two speeds, and a
# process's samples all at one (docs/NOTES.md, 2026-12-02 17:10 UTC).
#
# Usage: benchmarks/by_core.sh OUT.csv ROUNDS "CORES" BENCH [BENCH...]
#   e.g. benchmarks/by_core.sh out.csv 4 "1 3 5 7" build/benchmarks/bench_predict /tmp/old/bench_predict
# Writes OUT.csv: unix time, round, core, build (the BENCH path), benchmark, median CPU µs of three
# repetitions. The builds run in turn on each core, in reverse order every other round.
set -euo pipefail
if [ $# -lt 4 ]; then
    sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
fi
out=$1 rounds=$2 cores=$3
shift 3
builds=("$@")
for b in "${builds[@]}"; do
    [ -x "$b" ] || { echo "by_core.sh: '$b' is not an executable bench_predict" >&2; exit 2; }
done
command -v taskset > /dev/null || { echo "by_core.sh: taskset (util-linux) is needed" >&2; exit 2; }
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
echo "time,round,core,build,benchmark,cpu_us" > "$tmp"
failed=0
for round in $(seq 1 "$rounds"); do
    order=("${builds[@]}")
    if [ $((round % 2)) = 0 ]; then
        order=()
        for ((i = ${#builds[@]} - 1; i >= 0; i--)); do order+=("${builds[$i]}"); done
    fi
    for core in $cores; do
        for b in "${order[@]}"; do
            # a process that fails or prints no medians is reported, and the others' rows are kept
            medians=$(taskset -c "$core" "$b" --benchmark_filter='canary|resnet50_step' --benchmark_repetitions=3 \
                --benchmark_min_time=0.15 --benchmark_enable_random_interleaving=true --benchmark_format=csv 2> /dev/null |
                grep '_median' || true)
            if [ -z "$medians" ]; then
                echo "by_core.sh: round $round, core $core: '$b' gave no medians" >&2
                failed=$((failed + 1))
                continue
            fi
            echo "$medians" | awk -F, -v t="$(date +%s)" -v r="$round" -v c="$core" -v b="$b" \
                '{gsub(/"/, "", $1); sub(/_median/, "", $1); print t "," r "," c "," b "," $1 "," $4}' >> "$tmp"
        done
    done
done
mv "$tmp" "$out"
trap - EXIT
echo "wrote $out"
if [ "$failed" -gt 0 ]; then
    echo "by_core.sh: $failed process(es) gave no medians" >&2
    exit 1
fi
