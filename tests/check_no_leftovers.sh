#!/usr/bin/env bash
# ctest cleanup step for the integration tests of ONE build tree.
# usage: check_no_leftovers.sh PREFIX     (e.g. /tmp/ringfs-it-0123abcd.)
# Fails if a mount, daemon or control socket of that build's tests survived (their temp trees all start with
# PREFIX), after removing it so that the machine is clean either way. Nothing else is touched.
set -uo pipefail
prefix="${1:?usage: check_no_leftovers.sh PREFIX}"
case "$prefix" in
  /tmp/ringfs-it-*) ;;
  *) echo "check_no_leftovers: refusing unexpected prefix '$prefix'" >&2; exit 2 ;;
esac

leftovers=0
while read -r mp; do
  [ -n "$mp" ] || continue
  echo "leftover mount: $mp" >&2
  leftovers=1
  umount -l "$mp" 2>/dev/null || fusermount3 -uz "$mp" 2>/dev/null || true
done < <(awk -v p="$prefix" 'index($5, p) == 1 { print $5 }' /proc/self/mountinfo)

for cmdline in /proc/[0-9]*/cmdline; do
  pid="${cmdline#/proc/}"
  pid="${pid%/cmdline}"
  [ "$pid" = "$$" ] && continue
  args="$(tr '\0' ' ' < "$cmdline" 2>/dev/null)" || continue
  case "$args" in
    *" $prefix"*)
      echo "leftover process $pid: $args" >&2
      leftovers=1
      kill -KILL "$pid" 2>/dev/null || true
      ;;
  esac
done

for dir in "$prefix"*; do
  [ -d "$dir" ] || continue
  echo "leftover temp tree: $dir" >&2
  awk -v p="$dir/" 'index($5, p) == 1 { found = 1 } END { exit !found }' /proc/self/mountinfo ||
    rm -rf --one-file-system "$dir"
done

# Default control sockets of mounts under PREFIX: /run/ringfs/<systemd-escaped mountpoint>.sock.
escaped="$(printf '%s' "${prefix#/}" | sed 's/-/\\x2d/g; s|/|-|g')"
for sock in /run/ringfs/"$escaped"*; do
  [ -S "$sock" ] || continue
  echo "leftover control socket: $sock" >&2
  leftovers=1
  rm -f "$sock"
done

if [ "$leftovers" -ne 0 ]; then
  echo "FAILED: integration tests left mounts, processes or sockets behind (cleaned up now)" >&2
  exit 1
fi
echo "no leftover ringfs test mounts or processes under ${prefix}*"
