#!/usr/bin/env bash
# Builds ringfs and runs the whole test suite: unit tests and the integration tests that start
# real servers and mounts over both transports. Run as root (mounts, enable_uring).
# Exit status is ctest's, or 1 when scripts/thread_safety.sh finds a lock-annotation violation.
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
ctest --test-dir build --output-on-failure -j1 -LE '^bench$'
