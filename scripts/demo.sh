#!/usr/bin/env bash
# ringfs demo on one machine, as root:
#   scripts/demo.sh          install dependencies, build, start ringfs-server exporting
#                            /var/tmp/ringfs-demo/export on 127.0.0.1 and mount it on
#                            /mnt/ringfs-demo with ringfs-mount (transport=auto)
#   scripts/demo.sh --stop   unmount and stop the server
# Re-running stops the previous demo first. Nothing leaves the loopback interface.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="$ROOT/build/bin"
DEMO_DIR=/var/tmp/ringfs-demo
EXPORT="$DEMO_DIR/export"
MNT=/mnt/ringfs-demo
STATS="$DEMO_DIR/mount.stats"
READY="$DEMO_DIR/server.addr"
SERVER_PID="$DEMO_DIR/server.pid"
SERVER_LOG="$DEMO_DIR/server.log"
MOUNT_LOG="$DEMO_DIR/mount.log"
URING_PARAM=/sys/module/fuse/parameters/enable_uring

say() { printf 'demo: %s\n' "$*"; }
die() { printf 'demo: error: %s\n' "$*" >&2; exit 1; }

is_mounted() { awk -v mp="$MNT" '$5 == mp { found = 1 } END { exit !found }' /proc/self/mountinfo; }

stop_demo() {
  if is_mounted; then
    say "unmounting $MNT"
    umount "$MNT" 2>/dev/null || umount -l "$MNT" || fusermount3 -uz "$MNT" || true
  fi
  # The mount daemon exits once unmounted; give it a moment, then insist.
  for _ in $(seq 50); do
    pgrep -f "ringfs-mount .*$MNT" >/dev/null || break
    sleep 0.1
  done
  pkill -KILL -f "ringfs-mount .*$MNT" 2>/dev/null || true
  if [ -f "$SERVER_PID" ]; then
    pid="$(cat "$SERVER_PID")"
    if [ -n "$pid" ] && grep -q ringfs-server "/proc/$pid/cmdline" 2>/dev/null; then
      say "stopping ringfs-server (pid $pid)"
      kill -TERM "$pid" 2>/dev/null || true
      for _ in $(seq 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
      done
      kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$SERVER_PID"
  fi
}

[ "$(id -u)" -eq 0 ] || die "run as root (it mounts a filesystem and sets $URING_PARAM)"

if [ "${1:-}" = "--stop" ]; then
  stop_demo
  say "stopped; the export is still in $EXPORT"
  exit 0
elif [ $# -gt 0 ]; then
  echo "usage: $0 [--stop]" >&2
  exit 2
fi

stop_demo

say "installing dependencies (Debian packages)"
bash "$ROOT/scripts/install-deps.sh"
say "building"
cmake -S "$ROOT" -B "$ROOT/build" -G Ninja >/dev/null
cmake --build "$ROOT/build"
[ -x "$BIN/ringfs-server" ] && [ -x "$BIN/ringfs-mount" ] || die "the build produced no ringfs binaries"

# FUSE-over-io_uring is off by default; the kernel only offers the ring when this is Y.
modprobe fuse 2>/dev/null || true
if [ -w "$URING_PARAM" ]; then
  echo 1 > "$URING_PARAM"
else
  say "note: $URING_PARAM does not exist: this kernel has no FUSE-over-io_uring; ringfs will use classic /dev/fuse"
fi

mkdir -p "$EXPORT" "$MNT"
if [ ! -e "$EXPORT/hello.txt" ]; then
  echo "Hello from ringfs! This file lives in $EXPORT on the server side." > "$EXPORT/hello.txt"
fi
rm -f "$READY" "$STATS"

say "starting ringfs-server on 127.0.0.1 (log: $SERVER_LOG)"
# no_root_squash: the demo runs as root on one machine and writes through the mount as root.
# A cluster keeps the default, root_squash (README, "Who may do what").
setsid "$BIN/ringfs-server" --export "$EXPORT" --listen 127.0.0.1:0 --ready-file "$READY" \
  --export-options no_root_squash \
  </dev/null >"$SERVER_LOG" 2>&1 &
echo $! > "$SERVER_PID"
for _ in $(seq 100); do
  [ -s "$READY" ] && break
  kill -0 "$(cat "$SERVER_PID")" 2>/dev/null || { cat "$SERVER_LOG" >&2; die "ringfs-server exited"; }
  sleep 0.1
done
[ -s "$READY" ] || { cat "$SERVER_LOG" >&2; stop_demo; die "ringfs-server did not start within 10 s"; }
ADDR="$(head -n1 "$READY")"

say "mounting $ADDR:/ on $MNT (log: $MOUNT_LOG)"
# Without -f, ringfs-mount returns only once the mount is ready (or fails with a message).
if ! "$BIN/ringfs-mount" "$ADDR:/" "$MNT" -o "transport=auto,stats_file=$STATS" \
    </dev/null >"$MOUNT_LOG" 2>&1; then
  cat "$MOUNT_LOG" >&2
  stop_demo
  die "mount failed"
fi

TRANSPORT=unknown
for _ in $(seq 30); do
  if [ -s "$STATS" ]; then
    TRANSPORT="$(sed -n 's/^transport=//p' "$STATS" | head -n1)"
    [ -n "$TRANSPORT" ] && break
  fi
  sleep 0.1
done
case "$TRANSPORT" in
  uring) TRANSPORT_TEXT="uring (FUSE-over-io_uring: requests arrive as ring completions)" ;;
  classic) TRANSPORT_TEXT="classic (/dev/fuse read/write; see $MOUNT_LOG for why the ring was not used)" ;;
  *) TRANSPORT_TEXT="$TRANSPORT (stats file $STATS not written yet)" ;;
esac

cat <<EOT

ringfs demo is running
  server      ringfs-server on $ADDR, exporting $EXPORT
  mounted on  $MNT   (try: cat $MNT/hello.txt; ls -l $MNT)
  transport   $TRANSPORT_TEXT
  live stats  $STATS
  unmount     umount $MNT          (the server keeps running)
  stop all    $ROOT/scripts/demo.sh --stop

EOT
cat "$MNT/hello.txt"
