#!/usr/bin/env bash
# ringfs benchmark suite (issue 5). In ONE run, on loopback, it measures the same jobs against:
#   native              the export directory itself (the ceiling)
#   ringfs-uring        ringfs-mount transport=uring  -> ringfs-server
#   ringfs-classic      ringfs-mount transport=classic -> ringfs-server
#   ringfs-uring-floor  ringfs-mount transport=uring  -> ringfs-server --floor (no file I/O)
#   ringfs-uring-base   (only when named in --targets) the ringfs-mount of RINGFS_BASE_BIN,
#                       transport=uring -> the same ringfs-server: A/B of a frontend change in
#                       one interleaved run (report: uring ÷ base)
#   ringfs-uring-tls    ringfs-mount transport=uring,tls -> ringfs-server --tls-cert (TLS 1.3,
#                       a throwaway certificate made in the work dir by ringfs-test-pki)
#   sshfs               sshfs (aes128-gcm) -> its own sshd on a loopback port
# Jobs (fio, direct=1, a 256 MiB file laid out first and read once so the server's page cache
# holds it; 10 s each, 3 s with --quick):
#   a 4k randread QD1 psync          b 4k randread QD16 io_uring
#   c 4k randread QD1 psync x2 jobs  d 1M seq read QD8 io_uring
#   e 1M seq write QD8 io_uring      f 4k randwrite QD16 io_uring
#   g metadata: create, stat (cold caches), unlink of 10,000 files in one directory
#   m metadata scaling: g at 1,000 / 10,000 / 100,000 files
#   s scaling curve: 4k randread io_uring at iodepth 1 2 4 8 16 32 64 (5 s each)
#   t small files (bench/smallfiles.sh): tar -xf of >= 20,000 entries of /usr/include, cold and
#     warm stat of 10,000 of its files, rm -rf of it, rsync -a of the same tree, local git clone
#     --no-hardlinks of a 3,000-file repository; not on the floor and TLS targets
# Rounds: every target is mounted at once and each job runs round by round, all targets in each
# round (A B C A B C ...), so the host's drift moves all targets alike; the report gives medians,
# min-max and per-round ratios. --rounds N applies to all jobs; without it job t runs 3 rounds and
# the others 1.
# For every run it samples /proc/stat (whole host, daemons included) for busy cores and CPU-us
# per operation. Output (fio JSON, results.json, results.md, table.png, scaling.png) goes to
# --out DIR (default bench/out/<timestamp>).
#
# usage: bench/run.sh [--quick] [--out DIR] [--jobs a,b,...] [--targets native,sshfs,...]
#                     [--rounds N]
#   RINGFS_BIN=dir  use ringfs-server/ringfs-mount from dir instead of build/bin
#   RINGFS_BASE_BIN=dir  ringfs-mount of the ringfs-uring-base target (e.g. a build of main)
#   RINGFS_URING_OPTS=o,p  more -o options of the ringfs-uring target only: with RINGFS_BASE_BIN
#                   the same build, an A/B of a mount option (e.g. async_unlink)
#   RINGFS_BASE_SERVER_ARGS="--flag ..."  the ringfs-uring-base target gets its own ringfs-server
#                   with these flags: an A/B of a server option (e.g. --no-pin-workers)
#   RINGFS_BASE_SERVER_BIN=dir  the ringfs-uring-base target gets its own ringfs-server from dir
#                   (with RINGFS_BASE_BIN=dir too: an A/B of a server change)
#   SERVER_NOFILE=n open-file limit of the ringfs-servers (default 1048576, or the hard limit)
#   EXPORT_FS=loop|dir  loop (default): the export is a fresh journaled ext4 on a loop device
#                   (4 GiB sparse image in the work dir), the same filesystem for every target;
#                   dir: a plain directory on /tmp's filesystem. Why: ext4 without a journal
#                   (this VM's root fs) skips inodes deleted in the last 1-6 minutes when it
#                   allocates, so creates right after another target's unlinks get slower
#                   with every file deleted before them.
#   SMALLFILES_SRC=dir, SF_ENTRIES, SF_STAT_FILES, SF_GIT_FILES, SF_DEADLINE: job t's source tree
#                   (default /usr/include), its size and the deadline of each step (see
#                   bench/smallfiles.sh)
# Run as root. Installs fio, sshfs, openssh-server, rsync, git and python3-matplotlib with apt-get when
# missing. Everything it starts (servers, mounts, sshd, temp dirs) is removed on exit, also on
# error or Ctrl-C. Exit status 77 means "cannot run here" (not root, no fio).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"

