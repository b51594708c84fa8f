#!/usr/bin/env bash
# Installs every build, test and run dependency of ringfs from Debian 12 packages.
# Idempotent: packages already present are left alone; apt is only asked when something is missing.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev liburing-dev libfuse3-dev fuse3 prometheus-cpp-dev libssl-dev
  libgtest-dev libgmock-dev fio attr util-linux procps jq iproute2
  # sd_notify for the daemons' systemd units; dpkg-dev: dpkg-shlibdeps for the packages (cpack).
  libsystemd-dev dpkg-dev
  # scripts/thread_safety.sh: clang++ (14 on Debian 12) checks the lock annotations GCC ignores.
  clang
  # scripts/fuzz.sh, scripts/sanitize.sh: clang's libFuzzer, ASan and UBSan runtimes (only
  # recommended by clang, which --no-install-recommends leaves out), and ccache for their builds.
  libclang-rt-14-dev ccache
  # bench/run.sh compares against sshfs through its own sshd and plots with matplotlib;
  # the Prometheus test scrapes real endpoints with Debian's server.
  sshfs openssh-server openssh-client python3-matplotlib prometheus
  # tests/deploy/k8s_manifests_test: kubectl kustomize's YAML read as JSON; it_seccomp loads
  # deploy/k8s's seccomp profile with libseccomp (tests/deploy/seccomp_exec).
  python3-yaml libseccomp-dev
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages (${missing[*]}); run as root" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Packages like openssh-server and prometheus start system services on install; ringfs only
# runs its own instances on loopback, so service starts are refused while installing.
policy=/usr/sbin/policy-rc.d
added_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' > "$policy"
  chmod 755 "$policy"
  added_policy=1
fi
trap '[ "$added_policy" = 1 ] && rm -f "$policy"' EXIT
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
