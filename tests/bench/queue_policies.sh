#!/usr/bin/env bash
# The seed patches' experiment on this machine: fio against one ringfs mount per queue-engine
# setting (placement of background work, commit locality, active set), all in one run.
#   tests/bench/queue_policies.sh [--quick] [--out DIR]
# Needs root (mounts, enable_uring) and a build in build/ (or RINGFS_BIN=dir). Loopback only.
# Prints a Markdown table (IOPS for 4k jobs, MB/s for buffered sequential ones) and keeps the
# fio JSON in DIR. Not a test: CI does not run it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

runtime=8
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) runtime=2 ;;
    --out) out="$2"; shift ;;
    *) echo "usage: $0 [--quick] [--out DIR]" >&2; exit 2 ;;
  esac
  shift
done
bin="${RINGFS_BIN:-$PWD/build/bin}"
[ -x "$bin/ringfs-mount" ] || { echo "no ringfs binaries in $bin (build first)" >&2; exit 1; }
command -v fio >/dev/null || { echo "fio missing (scripts/install-deps.sh)" >&2; exit 1; }
work=$(mktemp -d /tmp/ringfs-qbench.XXXXXX)
out="${out:-$work/out}"
mkdir -p "$out" "$work/export" "$work/mnt"
server_pid=""

cleanup() {
  if mountpoint -q "$work/mnt"; then umount "$work/mnt" 2>/dev/null || umount -l "$work/mnt"; fi
  [ -n "$server_pid" ] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$work/export" "$work/mnt"
}
trap cleanup EXIT INT TERM

echo 1 > /sys/module/fuse/parameters/enable_uring
"$bin/ringfs-server" --export "$work/export" --listen 127.0.0.1:0 --ready-file "$work/ready" \
  --export-options no_root_squash \
  --log-level warn 2>"$work/server.log" &
server_pid=$!
for _ in $(seq 100); do [ -s "$work/ready" ] && break; sleep 0.05; done
address=$(cat "$work/ready")
ncpu=$(nproc)
last=$((ncpu - 1))

# name | mount options
configs=(
  "local/forwarder/all|bg_policy=local,commit=forwarder,active=0-$last"
  "next-core/forwarder/all|bg_policy=next-core,commit=forwarder,active=0-$last"
  "p2c/forwarder/all|bg_policy=p2c,commit=forwarder,active=0-$last"
  "local/origin/all|bg_policy=local,commit=origin,active=0-$last"
  "next-core/origin/all|bg_policy=next-core,commit=origin,active=0-$last"
  "local/forwarder/{0}|bg_policy=local,commit=forwarder,active=0"
)
# name | fio arguments | metric (iops or bw)
jobs=(
  "rr4k-uring-qd1|--rw=randread --bs=4k --ioengine=io_uring --direct=1 --iodepth=1 --numjobs=1|iops"
  "rr4k-uring-qd4|--rw=randread --bs=4k --ioengine=io_uring --direct=1 --iodepth=4 --numjobs=1|iops"
  "rr4k-uring-qd8|--rw=randread --bs=4k --ioengine=io_uring --direct=1 --iodepth=8 --numjobs=1|iops"
  "rr4k-psync-j1|--rw=randread --bs=4k --ioengine=psync --direct=1 --iodepth=1 --numjobs=1|iops"
  "rr4k-psync-j2|--rw=randread --bs=4k --ioengine=psync --direct=1 --iodepth=1 --numjobs=2|iops"
  "seqread-buffered|--rw=read --bs=1M --ioengine=psync --direct=0 --iodepth=1 --numjobs=1 --invalidate=1|bw"
  "seqwrite-buffered|--rw=write --bs=1M --ioengine=psync --direct=0 --iodepth=1 --numjobs=1 --end_fsync=1|bw"
)

header="| setting (bg policy / commit / active) |"
rule="|---|"
for job in "${jobs[@]}"; do
  header+=" ${job%%|*} |"
  rule+="---:|"
done
table="$header"$'\n'"$rule"$'\n'
for config in "${configs[@]}"; do
  name="${config%%|*}"
  options="${config#*|}"
  "$bin/ringfs-mount" "$address:/" "$work/mnt" -o "transport=uring,$options" >/dev/null
  fio --name=layout --filename="$work/mnt/data" --size=256M --rw=write --bs=1M \
    --output=/dev/null >/dev/null
  row="| $name |"
  for job in "${jobs[@]}"; do
    jname="${job%%|*}"
    rest="${job#*|}"
    args="${rest%|*}"
    metric="${rest##*|}"
    file="$out/$(echo "$name" | tr '/{}' '___')-$jname.json"
    # shellcheck disable=SC2086
    fio --name="$jname" --filename="$work/mnt/data" --size=256M $args --group_reporting \
      --runtime="$runtime" --time_based --output-format=json --output="$file" >/dev/null
    value=$(python3 -c "
import json, sys
j = json.load(open('$file'))['jobs'][0]
side = j['read'] if j['read']['io_bytes'] > 0 else j['write']
print(round(side['iops']) if '$metric' == 'iops' else round(side['bw_bytes'] / 1e6))")
    row+=" $value |"
  done
  table+="$row"$'\n'
  umount "$work/mnt"
done
echo
echo "ringfs queue-engine settings, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, ${runtime}s per job"
echo "(4k jobs: IOPS; buffered sequential: MB/s)"
echo
printf '%s' "$table"
printf '%s' "$table" > "$out/table.md"
echo
echo "fio JSON: $out"