QUICK=0
OUT=""
JOBS="a,b,c,d,e,f,g,m,s,t"
ALL_TARGETS="native,ringfs-uring,ringfs-classic,ringfs-uring-floor,ringfs-uring-tls,sshfs"
TARGETS="$ALL_TARGETS"
ROUNDS=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --out) OUT="${2:?--out needs a directory}"; shift ;;
    --out=*) OUT="${1#--out=}" ;;
    --jobs) JOBS="${2:?--jobs needs a list}"; shift ;;
    --jobs=*) JOBS="${1#--jobs=}" ;;
    --targets) TARGETS="${2:?--targets needs a list}"; shift ;;
    --targets=*) TARGETS="${1#--targets=}" ;;
    --rounds) ROUNDS="${2:?--rounds needs a number}"; shift ;;
    --rounds=*) ROUNDS="${1#--rounds=}" ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "bench: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

if [ "$QUICK" = 1 ]; then
  RUNTIME=3
  SCALE_RUNTIME=2
  META_COUNTS=(1000 5000)
  G_COUNT=1000
  META_DEADLINE=60
else
  RUNTIME=10
  SCALE_RUNTIME=5
  META_COUNTS=(1000 10000 100000)
  G_COUNT=10000
  META_DEADLINE=300
fi
FILE_MB=256
SERVER_NOFILE="${SERVER_NOFILE:-1048576}"  # RLIMIT_NOFILE of the ringfs-servers started here
IODEPTHS=(1 2 4 8 16 32 64)

PY=/usr/bin/python3
[ -x "$PY" ] || PY="$(command -v python3)"

log() { printf '[bench %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

has_item() {  # has_item LIST ITEM: is ITEM in the comma-separated LIST?
  case ",$1," in *",$2,"*) return 0 ;; *) return 1 ;; esac
}

for j in ${JOBS//,/ }; do
  case "$j" in a|b|c|d|e|f|g|m|s|t) ;; *) die "unknown job '$j' (a-g, m, s, t)" ;; esac
