#!/usr/bin/env bash
# Builds the unit tests with AddressSanitizer + UndefinedBehaviorSanitizer (clang,
# RINGFS_SANITIZE=ON) in BUILD_DIR and runs them: ctest label `unit`, the GoogleTest binaries
# that need no mount and start no daemon (integration tests are not run under ASan). Any
# memory error, leak or UB fails the test it happens in; the exit status is ctest's.
# Usage: scripts/sanitize.sh BUILD_DIR
# BUILD_DIR may be the one scripts/fuzz.sh uses (RINGFS_FUZZ=ON stays on there): the libraries
# are then compiled once for both, the tests carrying libFuzzer's unused coverage hooks.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

build_dir=${1:?usage: sanitize.sh BUILD_DIR}
source scripts/clang_build.sh
start=$SECONDS
clang_configure sanitize "$build_dir" -DRINGFS_SANITIZE=ON
cmake --build "$build_dir" --target ringfs_unit_tests
echo "sanitize: built in $((SECONDS - start)) s"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
status=0
ctest --test-dir "$build_dir" --output-on-failure -j"$(nproc)" -L '^unit$' || status=$?
echo "sanitize: $((SECONDS - start)) s, $([ "$status" = 0 ] && echo ok || echo FAILED)"
exit "$status"
