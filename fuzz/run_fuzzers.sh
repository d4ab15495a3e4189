#!/usr/bin/env bash
# Runs every libFuzzer target of fuzz/ for a fixed time each, one after the other, and prints a
# table of executions and findings. Used by `make fuzz-smoke` and `make fuzz-campaign`.
#
#   fuzz/run_fuzzers.sh BUILD_DIR SECONDS_PER_TARGET WORK_DIR [TARGET...]
#
# Each target starts from its seeds in fuzz/corpus/<target>/ plus what earlier runs left in
# WORK_DIR/corpus/<target>/ (new inputs are added there, never to the source tree). Crashes,
# sanitizer reports, timeouts (-timeout, 10 s) and OOMs (-rss_limit_mb, 2048) are written to
# WORK_DIR/findings/<target>-*. Exits 1 when any target found something.
set -uo pipefail
cd "$(dirname "$0")/.."
build=$1 seconds=$2 work=$3
shift 3
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(fuzz_scenario fuzz_trace_azure fuzz_trace_burstgpt fuzz_trace_mooncake
           fuzz_trace_generic_csv fuzz_length_distribution fuzz_import_aiconfigurator
           fuzz_import_vidur fuzz_plan fuzz_measured_runs)
fi
export SERVESIM_DATA=${SERVESIM_DATA:-$PWD}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
mkdir -p "$work/findings" "$work/logs"
status=0
summary=()
for t in "${targets[@]}"; do
  bin=$build/fuzz/$t
  if [ ! -x "$bin" ]; then
    echo "missing $bin (build it with SERVESIM_FUZZ=ON)" >&2
    exit 2
  fi
  mkdir -p "$work/corpus/$t"
  log=$work/logs/$t.log
  echo "== $t: ${seconds}s"
  "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$work/findings/$t-" \
    "$work/corpus/$t" "fuzz/corpus/$t" >"$log" 2>&1
  rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*')
  found=$(ls "$work/findings/$t-"* 2>/dev/null | wc -l)
  if [ $rc -ne 0 ] || [ "$found" -ne 0 ]; then
    status=1
    echo "   FINDING (exit $rc); log $log:"
    grep -E 'ERROR|SUMMARY|what\(\)|terminate|Test unit written' "$log" | head -20
  fi
  summary+=("$(printf '%-28s %12s execs  cov %6s  findings %s' "$t" "${execs:-?}" "${cov:-?}" "$found")")
done
echo
printf '%s\n' "${summary[@]}"
exit $status