done
case "$ROUNDS" in ''|[1-9]|[1-9][0-9]) ;; *) die "--rounds wants a number from 1 to 99" ;; esac
FIO_ROUNDS="${ROUNDS:-1}"  # jobs a-g, m, s
T_ROUNDS="${ROUNDS:-3}"    # job t
ROUND=1                    # the round in progress, recorded with every run
for t in ${TARGETS//,/ }; do
  has_item "$ALL_TARGETS,ringfs-uring-base" "$t" ||
    die "unknown target '$t' ($ALL_TARGETS,ringfs-uring-base)"
done

if [ "$(id -u)" -ne 0 ]; then
  log "must run as root (mounts, drop_caches, sshd); skipping"
  exit 77
fi

# ---------------------------------------------------------------------------------------------
# Dependencies (Debian packages), installed only when missing.
pkg_installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

APT_UPDATED=0
apt_install() {  # apt_install PKG...: returns non-zero if it could not install them
  local missing=()
  for p in "$@"; do pkg_installed "$p" || missing+=("$p"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  log "installing from Debian: ${missing[*]}"
  local apt=(timeout 900 apt-get -y -q --no-install-recommends -o DPkg::Lock::Timeout=180 install)
  if DEBIAN_FRONTEND=noninteractive "${apt[@]}" "${missing[@]}" >&2; then return 0; fi
  if [ "$APT_UPDATED" = 0 ]; then
    APT_UPDATED=1
    timeout 600 apt-get -q -o DPkg::Lock::Timeout=180 update >&2 || true
    DEBIAN_FRONTEND=noninteractive "${apt[@]}" "${missing[@]}" >&2 && return 0
  fi
  return 1
}

command -v fio >/dev/null || apt_install fio || true
if ! command -v fio >/dev/null; then
  log "fio is not installed and could not be installed; skipping"
  exit 77
fi
SSHFS_OK=1
SSHFS_NOTE=""
if has_item "$TARGETS" sshfs; then
  if { ! command -v sshfs >/dev/null || [ ! -x /usr/sbin/sshd ] || ! command -v ssh-keygen >/dev/null; } &&
     ! apt_install sshfs openssh-server openssh-client; then
    SSHFS_OK=0
    SSHFS_NOTE="sshfs skipped: sshfs/openssh-server could not be installed"
    log "$SSHFS_NOTE"
  fi
fi
PLOTS_NOTE=""
if ! "$PY" -c 'import matplotlib' 2>/dev/null && ! apt_install python3-matplotlib; then
  PLOTS_NOTE="plots skipped: python3-matplotlib could not be installed"
  log "$PLOTS_NOTE"
fi
command -v cc >/dev/null || apt_install gcc || die "no C compiler for bench/metabench.c"

# ---------------------------------------------------------------------------------------------
# ringfs binaries.
if [ -n "${RINGFS_BIN:-}" ]; then
  BIN="$RINGFS_BIN"
else
  BIN="$ROOT/build/bin"
  if [ ! -x "$BIN/ringfs-server" ] || [ ! -x "$BIN/ringfs-mount" ]; then
    log "building ringfs in $ROOT/build"
    (cd "$ROOT" && cmake -S . -B build -G Ninja >&2 && cmake --build build >&2) ||
      die "build failed"
  fi
fi
[ -x "$BIN/ringfs-server" ] && [ -x "$BIN/ringfs-mount" ] ||
  die "no ringfs-server/ringfs-mount in $BIN"

# ---------------------------------------------------------------------------------------------
# Work area and cleanup. Everything this run starts is recorded here and undone by cleanup().
OUT="${OUT:-$HERE/out/$(date +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
WORK="$(mktemp -d /tmp/ringfs-bench.XXXXXX)"
chmod 755 "$WORK"
EXPORT="$WORK/export"
LOGS="$OUT/logs"
mkdir -p "$EXPORT" "$LOGS"
EXPORT_FS="${EXPORT_FS:-loop}"
RUNS="$OUT/runs.jsonl"
: > "$RUNS"

PIDS=()           # servers and sshd, killed on exit
CHILD=""          # the fio/metabench run in progress (see bounded())
MOUNTED=()        # mountpoints we mounted
URING_PARAM=/sys/module/fuse/parameters/enable_uring
URING_OLD=""
CREATED_RUN_SSHD=0
LOOP_DEV=""       # loop device of the export (EXPORT_FS=loop), detached by cleanup()

is_mounted() { awk -v mp="$1" '$5 == mp { f = 1 } END { exit !f }' /proc/self/mountinfo; }

# PIDs of FUSE daemons we started for mountpoint $1 (their command line names the mountpoint,
# which is a path inside our private temp dir).
daemon_pids() {
  local mp="$1" d cmd
  for d in /proc/[0-9]*; do
    cmd="$( { tr '\0' ' ' < "$d/cmdline"; } 2>/dev/null)" || continue
    case "$cmd" in
      *ringfs-mount*" $mp "*|*ringfs-mount*" $mp"|*sshfs*" $mp "*|*sshfs*" $mp") echo "${d#/proc/}" ;;
    esac
  done
}

unmount_one() {  # unmount_one MNT: umount, then lazily, then make sure its daemon is gone
  local mp="$1" pids p i
  pids="$(daemon_pids "$mp")"
  if is_mounted "$mp"; then
    timeout 30 umount "$mp" 2>/dev/null || timeout 30 fusermount3 -u "$mp" 2>/dev/null ||
      timeout 10 umount -l "$mp" 2>/dev/null || true
  fi
  for p in $pids; do
    for i in $(seq 1 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$p" 2>/dev/null; then
      log "daemon $p of $mp still running after unmount; killing it"
      kill -9 "$p" 2>/dev/null || true
    fi
  done
  if is_mounted "$mp"; then
    timeout 10 umount -l "$mp" 2>/dev/null || true
  fi
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  set +e
  local mp p
  if [ -n "$CHILD" ]; then  # a fio or metabench run in progress (timeout forwards the signal)
    kill -TERM "$CHILD" 2>/dev/null
    for _ in $(seq 1 150); do kill -0 "$CHILD" 2>/dev/null || break; sleep 0.1; done
  fi
  # Every mount below our work dir, deepest first, whether or not we recorded it.
  for mp in $(awk -v w="$WORK/" 'index($5, w) == 1 { print $5 }' /proc/self/mountinfo | sort -r); do
    unmount_one "$mp"
  done
  for p in "${PIDS[@]}"; do
    kill -TERM "$p" 2>/dev/null
  done
  for p in "${PIDS[@]}"; do
    for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null
    wait "$p" 2>/dev/null
  done
  [ -n "$LOOP_DEV" ] && losetup -d "$LOOP_DEV" 2>/dev/null
  if [ -n "$URING_OLD" ] && [ -w "$URING_PARAM" ]; then echo "$URING_OLD" > "$URING_PARAM"; fi
  [ "$CREATED_RUN_SSHD" = 1 ] && rmdir /run/sshd 2>/dev/null
  if awk -v w="$WORK/" 'index($5, w) == 1 { f = 1 } END { exit !f }' /proc/self/mountinfo; then
    log "a mount is still present under $WORK; not removing it"
  else
    rm -rf --one-file-system "$WORK"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'log "interrupted"; exit 130' INT TERM

# The export's filesystem (see EXPORT_FS above). Mounted under $WORK, so cleanup() unmounts it
# (the loop device is released with it) before removing the image.
EXPORT_FS_NOTE="directory on $(findmnt -n -o FSTYPE --target "$WORK" 2>/dev/null || echo '?') ($WORK)"
if [ "$EXPORT_FS" = loop ]; then
  # Direct I/O on the loop device keeps "native" O_DIRECT going to the disk, not to the page
  # cache of the image file.
  if truncate -s 4G "$WORK/export.img" &&
     mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$WORK/export.img" &&
     LOOP_DEV="$(losetup -f --show --direct-io=on "$WORK/export.img")" &&
     mount "$LOOP_DEV" "$EXPORT"; then
    chmod 755 "$EXPORT"
    EXPORT_FS_NOTE="fresh ext4 with journal on a loop device (4 GiB sparse image on $(findmnt -n -o FSTYPE --target "$WORK" 2>/dev/null || echo '?'))"
  else
    log "cannot set up a loop-mounted ext4 export; using a plain directory"
  fi
fi
log "export: $EXPORT_FS_NOTE"

# ---------------------------------------------------------------------------------------------
# Components.
wait_for() {  # wait_for SECONDS CMD...: polls CMD every 0.1 s
  local deadline=$((SECONDS + $1)); shift
  while ! "$@"; do
    [ $SECONDS -ge $deadline ] && return 1
    sleep 0.1
  done
}

file_nonempty() { [ -s "$1" ]; }

start_server() {  # start_server NAME [extra flags]: sets SERVER_ADDR
  local name="$1"; shift
  local ready="$WORK/$name.ready"
  # With file handles the server keeps a bounded number of node fds; without them (a probe
  # failure, logged) it holds one fd per node the client knows, and 100,000 files in one
  # directory need more than the usual 1024-20000 descriptors: raise the limit where we can.
  (ulimit -n "$SERVER_NOFILE" 2>/dev/null || ulimit -n "$(ulimit -Hn)"
   exec "${SERVER_BIN:-$BIN}/ringfs-server" --export "$EXPORT" --listen 127.0.0.1:0 --ready-file "$ready" \
     --export-options no_root_squash "$@") \
    > "$LOGS/$name.log" 2>&1 &
  PIDS+=($!)
  wait_for 15 file_nonempty "$ready" || die "$name did not become ready (see $LOGS/$name.log)"
  SERVER_ADDR="$(head -n1 "$ready")"
  local nofile nodes="nodes by file handle, a bounded cache of node fds"
  nofile="$(awk '/^Max open files/ { print $4 }' "/proc/${PIDS[-1]}/limits" 2>/dev/null)"
  if grep -q 'file handles unusable' "$LOGS/$name.log" 2>/dev/null; then
    nodes="one fd per known node (file handles unusable, see $name.log): this caps the files one client can see"
  fi
  log "$name listening on $SERVER_ADDR (open-file limit ${nofile:-?}; $nodes)"
  record "$name" server "" info "" ok 0 0 "0 0" "0 0" "open-file limit ${nofile:-?}; $nodes"
}

free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

mount_ringfs() {  # mount_ringfs MNT ADDR TRANSPORT STATS [EXTRA_OPTIONS]
  local mp="$1" addr="$2" transport="$3" stats="$4" extra="${5:+,$5}"
  mkdir -p "$mp"
  if [ "$transport" = uring ]; then
    [ -e "$URING_PARAM" ] || { log "no $URING_PARAM: kernel lacks FUSE-over-io_uring"; return 1; }
    [ -z "$URING_OLD" ] && URING_OLD="$(cat "$URING_PARAM")"
    echo 1 > "$URING_PARAM"
  fi
  MOUNTED+=("$mp")
  timeout 30 "${MOUNT_BIN:-$BIN}/ringfs-mount" "$addr:/" "$mp" -o "transport=$transport,stats_file=$stats$extra" \
    >> "$LOGS/mounts.log" 2>&1 || { log "ringfs-mount $transport failed (see $LOGS/mounts.log)"; return 1; }
  is_mounted "$mp" || { log "ringfs-mount $transport reported success but $mp is not mounted"; return 1; }
}

SSH_DIR="$WORK/ssh"
SSH_PORT=""
start_sshd() {
  [ -n "$SSH_PORT" ] && return 0
  mkdir -p "$SSH_DIR"
  chmod 700 "$SSH_DIR"
  ssh-keygen -q -t ed25519 -N '' -f "$SSH_DIR/host_key" >/dev/null
  ssh-keygen -q -t ed25519 -N '' -f "$SSH_DIR/user_key" >/dev/null
  cp "$SSH_DIR/user_key.pub" "$SSH_DIR/authorized_keys"
  SSH_PORT="$(free_port)"
  local sftp=/usr/lib/openssh/sftp-server
  [ -x "$sftp" ] || sftp=internal-sftp
  cat > "$SSH_DIR/sshd_config" <<EOF
Port $SSH_PORT
ListenAddress 127.0.0.1
HostKey $SSH_DIR/host_key
PidFile $SSH_DIR/sshd.pid
AuthorizedKeysFile $SSH_DIR/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
Subsystem sftp $sftp
EOF
  if [ ! -d /run/sshd ]; then mkdir -p /run/sshd; CREATED_RUN_SSHD=1; fi
  /usr/sbin/sshd -f "$SSH_DIR/sshd_config" -D -e > "$LOGS/sshd.log" 2>&1 &
  PIDS+=($!)
  local port_open='exec 3<>/dev/tcp/127.0.0.1/'"$SSH_PORT"
  wait_for 15 bash -c "$port_open" 2>/dev/null || { log "sshd did not start (see $LOGS/sshd.log)"; return 1; }
  log "sshd on 127.0.0.1:$SSH_PORT"
}

mount_sshfs() {  # mount_sshfs MNT
  local mp="$1"
  mkdir -p "$mp"
  start_sshd || return 1
  MOUNTED+=("$mp")
  timeout 30 sshfs -o "Ciphers=aes128-gcm@openssh.com,IdentityFile=$SSH_DIR/user_key,StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null,BatchMode=yes,port=$SSH_PORT" \
    "root@127.0.0.1:$EXPORT" "$mp" >> "$LOGS/mounts.log" 2>&1 || { log "sshfs failed (see $LOGS/mounts.log)"; return 1; }
  is_mounted "$mp" || { log "sshfs reported success but $mp is not mounted"; return 1; }
}

# ---------------------------------------------------------------------------------------------
# Measurements.

# bounded SECONDS CMD...: runs CMD under timeout as a background child and waits for it, so a
# signal to this script is acted on at once (bash defers traps while a foreground child runs);
# cleanup() stops the child. Returns CMD's status (124 on timeout).
bounded() {
  local secs="$1" rc=0
  shift
  timeout -k 10 "$secs" "$@" &
  CHILD=$!
  wait "$CHILD" || rc=$?
  CHILD=""
  return "$rc"
}

cpu_sample() {  # prints "busy_jiffies total_jiffies" of the whole host
  local _cpu user nice sys idle iowait irq softirq steal _rest
  read -r _cpu user nice sys idle iowait irq softirq steal _rest < /proc/stat
  echo "$((user + nice + sys + irq + softirq + steal)) $((user + nice + sys + idle + iowait + irq + softirq + steal))"
}
now() { date +%s.%N; }
HZ="$(getconf CLK_TCK)"

# The host may be shared (builds, other tests). Before each run wait, at most QUIET_MAX seconds,
# for a second in which the host is nearly idle; BG_CORES keeps the busy cores of the last such
# second so the report can flag runs that shared the host with something else.
QUIET_MAX="${QUIET_MAX:-10}"
[ "$QUICK" = 1 ] && QUIET_MAX="${QUIET_MAX_QUICK:-3}"
BG_CORES=0
quiet_wait() {
  local deadline=$((SECONDS + QUIET_MAX)) c0 c1 b0 b1 x
  while :; do
    c0="$(cpu_sample)"; sleep 1; c1="$(cpu_sample)"
    read -r b0 x <<< "$c0"; read -r b1 x <<< "$c1"
    BG_CORES="$(awk -v b=$((b1 - b0)) -v hz="$HZ" 'BEGIN { printf "%.2f", b / hz }')"
    awk -v c="$BG_CORES" 'BEGIN { exit !(c < 0.25) }' && return 0
    [ $SECONDS -ge $deadline ] && { log "host still busy (${BG_CORES} cores) before this run"; return 0; }
  done
}

record() {  # record TARGET JOB PARAM KIND FILE STATUS T0 T1 CPU0 CPU1 NOTE
  local b0 t0j b1 t1j
  read -r b0 t0j <<< "$9"
  read -r b1 t1j <<< "${10}"
  "$PY" -c 'import json, sys
a = sys.argv[1:]
print(json.dumps({"target": a[0], "job": a[1], "param": a[2], "kind": a[3], "file": a[4],
                  "status": a[5], "wall_s": float(a[7]) - float(a[6]),
                  "busy_jiffies": int(a[9]) - int(a[8]), "total_jiffies": int(a[11]) - int(a[10]),
                  "hz": int(a[12]), "note": a[13], "bg_cores": float(a[14]),
                  "round": int(a[15])}))' \
    "$1" "$2" "$3" "$4" "$5" "$6" "$7" "$8" "$b0" "$b1" "$t0j" "$t1j" "$HZ" "${11}" \
    "$BG_CORES" "$ROUND" >> "$RUNS"
}

fio_job_args() {  # fio_job_args JOB [IODEPTH]: the fio options of one job
  case "$1" in
    a) echo "--rw=randread --bs=4k --ioengine=psync --iodepth=1 --numjobs=1" ;;
    b) echo "--rw=randread --bs=4k --ioengine=io_uring --iodepth=16 --numjobs=1" ;;
    c) echo "--rw=randread --bs=4k --ioengine=psync --iodepth=1 --numjobs=2" ;;
    d) echo "--rw=read --bs=1M --ioengine=io_uring --iodepth=8 --numjobs=1" ;;
    e) echo "--rw=write --bs=1M --ioengine=io_uring --iodepth=8 --numjobs=1" ;;
    f) echo "--rw=randwrite --bs=4k --ioengine=io_uring --iodepth=16 --numjobs=1" ;;
    s) echo "--rw=randread --bs=4k --ioengine=io_uring --iodepth=$2 --numjobs=1" ;;
  esac
}

