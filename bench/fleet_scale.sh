#!/bin/bash
# Fleet-scale speed: bench/scenarios/azure_conv_8xh100.json scaled to N instances at the same load
# per instance (21.25 req/s each, as the 8-instance scenario's 170 req/s), printing per run the
# wall time, events/s, the share of iterations fast-forwarded, the cost per event and per request
# and the peak RSS. Usage: bench/fleet_scale.sh [BIN] [N:REQUESTS ...]
# (default: 8:100000 64:800000 256:1000000 512:4000000; add 512:10000000 for a day-scale run).
# OUTPUT_REQUESTS=none (or sample) runs with that output.requests: no per-request records kept.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-build/app/servesim}
shift || true
runs=("$@")
[ ${#runs[@]} -eq 0 ] && runs=(8:100000 64:800000 256:1000000 512:4000000)
printf '%9s %10s %8s %11s %6s %10s %12s %9s\n' instances requests wall_s events/s ff_% ns/event us/request rss_MiB
for run in "${runs[@]}"; do
  n=${run%%:*}
  m=${run##*:}
  rate=$(awk -v n="$n" 'BEGIN { printf "%.3f", n * 170.0 / 8 }')
  out=$(mktemp)
  /usr/bin/time -f '%e %M' -o "$out.time" "$bin" run bench/scenarios/azure_conv_8xh100.json \
    --no-db --set cluster.instances="$n" --set workload.arrival.rate="$rate" \
    --set workload.count="$m" --set output.requests="${OUTPUT_REQUESTS:-all}" >"$out" 2>&1
  line=$(grep 'of wall time' "$out")
  events_s=$(sed -E 's/.*\(([0-9]+) events\/s.*/\1/' <<<"$line")
  ff=$(sed -E 's/.*, ([0-9]+) % of iterations fast-forwarded.*/\1/' <<<"$line")
  read -r wall rss_kib <"$out.time"
  awk -v n="$n" -v m="$m" -v w="$wall" -v e="$events_s" -v f="$ff" -v r="$rss_kib" 'BEGIN {
    printf "%9d %10d %8.2f %11d %6d %10.0f %12.2f %9.0f\n", n, m, w, e, f, 1e9 / e,
           w * 1e6 / m, r / 1024 }'
  rm -f "$out" "$out.time"
done
