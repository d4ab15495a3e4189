#!/usr/bin/env bash
# Prints the prefix-cache hit rate against the KV capacity per instance, with the least-loaded
# and the cache-aware (kv_aware) router: Llama-3.1-8B on 4 x H100 (the quickstart's coloc), KV
# capacity set through gpu_memory_utilization. Workloads: the benchmark client drawing 2,000-token
# prompts from 200 dataset entries (aiperf's --num-dataset-entries) at 12 req/s, and the first
# 200 s of the Mooncake conversation trace (its own hash ids).
# Usage: bench/prefix_cache_curve.sh [path/to/servesim]
set -euo pipefail
cd "$(dirname "$0")/.."
SIM=${1:-build/app/servesim}
BENCH='workload={"type":"benchmark","rate":12,"num_requests":3000,"isl":2000,"osl":200,"dataset_entries":200}'
MOONCAKE='workload={"type":"trace","format":"mooncake","path":"traces/data/mooncake_fast25/conversation_trace.jsonl","window":{"start":"0s","duration":"200s"}}'

row() {  # label, workload override, utilisation, router
  "$SIM" run scenarios/quickstart.json --no-db --set "$2" --set cluster.instances=4 \
    --set cluster.prefix_caching=true --set policy.gpu_memory_utilization="$3" \
    --set router.type="$4" 2>&1 | awk -v l="$1" -v u="$3" -v rt="$4" '
    /^instances / {kv=$(NF-1); gsub(/\(/, "", kv)}
    /prefix cache/ {hit=$0; sub(/.*\(/, "", hit); sub(/ %.*/, "", hit)}
    /^  TTFT  / {mean=$5; p90=$3}
    /^  SLO attainment/ {att=$3}
    END {printf "%-10s %5s %10s %-18s %7s %10s %10s %8s\n", l, u, kv, rt, hit, mean, p90, att}'
}

printf "%-10s %5s %10s %-18s %7s %10s %10s %8s\n" workload util "KV tok/inst" router "hit %" \
  "TTFT mean" "TTFT p90" "attain"
for u in 0.3 0.5 0.7 0.9; do
  for rt in least_outstanding kv_aware; do row benchmark "$BENCH" "$u" "$rt"; done
done
for u in 0.5 0.9; do
  for rt in least_outstanding kv_aware; do row mooncake "$MOONCAKE" "$u" "$rt"; done
done