run_fio() {  # run_fio TARGET DIR JOB [IODEPTH]
  local target="$1" dir="$2" job="$3" qd="${4:-}" runtime="$RUNTIME" name status note=""
  name="$job"
  if [ "$job" = s ]; then name="s-qd$qd"; runtime="$SCALE_RUNTIME"; fi
  [ "$FIO_ROUNDS" -gt 1 ] && name="$name-r$ROUND"
  local json="fio/$target-$name.json"
  mkdir -p "$OUT/fio"
  log "$target: fio job $name (${runtime}s)"
  local c0 c1 t0 t1
  quiet_wait
  t0="$(now)"; c0="$(cpu_sample)"
  # shellcheck disable=SC2046
  if bounded $((runtime + 90)) fio --name="$name" --filename="$dir/bench.dat" \
      --size=${FILE_MB}m --direct=1 --invalidate=0 --time_based --runtime="$runtime" \
      --group_reporting $(fio_job_args "$job" "$qd") --output-format=json \
      --output="$OUT/$json" > "$LOGS/fio-$target-$name.log" 2>&1; then
    status=ok
  else
    status=failed
    note="fio exit $? ($(tail -n 2 "$LOGS/fio-$target-$name.log" | tr '\n' ' ' | cut -c1-200))"
    log "$target: $name failed: $note"
  fi
  c1="$(cpu_sample)"; t1="$(now)"
  record "$target" "$job" "$qd" fio "$json" "$status" "$t0" "$t1" "$c0" "$c1" "$note"
}

drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches; }

METABENCH="$WORK/metabench"
cc -O2 -Wall -o "$METABENCH" "$HERE/metabench.c" || die "cannot compile bench/metabench.c"

run_meta() {  # run_meta TARGET DIR: metadata phases at every count; skips what would be too slow
  local target="$1" dir="$2" counts=() n prev_rate="" phase
  if has_item "$JOBS" m; then counts=("${META_COUNTS[@]}"); fi
  if has_item "$JOBS" g && ! printf '%s\n' "${counts[@]}" | grep -qx "$G_COUNT"; then
    counts+=("$G_COUNT")
  fi
  mapfile -t counts < <(printf '%s\n' "${counts[@]}" | sort -n)
  mkdir -p "$OUT/meta"
  local hung=""
  for n in "${counts[@]}"; do
    if [ -n "$hung" ]; then
      for phase in create stat unlink; do
        record "$target" "meta-$phase" "$n" meta "" skipped 0 0 "0 0" "0 0" "$hung"
      done
      continue
    fi
    # Projected create time at this size from the last measured rate (create is the slowest).
    if [ -n "$prev_rate" ] && "$PY" -c 'import sys; sys.exit(0 if float(sys.argv[1]) / max(float(sys.argv[2]), 1e-9) > float(sys.argv[3]) else 1)' \
        "$n" "$prev_rate" "$META_DEADLINE"; then
      local why="skipped at $n files: create at $(printf '%.0f' "$prev_rate")/s would take over ${META_DEADLINE}s"
      log "$target: $why"
      for phase in create stat unlink; do
        record "$target" "meta-$phase" "$n" meta "" skipped 0 0 "0 0" "0 0" "$why"
      done
      continue
    fi
    # A new name each round: the directory is made and removed on the export behind the mounts'
    # backs (no --export-watch), so a ringfs mount would still hold last round's directory.
    local sub="meta-$n-r$ROUND"
    rm -rf --one-file-system "${EXPORT:?}/$sub"
    mkdir "$EXPORT/$sub"
    for phase in create stat unlink; do
      [ "$phase" = stat ] && drop_caches
      quiet_wait
      local rs=""
      [ "$FIO_ROUNDS" -gt 1 ] && rs="-r$ROUND"
      local json="meta/$target-$n-$phase$rs.json" c0 c1 t0 t1 status=ok note="" rc=0
      log "$target: metadata $phase x $n${rs:+ (round $ROUND)}"
      t0="$(now)"; c0="$(cpu_sample)"
      bounded $((META_DEADLINE + 30)) "$METABENCH" "$phase" "$dir/$sub" "$n" "$META_DEADLINE" \
        > "$OUT/$json" 2> "$LOGS/meta-$target-$n-$phase$rs.log" || rc=$?
      c1="$(cpu_sample)"; t1="$(now)"
      if grep -q '"deadline_hit": true' "$OUT/$json" 2>/dev/null; then
        note="deadline of ${META_DEADLINE}s hit: partial"
      fi
      if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        status=failed
        note="one $phase did not return within $((META_DEADLINE + 30))s (hung request); metabench killed"
        hung="not run: an earlier $phase at $n files hung on this mount"
        log "$target: $note"
      elif [ "$rc" != 0 ]; then
        status=failed
        note="$(cat "$OUT/$json" "$LOGS/meta-$target-$n-$phase$rs.log" 2>/dev/null | tr '\n' ' ' | cut -c1-200)"
      fi
      record "$target" "meta-$phase" "$n" meta "$json" "$status" "$t0" "$t1" "$c0" "$c1" "$note"
      [ -n "$hung" ] && break
      if [ "$phase" = create ]; then
        prev_rate="$("$PY" -c 'import json, sys
try: print(json.load(open(sys.argv[1]))["ops_per_s"])
except Exception: print(0)' "$OUT/$json")"
      fi
    done
    rm -rf --one-file-system "${EXPORT:?}/$sub"  # leftovers of a partial or failed phase
  done
}

