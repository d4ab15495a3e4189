#!/usr/bin/env bash
# DynaServe Table 1 (Qwen2.5-14B, 2 x A100-80GB, P99 TBT SLO 100 ms), servesim next to the paper:
# colocation (DP 2, chunk 2048) vs 1P1D disaggregation on three fixed shapes at saturating load,
# and DynaServe on the same GPUs (not in the paper's table: nan).
#   bench/dynaserve_table1.sh [path/to/servesim]
set -euo pipefail
cd "$(dirname "$0")/.."
SERVESIM=${1:-build/app/servesim}
DB=$(mktemp -d)/table1.db
# policy shape : paper throughput (req/s), P99 TBT (ms), attainment (%)
PAPER="coloc_p8192_d32:1.49:352.93:1.73 coloc_p2048_d512:2.83:336.81:84.09 coloc_p219_d1467:2.86:162.67:94.46
disagg_p8192_d32:0.83:58.09:100 disagg_p2048_d512:2.56:65.11:99.83 disagg_p219_d1467:1.68:74.47:99.95
dynaserve_p8192_d32:nan:nan:nan dynaserve_p2048_d512:nan:nan:nan dynaserve_p219_d1467:nan:nan:nan"
printf "%-20s | %9s %9s | %10s %10s %10s | %9s %9s | %s\n" "case" "req/s" "paper" "TBT p50" \
  "TBT p99" "paper p99" "attain %" "paper %" "GPU busy % (per instance)"
for entry in $PAPER; do
  IFS=: read -r name p_rps p_p99 p_att <<<"$entry"
  "$SERVESIM" run "scenarios/dynaserve/table1_${name}.json" --db "$DB" >/dev/null
  row=$("$SERVESIM" query "$DB" "SELECT
      (SELECT value FROM scalar WHERE run_id = r.run_id AND name = 'request_rate_per_s') AS rps,
      (SELECT value * 1000 FROM scalar WHERE run_id = r.run_id AND name = 'tbt_p50_s') AS p50,
      (SELECT value * 1000 FROM scalar WHERE run_id = r.run_id AND name = 'tbt_p99_s') AS p99,
      (SELECT value * 100 FROM scalar
        WHERE run_id = r.run_id AND name = 'tbt_token_attainment') AS attainment,
      (SELECT group_concat(printf('%.0f', b.value * 100 /
                 (SELECT value FROM scalar WHERE run_id = r.run_id AND name = 'duration_s')), '/')
         FROM scalar b WHERE b.run_id = r.run_id AND b.name = 'busy_s') AS busy
    FROM run r ORDER BY run_id DESC LIMIT 1" | sed -n 3p)
  read -r rps p50 p99 att busy <<<"$row"
  printf "%-20s | %9.2f %9.2f | %10.1f %10.1f %10.1f | %9.2f %9.2f | %s\n" "$name" "$rps" "$p_rps" \
    "$p50" "$p99" "$p_p99" "$att" "$p_att" "$busy"
done
