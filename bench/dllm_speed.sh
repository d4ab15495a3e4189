#!/usr/bin/env bash
# dLLM simulation speed: requests simulated per second, best of 5 runs, for dllm-serve near
# saturation (bench/scenarios/dllm/dllm_speed_serve.json: 20,000 requests, 78,538 passes) and
# overloaded (dllm_speed_burst.json: 10,000 requests, its waiting queue in the thousands), and the
# fast-dllm baseline at batch 1 (dllm_speed_fast.json: 2,000 requests, 512,000 passes).
# Prints the wall time and the CPU time (user + system; steadier on a shared machine), both
# including start-up (catalogs, profile tables: about 75 ms).
# Usage: bench/dllm_speed.sh [SERVESIM_BIN]
set -euo pipefail
bin=${1:-build/app/servesim}
for name in dllm_speed_serve dllm_speed_burst dllm_speed_fast; do
  scenario=bench/scenarios/dllm/$name.json
  requests=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['workload']['requests'])" "$scenario")
  best_wall=
  best_cpu=
  for _ in 1 2 3 4 5; do
    read -r wall user sys < <(/usr/bin/time -f "%e %U %S" "$bin" run "$scenario" --no-db 2>&1 >/dev/null | tail -1)
    cpu=$(echo "$user + $sys" | bc -l)
    if [ -z "$best_wall" ] || [ "$(echo "$wall < $best_wall" | bc -l)" = 1 ]; then best_wall=$wall; fi
    if [ -z "$best_cpu" ] || [ "$(echo "$cpu < $best_cpu" | bc -l)" = 1 ]; then best_cpu=$cpu; fi
  done
  printf '%-18s %6d requests: wall %.2f s (%6.0f req/s), CPU %.2f s (%6.0f req/s)\n' "$name" \
    "$requests" "$best_wall" "$(echo "$requests / $best_wall" | bc -l)" "$best_cpu" \
    "$(echo "$requests / $best_cpu" | bc -l)"
done