warm_file() {
  local f="$EXPORT/bench.dat"
  if [ ! -f "$f" ] || [ "$(stat -c %s "$f")" -ne $((FILE_MB << 20)) ]; then
    log "laying out ${FILE_MB} MiB bench.dat"
    dd if=/dev/urandom of="$f" bs=1M count="$FILE_MB" status=none conv=fsync
  fi
  cat "$f" > /dev/null  # now in the server's page cache
}

run_meta_job() {  # run_meta_job TARGET DIR: jobs g/m on one target
  local target="$1" dir="$2"
  if [ "$target" = ringfs-uring-floor ]; then
    # --floor changes only READ and WRITE: metadata would repeat ringfs-uring's figures.
    if [ "$ROUND" = 1 ]; then
      record "$target" meta-create "" info "" skipped 0 0 "0 0" "0 0" \
        "metadata not run on the floor target: --floor changes only READ and WRITE"
    fi
  else
    run_meta "$target" "$dir"
  fi
}

target_failed() {  # target_failed TARGET WHY: one record so the report says why it is empty
  log "$1: $2"
  record "$1" setup "" setup "" failed 0 0 "0 0" "0 0" "$2"
}

stats_note() {  # how the requests of a ringfs mount travelled (ring vs /dev/fuse)
  [ -f "$1" ] || return 0
  tr '\n' ' ' < "$1" | cut -c1-300
}

