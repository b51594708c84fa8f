#!/usr/bin/env bash
# Compares, in one run, fio on the export directory natively, through ringfs with
# transport=classic and through ringfs with transport=uring (server and mounts on loopback,
# started and cleaned up by this script). Two jobs per target:
#   randread  --rw=randread --bs=4k --iodepth=1 --ioengine=psync    --direct=1
#   seqread   --rw=read     --bs=1M --iodepth=8 --ioengine=io_uring --direct=1
# on a warm 256 MiB file, ~10 s each. JSON goes to the output dir; a Markdown table of
# IOPS / MB/s and ratios to native is printed and saved as results.md.
#
# usage: tests/bench/fio_compare.sh [--quick] [--runtime S] [--size MiB]
#                                   [--build-dir DIR] [--out DIR]
#   --quick   2 s jobs on a 64 MiB file (a smoke run; the numbers mean little)
# Run as root. Not part of CI; ctest runs the --quick form only with -L bench.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
BUILD="$ROOT/build"
RUNTIME=10
SIZE_MB=256
OUT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) RUNTIME=2; SIZE_MB=64 ;;
    --runtime) RUNTIME="$2"; shift ;;
    --size) SIZE_MB="$2"; shift ;;
    --build-dir) BUILD="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "fio_compare: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
BIN="$BUILD/bin"
OUT="${OUT:-$BUILD/bench/fio-$(date +%Y%m%d-%H%M%S)}"

die() { echo "fio_compare: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "run as root"
command -v fio >/dev/null || die "fio is not installed (scripts/install-deps.sh)"
command -v jq >/dev/null || die "jq is not installed (scripts/install-deps.sh)"
[ -x "$BIN/ringfs-server" ] && [ -x "$BIN/ringfs-mount" ] || die "build first: no binaries in $BIN"

WORK="$(mktemp -d /tmp/ringfs-fiocmp.XXXXXX)"
chmod 755 "$WORK"
EXPORT="$WORK/export"
MNT="$WORK/mnt"
mkdir -p "$EXPORT" "$MNT" "$OUT"
SERVER_PID=""
MOUNT_PID=""

is_mounted() { awk -v mp="$MNT" '$5 == mp { found = 1 } END { exit !found }' /proc/self/mountinfo; }

stop_mount() {
  if [ -n "$MOUNT_PID" ] && kill -0 "$MOUNT_PID" 2>/dev/null; then
    kill -TERM "$MOUNT_PID" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$MOUNT_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$MOUNT_PID" 2>/dev/null || true
    wait "$MOUNT_PID" 2>/dev/null || true
  fi
  MOUNT_PID=""
  if is_mounted; then umount -l "$MNT" 2>/dev/null || fusermount3 -uz "$MNT" 2>/dev/null || true; fi
}

cleanup() {
  stop_mount
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$SERVER_PID" 2>/dev/null || true
    wait "$SERVER_PID" 2>/dev/null || true
  fi
  cp -f "$WORK"/*.log "$OUT"/ 2>/dev/null || true
  is_mounted || rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo 1 > /sys/module/fuse/parameters/enable_uring || die "cannot enable FUSE-over-io_uring"

echo "fio_compare: preparing a ${SIZE_MB} MiB file; results in $OUT"
fio --name=prepare --filename="$EXPORT/data" --rw=write --bs=1M --size="${SIZE_MB}M" \
  --ioengine=psync --end_fsync=1 --refill_buffers --output=/dev/null
sync

"$BIN/ringfs-server" --export "$EXPORT" --listen 127.0.0.1:0 --ready-file "$WORK/ready" \
  --export-options no_root_squash \
  --log-level warn </dev/null >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 100); do [ -s "$WORK/ready" ] && break; sleep 0.1; done
[ -s "$WORK/ready" ] || { cat "$WORK/server.log" >&2; die "ringfs-server did not start"; }
ADDR="$(head -n1 "$WORK/ready")"

mount_ringfs() {  # transport
  "$BIN/ringfs-mount" "$ADDR:/" "$MNT" -f -o "transport=$1,stats_file=$WORK/stats-$1" \
    </dev/null >"$WORK/mount-$1.log" 2>&1 &
  MOUNT_PID=$!
  for _ in $(seq 100); do
    is_mounted && return 0
    kill -0 "$MOUNT_PID" 2>/dev/null || break
    sleep 0.1
  done
  cat "$WORK/mount-$1.log" >&2
  die "mount with transport=$1 failed"
}

run_jobs() {  # target dir
  local target="$1" dir="$2"
  cat "$dir/data" >/dev/null  # warm: the server's page cache (and the native one) hold the file
  fio --name=randread --filename="$dir/data" --rw=randread --bs=4k --iodepth=1 \
    --ioengine=psync --direct=1 --size="${SIZE_MB}M" --runtime="$RUNTIME" --time_based \
    --output-format=json --output="$OUT/$target-randread.json"
  fio --name=seqread --filename="$dir/data" --rw=read --bs=1M --iodepth=8 \
    --ioengine=io_uring --direct=1 --size="${SIZE_MB}M" --runtime="$RUNTIME" --time_based \
    --output-format=json --output="$OUT/$target-seqread.json"
  echo "fio_compare: $target done"
}

run_jobs native "$EXPORT"
for transport in classic uring; do
  mount_ringfs "$transport"
  run_jobs "$transport" "$MNT"
  stop_mount
  used="$(sed -n 's/^transport=//p' "$WORK/stats-$transport" 2>/dev/null | head -n1)"
  cp -f "$WORK/stats-$transport" "$OUT/" 2>/dev/null || true
  [ "$used" = "$transport" ] || die "transport=$transport mount reported transport '$used'"
done

iops() { jq -r '.jobs[0].read.iops' "$OUT/$1-randread.json"; }
mbps() { jq -r '.jobs[0].read.bw_bytes / 1000000' "$OUT/$1-seqread.json"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }
fmt() { awk -v a="$1" 'BEGIN { printf "%.0f", a }'; }

NATIVE_IOPS="$(iops native)"
NATIVE_MBPS="$(mbps native)"
{
  echo "fio on a ${SIZE_MB} MiB file, ${RUNTIME} s per job, $(uname -r), $(nproc) CPUs, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "| target | randread 4k QD1 psync IOPS | vs native | read 1M QD8 io_uring MB/s | vs native |"
  echo "|---|---:|---:|---:|---:|"
  for target in native classic uring; do
    i="$(iops "$target")"
    m="$(mbps "$target")"
    label="$target"
    [ "$target" = native ] && label="native export dir"
    [ "$target" = classic ] && label="ringfs transport=classic"
    [ "$target" = uring ] && label="ringfs transport=uring"
    echo "| $label | $(fmt "$i") | $(ratio "$i" "$NATIVE_IOPS") | $(fmt "$m") | $(ratio "$m" "$NATIVE_MBPS") |"
  done
} | tee "$OUT/results.md"
