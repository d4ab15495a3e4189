#!/usr/bin/env bash
# dLLM simulation speed: requests simulated per second of wall time, best of 3 runs, for
# dllm-serve (bench/scenarios/dllm_speed_serve.json: 20,000 requests, 78,538 passes) and the
# fast-dllm baseline at batch 1 (bench/scenarios/dllm_speed_fast.json: 2,000 requests, 512,000
# passes). The wall time includes start-up (catalogs, profile tables: about 0.3 s).
# Usage: bench/dllm_speed.sh [SERVESIM_BIN]
set -euo pipefail
bin=${1:-build/app/servesim}
for name in dllm_speed_serve dllm_speed_fast; do
  scenario=bench/scenarios/$name.json
  requests=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['workload']['requests'])" "$scenario")
  best=
  for _ in 1 2 3; do
    start=$(date +%s.%N)
    "$bin" run "$scenario" --no-db > /dev/null
    end=$(date +%s.%N)
    t=$(echo "$end - $start" | bc -l)
    if [ -z "$best" ] || [ "$(echo "$t < $best" | bc -l)" = 1 ]; then best=$t; fi
  done
  printf '%-18s %6d requests in %.2f s: %8.0f requests/s\n' "$name" "$requests" "$best" \
    "$(echo "$requests / $best" | bc -l)"
done