# ---------------------------------------------------------------------------------------------
# The run.
log "output in $OUT; work dir $WORK; jobs $JOBS; targets $TARGETS; quick=$QUICK; rounds: $FIO_ROUNDS (fio, metadata), $T_ROUNDS (small files)"
if has_item "$TARGETS" ringfs-uring || has_item "$TARGETS" ringfs-classic ||
   has_item "$TARGETS" ringfs-uring-base; then
  start_server ringfs-server
  MAIN_ADDR="$SERVER_ADDR"
fi

# Every target is mounted first and stays mounted until the end, each on its own mountpoint, so
# the jobs can go round by round over all targets.
declare -A MNT=()           # target -> the directory its jobs use
declare -A METRICS_PORT=()  # ringfs target -> port of its mount's Prometheus endpoint
UP=()                       # targets that are up, in --targets order
for target in ${TARGETS//,/ }; do
  mp="$WORK/mnt-$target"
  case "$target" in
    native)
      MNT[native]="$EXPORT"
      UP+=(native)
      ;;
    ringfs-uring|ringfs-uring-base|ringfs-classic|ringfs-uring-floor|ringfs-uring-tls)
      transport=uring
      MOUNT_BIN="$BIN"
      if [ "$target" = ringfs-uring-base ]; then
        if [ ! -x "${RINGFS_BASE_BIN:-}/ringfs-mount" ]; then
          target_failed "$target" "RINGFS_BASE_BIN names no ringfs-mount"
          continue
        fi
        MOUNT_BIN="$RINGFS_BASE_BIN"
      fi
      addr="${MAIN_ADDR:-}"
      if [ "$target" = ringfs-uring-base ] &&
         [ -n "${RINGFS_BASE_SERVER_ARGS:-}${RINGFS_BASE_SERVER_BIN:-}" ]; then
        # A/B of a server option or build: the base target gets a server of its own.
        # shellcheck disable=SC2086  # a list of flags
        SERVER_BIN="${RINGFS_BASE_SERVER_BIN:-$BIN}" start_server ringfs-server-base \
          ${RINGFS_BASE_SERVER_ARGS:-}
        addr="$SERVER_ADDR"
      fi
      extra=""
      [ "$target" = ringfs-classic ] && transport=classic
      [ "$target" = ringfs-uring ] && extra="${RINGFS_URING_OPTS:-}"
      if [ "$target" = ringfs-uring-floor ]; then
        start_server ringfs-server-floor --floor
        addr="$SERVER_ADDR"
      fi
      if [ "$target" = ringfs-uring-tls ]; then
        # A throwaway CA and server certificate (localhost, 127.0.0.1), never kept.
        mkdir -p "$WORK/pki" && chmod 700 "$WORK/pki"
        "$BIN/ringfs-test-pki" "$WORK/pki" || die "ringfs-test-pki failed"
        start_server ringfs-server-tls --tls-cert "$WORK/pki/server.pem" \
          --tls-key "$WORK/pki/server.key"
        addr="$SERVER_ADDR"
        extra="tls,tls_ca=$WORK/pki/ca.pem"
      fi
      # The Prometheus endpoint gives requests by opcode (job t reads it around tar -xf).
      port="$(free_port)"
      extra="${extra:+$extra,}metrics=127.0.0.1:$port"
      if MOUNT_BIN="$MOUNT_BIN" mount_ringfs "$mp" "$addr" "$transport" "$OUT/stats-$target.txt" \
          "$extra"; then
        MNT[$target]="$mp"
        METRICS_PORT[$target]="$port"
        UP+=("$target")
      else
        target_failed "$target" "mount failed (see logs/mounts.log)"
        unmount_one "$mp"
      fi
      ;;
    sshfs)
      if [ "$SSHFS_OK" != 1 ]; then
        target_failed sshfs "$SSHFS_NOTE"
      elif mount_sshfs "$mp"; then
        MNT[sshfs]="$mp"
        UP+=(sshfs)
      else
        target_failed sshfs "sshfs mount failed (see logs/mounts.log, logs/sshd.log)"
        unmount_one "$mp"
      fi
      ;;
  esac
