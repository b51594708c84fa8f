#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz (clang, ASan + UBSan, RINGFS_FUZZ=ON) in BUILD_DIR
# and runs each for SECONDS (default 30), one process at a time, from its committed seeds
# (tests/fuzz/<target>/). New inputs go to BUILD_DIR/fuzz-corpus/<target> (kept between runs,
# never in the repository); a crash, leak, UB report or invariant violation stops that target,
# leaves its input in BUILD_DIR/fuzz-artifacts/ and makes the exit status 1.
# Usage: scripts/fuzz.sh BUILD_DIR [SECONDS]   (RINGFS_FUZZ_TARGETS="a b" runs only those)
# BUILD_DIR may be the one scripts/sanitize.sh uses: the libraries are then compiled once.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build_dir=${1:?usage: fuzz.sh BUILD_DIR [SECONDS]}
seconds=${2:-30}
source scripts/clang_build.sh
start=$SECONDS
clang_configure fuzz "$build_dir" -DRINGFS_FUZZ=ON
cmake --build "$build_dir" --target ringfs_fuzz
build_dir=$(cd "$build_dir" && pwd)
echo "fuzz: built in $((SECONDS - start)) s"

targets=${RINGFS_FUZZ_TARGETS:-fuzz_server_request fuzz_kernel_request fuzz_reply_frame fuzz_handshake}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
status=0
for target in $targets; do
  corpus=$build_dir/fuzz-corpus/$target
  artifacts=$build_dir/fuzz-artifacts
  log=$build_dir/fuzz-$target.log
  mkdir -p "$corpus" "$artifacts"
  # -timeout: one input taking over 10 s is a hang; timeout(1) is a backstop for the whole run.
  if timeout $((seconds + 120)) "$build_dir/bin/$target" -max_total_time="$seconds" -timeout=10 \
      -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$artifacts/$target-" \
      "$corpus" "tests/fuzz/$target" >"$log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
    echo "fuzz: $target ok: $runs runs in $seconds s ($rate/s), corpus $(ls "$corpus" | wc -l)"
  else
    status=1
    echo "fuzz: $target FAILED (log $log):" >&2
    grep -E 'ERROR|invariant violated|runtime error|SUMMARY|Test unit written' "$log" >&2 || tail -30 "$log" >&2
  fi
done
echo "fuzz: $((SECONDS - start)) s, $([ "$status" = 0 ] && echo ok || echo FAILED)"
exit "$status"
