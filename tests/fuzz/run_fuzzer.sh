#!/usr/bin/env bash
# Runs one libFuzzer target for a bounded time from its seed corpus, writing new inputs to
# a scratch folder so the checked-in corpus only changes when someone adds a regression.
# Usage: run_fuzzer.sh BINARY SEED_CORPUS_DIR SECONDS
set -euo pipefail
bin=$1 seeds=$2 seconds=$3
work=$(mktemp -d -t dhara-fuzz-XXXXXX)
mkdir -p "$work/corpus"
cd "$work"   # crash-* files land here and are printed by libFuzzer itself
# The targets are built with ASan + UBSan (build/CMakeLists.txt): any report stops the run with
# a stack, so it fails the test.
export ASAN_OPTIONS="halt_on_error=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:${UBSAN_OPTIONS:-}"
# Not exec'd: the scratch folder is removed after a clean run, and kept, with any crash file,
# after a failed one.
rc=0
"$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  "$work/corpus" "$seeds" || rc=$?
cd /
if [ "$rc" -eq 0 ]; then
  rm -rf "$work"
else
  echo "run_fuzzer.sh: $(basename "$bin") failed (exit $rc); its scratch folder, with any crash file, is kept: $work" >&2
fi
exit "$rc"
