#!/usr/bin/env bash
# HTML report speed and size on a 100k-request run: simulates the scenario (default
# bench/scenarios/vidur_llama2_70b_a100.json, 100,000 requests) into a fresh database, then times
# `servesim report` on it and prints the seconds and the file size (targets: < 2 s, < 5 MB).
# Usage: bench/report_bench.sh [SERVESIM_BIN] [SCENARIO]
set -euo pipefail
bin=${1:-build/app/servesim}
scenario=${2:-bench/scenarios/vidur_llama2_70b_a100.json}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$bin" run "$scenario" --db "$dir/results.db" > /dev/null
requests=$(sqlite3 "$dir/results.db" "SELECT count(*) FROM request")
start=$(date +%s.%N)
"$bin" report "$dir/results.db" --run 1 -o "$dir/report.html" > /dev/null
end=$(date +%s.%N)
bytes=$(stat -c %s "$dir/report.html")
printf 'report of %s requests: %.2f s, %.2f MB (%s bytes)\n' "$requests" "$(echo "$end - $start" | bc -l)" \
  "$(echo "$bytes / 1000000" | bc -l)" "$bytes"
