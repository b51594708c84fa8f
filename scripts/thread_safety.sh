#!/usr/bin/env bash
# Checks the lock annotations (ABSL_GUARDED_BY, ABSL_EXCLUSIVE_LOCKS_REQUIRED, ...) with clang's
# -Wthread-safety, which GCC ignores: every ringfs source of BUILD_DIR/compile_commands.json (the
# GCC build's, flags and generated headers included; tests left out) is parsed by clang++ with
# -fsyntax-only, no code generated, and any thread-safety warning is an error (exit status 1).
# Usage: scripts/thread_safety.sh BUILD_DIR [REGEX]   (after BUILD_DIR has been built: protoc
# headers); REGEX keeps only the sources whose path matches it, e.g. 'frontend/'.
# Needs Debian's `clang` (clang++ 14 on Debian 12; scripts/install-deps.sh installs it) and jq.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source_dir=$(pwd)

build_dir=${1:?usage: thread_safety.sh BUILD_DIR [REGEX]}
only=${2:-}
build_dir=$(cd "$build_dir" && pwd)
database=$build_dir/compile_commands.json
if [ ! -f "$database" ]; then
  echo "thread_safety: $database missing (configure with CMake first)" >&2
  exit 1
fi
clangxx=${CLANGXX:-clang++}
if ! command -v "$clangxx" >/dev/null; then
  echo "thread_safety: $clangxx not found (scripts/install-deps.sh installs clang)" >&2
  exit 1
fi

# Per checked source, "<directory>\0<command>\0". The libraries and binaries hold the
# locks; tests (gtest-heavy, ~half the parse time, no annotated locks) and the generated
# protobuf sources in the build tree are left out.
jobs=$(mktemp)
trap 'rm -f "$jobs"' EXIT
jq -j --arg src "$source_dir/" --arg build "$build_dir/" --arg only "$only" \
  '.[] | select((.file | startswith($src)) and (.file | startswith($build) | not)
                and (.file | test("_test\\.cc$|/tests/|/integration/") | not)
                and (.file | test($only)))
       | .directory, "\u0000", .command, "\u0000"' "$database" > "$jobs"
count=$(($(tr -cd '\0' < "$jobs" | wc -c) / 2))
if [ "$count" -eq 0 ]; then
  echo "thread_safety: no ringfs sources in $database" >&2
  exit 1
fi

# Runs clang on one compile command: the GCC compiler, its output and its warning flags are
# replaced; only the thread-safety warnings are asked for, so the log shows nothing else.
check_one() {
  local directory=$1 command=$2
  local -a args=()
  # The command is shell text written by CMake for this build (quoted -D values): split it as
  # the shell would.
  eval "set -- $command"
  shift  # the compiler
  local skip=0 word
  for word in "$@"; do
    if [ "$skip" = 1 ]; then skip=0; continue; fi
    case "$word" in
      -o | -MF | -MT | -MQ) skip=1 ;;
      -c | -MD | -MMD | -W*) ;;
      *) args+=("$word") ;;
    esac
  done
  cd "$directory"
  "$clangxx" -fsyntax-only -Wthread-safety -Werror=thread-safety "${args[@]}"
}
export -f check_one
export clangxx

echo "thread_safety: clang -Wthread-safety over $count sources"
start=$SECONDS
status=0
# Each pair becomes the two arguments of check_one; one clang per core.
xargs -0 -n 2 -P "$(nproc)" bash -c 'check_one "$1" "$2"' _ < "$jobs" ||
  status=1
echo "thread_safety: $((SECONDS - start)) s, $([ "$status" = 0 ] && echo ok || echo FAILED)"
exit "$status"
