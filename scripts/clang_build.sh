# Sourced by scripts/fuzz.sh and scripts/sanitize.sh: configures BUILD_DIR with clang (and
# ccache when present) and the extra CMake options given, after checking the compilers exist.
# Usage: clang_configure NAME BUILD_DIR -DOPTION=ON...
clang_configure() {
  local name=$1 dir=$2
  shift 2
  local tool
  for tool in clang clang++; do
    if ! command -v "$tool" >/dev/null; then
      echo "$name: $tool not found (scripts/install-deps.sh installs clang)" >&2
      exit 1
    fi
  done
  local launcher=()
  if command -v ccache >/dev/null; then
    # Relative paths in the cache keys: another checkout of the same sources hits the cache too.
    export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$(pwd)}
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  fi
  cmake -S . -B "$dir" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    "$@" "${launcher[@]}" >/dev/null
}
