#!/usr/bin/env bash
# `make install` as a user runs it: cmake --install of BUILD_DIR into a scratch prefix, then the
# installed servesim, started outside the repository without SERVESIM_DATA, finds its data in
# <prefix>/share/servesim (a model added there is listed; a shipped scenario with a trace, the
# kernel profiles and the engine calibration are read from there), and no source was installed.
#
# Usage: install_test.sh BUILD_DIR
set -euo pipefail
build=$1
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
data="$prefix/share/servesim"
servesim="$prefix/bin/servesim"
fail() { echo "FAIL: $*"; exit 1; }

cd "$prefix"
unset SERVESIM_DATA SERVESIM_MODELS
sed 's/"name": "Llama-3.1-8B"/"name": "Installed-8B"/' "$data/models/catalog/models/llama-3.1-8b.json" \
  > "$data/models/catalog/models/installed-8b.json"
"$servesim" list models | grep -q '^installed-8b ' \
  || fail "the installed servesim does not read the model catalog in $data"
"$servesim" run --no-db --set workload.window.duration=60s >/dev/null || fail "the quickstart does not run"
"$servesim" check "$data/scenarios/dopd/bursty_dopd.json" >/dev/null \
  || fail "a shipped scenario (with its trace) does not check"
"$servesim" validate --gpu h100_sxm >/dev/null || fail "validate does not find the kernel profiles"
if find "$data" -name '*.cc' -o -name '*.h' -o -name CMakeLists.txt | grep -q .; then
  fail "sources were installed beside the data"
fi
echo "ok: $servesim reads $data"
