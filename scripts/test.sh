#!/usr/bin/env bash
# Builds ringfs and runs the whole test suite: unit tests and the integration tests that start
# real servers and mounts over both transports, then the checked builds: the fuzz targets for a
# bounded time and the unit tests under ASan + UBSan. Run as root (mounts, enable_uring).
# Exit status is 1 when scripts/thread_safety.sh finds a lock-annotation violation, else the
# first failure of ctest, scripts/fuzz.sh and scripts/sanitize.sh (each runs even if an earlier
# one failed).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ "$(id -u)" -ne 0 ]; then
  echo "test.sh: run as root: the integration tests mount filesystems" >&2
  exit 1
fi

bash scripts/install-deps.sh
cmake -S . -B build -G Ninja
cmake --build build
# The lock annotations, checked by clang over the same sources (GCC ignores them); a violation
# fails the run before the tests start.
bash scripts/thread_safety.sh build

# The tests enable the ring themselves. Label `bench` (full fio comparisons) is not part of a
# run; label `bench_smoke` (bench/run.sh --quick on one job) is.
# The last test (it_no_leftover_mounts) fails if any test mount or daemon survived.
status=0
ctest --test-dir build --output-on-failure -j1 -LE '^bench$' || status=$?

# Both share one clang build tree (build-checked/), so the libraries are compiled once, with
# ASan + UBSan and libFuzzer's coverage hooks; fuzz.sh first, as it turns RINGFS_FUZZ on there.
# RINGFS_FUZZ_SECONDS: how long each fuzz target runs (default 30).
bash scripts/fuzz.sh build-checked "${RINGFS_FUZZ_SECONDS:-30}" || { [ "$status" != 0 ] || status=1; }
bash scripts/sanitize.sh build-checked || { [ "$status" != 0 ] || status=1; }
exit "$status"
