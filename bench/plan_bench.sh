#!/usr/bin/env bash
# Planner speed: configs (each a capacity bisection) simulated per minute and simulations per
# minute, on bench/plans/bisect_10k.plan.json (24 configs, 10k-request trace) or the plan given
# (bench/plans/bisect_10k_1000.plan.json: 1,000 configs, the scale of the speed target).
# Usage: bench/plan_bench.sh [SERVESIM_BIN] [JOBS] [PLAN]
set -euo pipefail
bin=${1:-build/app/servesim}
jobs=${2:-$(nproc)}
plan=${3:-bench/plans/bisect_10k.plan.json}
out=$(mktemp)
start=$(date +%s.%N)
"$bin" plan "$plan" --no-db --jobs "$jobs" > "$out"
end=$(date +%s.%N)
line=$(grep '^configs' "$out")
sims=$(echo "$line" | sed -E 's/.* ([0-9]+) simulations in.*/\1/')
configs=$(echo "$line" | sed -E 's/.* ([0-9]+) simulated \(.*/\1/')
wall=$(echo "$end - $start" | bc -l)
echo "$line"
printf 'wall %.1f s, jobs %s: %.1f configs/min, %.1f simulations/min, %.2f s per simulation-core\n' \
  "$wall" "$jobs" "$(echo "$configs * 60 / $wall" | bc -l)" "$(echo "$sims * 60 / $wall" | bc -l)" \
  "$(echo "$wall * $jobs / $sims" | bc -l)"
rm -f "$out"