done

# Job by job, round by round, target by target.
FIO_JOBS=()
for j in a b c d e f; do has_item "$JOBS" "$j" && FIO_JOBS+=("$j"); done
if [ ${#FIO_JOBS[@]} -gt 0 ] || has_item "$JOBS" s; then
  warm_file
fi
for j in "${FIO_JOBS[@]}"; do
  for r in $(seq 1 "$FIO_ROUNDS"); do
    ROUND="$r"
    for target in "${UP[@]}"; do run_fio "$target" "${MNT[$target]}" "$j"; done
  done
done
if has_item "$JOBS" s; then
  for qd in "${IODEPTHS[@]}"; do
    for r in $(seq 1 "$FIO_ROUNDS"); do
      ROUND="$r"
      for target in "${UP[@]}"; do run_fio "$target" "${MNT[$target]}" s "$qd"; done
    done
  done
fi
if has_item "$JOBS" g || has_item "$JOBS" m; then
  for r in $(seq 1 "$FIO_ROUNDS"); do
    ROUND="$r"
    for target in "${UP[@]}"; do run_meta_job "$target" "${MNT[$target]}"; done
  done
fi
ROUND=1
SF_NOTE=""
if has_item "$JOBS" t; then
  # shellcheck source=bench/smallfiles.sh
  . "$HERE/smallfiles.sh"
  SF_TARGETS=()
  for target in "${UP[@]}"; do
    case "$target" in
      ringfs-uring-floor)
        sf_skip "$target" tar "small files not run on the floor target: --floor discards file data" ;;
      ringfs-uring-tls)
        sf_skip "$target" tar "small files not run on the TLS target (keeps the run bounded; TLS costs show in the fio jobs)" ;;
      *) SF_TARGETS+=("$target") ;;
    esac
  done
  [ ${#SF_TARGETS[@]} -gt 0 ] && run_smallfiles "${SF_TARGETS[@]}"
fi

for target in "${UP[@]}"; do
  [ "$target" = native ] && continue
  unmount_one "${MNT[$target]}"
  case "$target" in
    ringfs-*) record "$target" transport "" info "" ok 0 0 "0 0" "0 0" "$(stats_note "$OUT/stats-$target.txt")" ;;
  esac
done

# ---------------------------------------------------------------------------------------------
# Report.
"$PY" - "$OUT/machine.json" "$ROOT" "$QUICK" "$RUNTIME" "$SCALE_RUNTIME" "$FILE_MB" \
    "$JOBS" "$TARGETS" "$G_COUNT" "${PLOTS_NOTE}" "$EXPORT_FS_NOTE" "$FIO_ROUNDS" "$T_ROUNDS" \
    "$SF_NOTE" <<'EOF'
import json, os, platform, subprocess, sys, time
(out, root, quick, runtime, scale_runtime, file_mb, jobs, targets, g_count, plots_note,
 export_fs, fio_rounds, t_rounds, sf_note) = sys.argv[1:]
def sh(*cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception:
        return ""
cpu = ""
for line in open("/proc/cpuinfo"):
    if line.startswith("model name"):
        cpu = line.split(":", 1)[1].strip()
        break
mem_kib = 0
for line in open("/proc/meminfo"):
    if line.startswith("MemTotal:"):
        mem_kib = int(line.split()[1])
head = sh("git", "-C", root, "rev-parse", "HEAD")
dirty = sh("git", "-C", root, "status", "--porcelain", "--untracked-files=no")
json.dump({
    "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    "commit": head, "worktree_dirty": bool(dirty),
    "kernel": platform.release(), "cpu_model": cpu, "cpus": os.cpu_count(),
    "mem_gib": round(mem_kib / 1048576, 1), "fio": sh("fio", "--version"),
    "sshfs": next((l for l in sh("sh", "-c", "sshfs --version 2>&1").splitlines()
                   if l.startswith("SSHFS")), ""),
    "quick": quick == "1", "runtime_s": int(runtime), "scale_runtime_s": int(scale_runtime),
    "file_mib": int(file_mb), "jobs": jobs, "targets": targets, "g_count": int(g_count),
    "plots_note": plots_note, "export_fs": export_fs,
    "fio_rounds": int(fio_rounds), "t_rounds": int(t_rounds), "smallfiles": sf_note,
}, open(out, "w"), indent=1)
EOF
"$PY" "$HERE/report.py" "$OUT" || die "report failed"
log "done: $OUT/results.md"
