#!/bin/bash
# Two servesim builds on the same fleet-scale run, side by side: in each pair both run at once,
# one on each of the first two CPUs (swapped from pair to pair), so that both meet the same load
# from the rest of the machine. Prints each pair's user CPU seconds and the ratio B / A, then the
# median ratio; also checks that both builds print the same fingerprint. On a shared VM, where
# one binary's time moves by a third from run to run, this separates a few percent where runs one
# after the other do not.
# Usage: bench/compare_builds.sh BIN_A BIN_B [PAIRS] [INSTANCES:REQUESTS]
# (default 5 pairs of bench/scenarios/azure_conv_8xh100.json scaled to 512:1000000, at the same
# load per instance as bench/fleet_scale.sh, with output.requests=none).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -lt 2 ]; then
  sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
a=$1
b=$2
pairs=${3:-5}
run=${4:-512:1000000}
n=${run%%:*}
m=${run##*:}
rate=$(awk -v n="$n" 'BEGIN { printf "%.3f", n * 170.0 / 8 }')
args=(run bench/scenarios/azure_conv_8xh100.json --no-db --set cluster.instances="$n"
      --set workload.arrival.rate="$rate" --set workload.count="$m" --set output.requests=none)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '%6s %10s %10s %8s\n' pair user_a_s user_b_s b/a
for i in $(seq "$pairs"); do
  cpu_a=$((i % 2))
  cpu_b=$(((i + 1) % 2))
  taskset -c "$cpu_a" /usr/bin/time -f '%U' -o "$tmp/a.time" "$a" "${args[@]}" >"$tmp/a.out" 2>&1 &
  taskset -c "$cpu_b" /usr/bin/time -f '%U' -o "$tmp/b.time" "$b" "${args[@]}" >"$tmp/b.out" 2>&1 &
  wait
  fa=$(grep -o 'fingerprint [0-9a-f]*' "$tmp/a.out" || true)
  fb=$(grep -o 'fingerprint [0-9a-f]*' "$tmp/b.out" || true)
  if [ -z "$fa" ] || [ "$fa" != "$fb" ]; then
    echo "the builds disagree (A: '${fa:-no fingerprint}', B: '${fb:-no fingerprint}')" >&2
    exit 1
  fi
  awk -v i="$i" -v x="$(cat "$tmp/a.time")" -v y="$(cat "$tmp/b.time")" \
    'BEGIN { printf "%6d %10.2f %10.2f %8.3f\n", i, x, y, y / x }' | tee -a "$tmp/pairs"
done
sort -n -k4 "$tmp/pairs" | awk '{ r[NR] = $4 } END {
  printf "median b/a %.3f over %d pairs (%s)\n", r[int((NR + 1) / 2)], NR, fp }' fp="$(grep -o 'fingerprint [0-9a-f]*' "$tmp/a.out")"
