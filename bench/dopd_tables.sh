#!/usr/bin/env bash
# Prints the DOPD acceptance tables: the optimal-ratio computation, the 1..8 prefill-instance sweep
# against one decode instance, the bursty replay (DOPD, dyn-load, dyn-sla, static P/D within the
# same GPU budget), the same with perfect forecasts, and length-aware vs FCFS prefill batching.
# Usage: bench/dopd_tables.sh [path/to/servesim]
set -euo pipefail
cd "$(dirname "$0")/.."
SIM=${1:-build/app/servesim}
S=scenarios/dopd

row() {  # label, then servesim run arguments
  local label=$1; shift
  "$SIM" run "$@" --no-db 2>&1 | awk -v l="$label" '
    /^  request rate/ {rate=$3}
    /^  output throughput/ {out=$3}
    /^  TTFT  / {ttft=$3}
    /^  TPOT  / {tpot=$3}
    /^  SLO attainment/ {att=$3}
    /^  goodput/ && !g {good=$2; g=1}
    /^  GPU-seconds/ {gs=$2}
    END {printf "%-34s %8s %9s %10s %10s %9s %9s %10s\n", l, rate, out, att, ttft, tpot, good, gs}'
}
header() {
  printf "%-34s %8s %9s %10s %10s %9s %9s %10s\n" "config" "req/s" "out tok/s" "attain %" \
    "P90 TTFT" "P90 TPOT" "goodput" "GPU-s"
}

echo "== DOPD optimal ratio (eq. 11-14): LLaMa-3.3-70B-FP8, D = 2xH100 TP2, P = 1xH100, 1000/200"
"$SIM" dopd-ratio $S/ratio_validation.json

echo; echo "== Sweep: N prefill instances against one decode instance (closed loop, 236 clients)"
header
for n in 1 2 3 4 5 6 7 8; do
  row "${n}P1D" $S/ratio_validation.json --set policy.num_prefill=$n --set workload.clients=236
done

echo; echo "== Bursty replay: Azure conv 2023, time_scale 0.4 (peak 21 req/s), start 1P1D, 8 GPUs"
header
row "dopd (default)" $S/bursty_dopd.json
row "dopd (released: local <= 511, D 8192)" $S/bursty_dopd.json \
  --set policy.max_local_prefill_length=511 --set policy.decode_max_num_batched_tokens=0 \
  --set policy.decode_slo_aware=false
row "dopd (local <= 511)" $S/bursty_dopd.json --set policy.max_local_prefill_length=511
row "dopd (not SLO-aware)" $S/bursty_dopd.json --set policy.decode_slo_aware=false
row "dopd (not SLO-aware, D 8192)" $S/bursty_dopd.json --set policy.decode_slo_aware=false \
  --set policy.decode_max_num_batched_tokens=0
row "dopd (D budget 8192)" $S/bursty_dopd.json --set policy.decode_max_num_batched_tokens=0
row "dopd (no queue spill)" $S/bursty_dopd.json --set policy.max_prefill_queue_size=100000
row "dopd (rho_P 1.0, no queue spill)" $S/bursty_dopd.json \
  --set policy.prefill_utilization=1.0 --set policy.max_prefill_queue_size=100000
row "dopd (lean: credit local prefill)" $S/bursty_dopd.json \
  --set policy.max_local_prefill_length=0 --set policy.prefill_utilization=1.0 \
  --set policy.credit_local_prefill=true \
  --set policy.decode_max_num_batched_tokens=256 --set policy.max_prefill_queue_size=8
row "dyn-load (180 s)" $S/bursty_dyn_load.json
row "dyn-load (20 s)" $S/bursty_dyn_load.json --set policy.adjustment_interval=20s
row "dyn-sla (180 s)" $S/bursty_dyn_sla.json
row "dyn-sla (20 s)" $S/bursty_dyn_sla.json --set policy.adjustment_interval=20s
for pd in "6 1" "5 1" "4 1" "4 2" "2 3"; do
  set -- $pd
  row "static ${1}P${2}D" $S/bursty_static.json --set policy.num_prefill=$1 --set policy.num_decode=$2
done

echo; echo "== Default DOPD on time scales not used to choose its settings (peak 24 / 19 / 17 req/s)"
header
for ts in 0.35 0.45 0.5; do
  row "dopd x$ts" $S/bursty_dopd.json --set workload.time_scale=$ts
  row "static 5P1D x$ts" $S/bursty_static.json --set workload.time_scale=$ts \
    --set policy.num_prefill=5 --set policy.num_decode=1
  row "dyn-load (20 s) x$ts" $S/bursty_dyn_load.json --set workload.time_scale=$ts \
    --set policy.adjustment_interval=20s
  row "dyn-sla (20 s) x$ts" $S/bursty_dyn_sla.json --set workload.time_scale=$ts \
    --set policy.adjustment_interval=20s
done

echo; echo "== Perfect forecasts (forecast=oracle: each window's true load), time scale 0.4"
header
row "dopd oracle (default)" $S/bursty_dopd.json --set policy.forecast=oracle
for rho in 0.8 0.9 1.0; do
  row "dopd oracle (rho_P $rho, shrink 1)" $S/bursty_dopd.json --set policy.forecast=oracle \
    --set policy.prefill_utilization=$rho --set policy.scale_down_patience=1
done
row "dyn-sla oracle (20 s)" $S/bursty_dyn_sla.json --set policy.adjustment_interval=20s \
  --set policy.forecast=oracle
for ts in 0.35 0.45 0.5; do
  row "dopd oracle (0.9, shrink 1) x$ts" $S/bursty_dopd.json --set workload.time_scale=$ts \
    --set policy.forecast=oracle --set policy.prefill_utilization=0.9 --set policy.scale_down_patience=1
done

echo; echo "== Why the default DOPD misses (bursty replay, time scale 0.4)"
"$SIM" run $S/bursty_dopd.json --no-db --explain-misses 2>&1 | sed -n '/^SLO misses/,/^$/p'

echo; echo "== Length-aware vs FCFS prefill batching, static 2P/1D, Azure conv lengths at 10 req/s"
header
row "length-aware" $S/length_aware_2p1d.json
row "FCFS" $S/length_aware_2p1d.json --set policy.length_aware=false
row "length-aware, no queue spill" $S/length_aware_2p1d.json --set policy.max_prefill_queue_size=100000
row "FCFS, no queue spill" $S/length_aware_2p1d.json --set policy.length_aware=false \
  --set policy.max_prefill_queue_size=100000
row "FCFS one prompt per batch, no spill" $S/length_aware_2p1d.json --set policy.length_aware=false \
  --set policy.prefill_max_batch_size=1 --set policy.max_prefill_queue_size=100000
