#!/usr/bin/env bash
# A ringfs cluster on one machine: N server and M client network namespaces joined by veth pairs
# to a bridge in a hub namespace (10.77.0.0/24; nothing is addressed outside the namespaces).
# Each server exports a directory of its own; each client mounts every server. Clients' mounts
# live in this machine's mount namespace (only their network is the client's), so a test or an
# operator reads and writes them from here: DIR/cK/sJ is client K's mount of server J.
#
# usage: deploy/local-cluster.sh up   [--servers N] [--clients M] [--dir DIR] [--name NAME]
#        deploy/local-cluster.sh down [--dir DIR]
#        deploy/local-cluster.sh cut|heal NODE [--dir DIR]     (NODE: s1, c2, ...)
#   --dir   state and data (default /tmp/ringfs-cluster): exports, mounts, logs, pids
#   --name  prefix of the namespaces (default ringfs-lc); two clusters need two names
#   RINGFS_BIN=dir   ringfs-server and ringfs-mount from dir (default: build/bin, else PATH)
#   MOUNT_OPTS=...   extra -o options of every mount (e.g. timeout=3 for partition tests)
# cut/heal take a node's link down/up (a partition) without touching its processes.
# Run as root. `down` removes everything `up` made, also after a failed `up`.
set -euo pipefail

cmd="${1:-}"
shift || true
servers=2 clients=2 dir=/tmp/ringfs-cluster name=ringfs-lc node=""
while [ $# -gt 0 ]; do
  case "$1" in
    --servers) servers="$2"; shift ;;
    --clients) clients="$2"; shift ;;
    --dir) dir="$2"; shift ;;
    --name) name="$2"; shift ;;
    s[0-9]*|c[0-9]*) node="$1" ;;
    *) echo "local-cluster: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done

die() { echo "local-cluster: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "run as root (namespaces, mounts)"
# The name goes into namespace names and cluster.env, which `down` sources.
[[ "$name" =~ ^[a-z0-9][a-z0-9-]{0,15}$ ]] || die "--name: lower-case letters, digits, '-' (16 at most)"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="${RINGFS_BIN:-}"
if [ -z "$bin" ]; then
  if [ -x "$here/build/bin/ringfs-mount" ]; then bin="$here/build/bin"; else bin="$(dirname "$(command -v ringfs-mount || echo /usr/sbin/ringfs-mount)")"; fi
fi
port=7070

address_of() {  # s1 -> 10.77.0.1, c1 -> 10.77.0.101
  case "$1" in
    s*) echo "10.77.0.${1#s}" ;;
    c*) echo "10.77.0.$((100 + ${1#c}))" ;;
  esac
}

wait_for() {  # wait_for SECONDS COMMAND...
  local deadline=$((SECONDS + $1)); shift
  until "$@"; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.1
  done
}

up() {
  [ "$servers" -ge 1 ] && [ "$servers" -le 50 ] || die "--servers 1..50"
  [ "$clients" -ge 1 ] && [ "$clients" -le 50 ] || die "--clients 1..50"
  [ ! -e "$dir/cluster.env" ] || die "$dir holds a cluster already (down first)"
  # Namespaces are machine-wide: another cluster's of the same name are not ours to take (or to
  # delete in the `down` after a failed `up`).
  if ip netns list | awk '{print $1}' | grep -qE "^$name-(hub|s[0-9]+|c[0-9]+)$"; then
    die "namespaces $name-* exist already (another cluster? --name picks other names)"
  fi
  mkdir -p "$dir"
  # What `down` needs, written first so that a failed `up` can be undone.
  printf 'name=%s\nservers=%s\nclients=%s\n' "$name" "$servers" "$clients" > "$dir/cluster.env"
  local hub="$name-hub"
  ip netns add "$hub"
  ip -n "$hub" link add br0 type bridge
  ip -n "$hub" link set br0 up
  ip -n "$hub" link set lo up
  local nodes=()
  for i in $(seq 1 "$servers"); do nodes+=("s$i"); done
  for i in $(seq 1 "$clients"); do nodes+=("c$i"); done
  for n in "${nodes[@]}"; do
    ip netns add "$name-$n"
    # Created in the hub, one end moved into the node: no interface ever sits in this namespace.
    ip -n "$hub" link add "v-$n" type veth peer name eth0 netns "$name-$n"
    ip -n "$hub" link set "v-$n" master br0 up
    ip -n "$name-$n" addr add "$(address_of "$n")/24" dev eth0
    ip -n "$name-$n" link set eth0 up
    ip -n "$name-$n" link set lo up
  done
  for i in $(seq 1 "$servers"); do
    local d="$dir/s$i"
    mkdir -p "$d/export"
    chmod 1777 "$d/export"
    rm -f "$d/ready"
    nsenter --net="/run/netns/$name-s$i" "$bin/ringfs-server" --export "$d/export" \
      --listen "$(address_of "s$i"):$port" --ready-file "$d/ready" > "$d/server.log" 2>&1 &
    echo $! > "$d/server.pid"
  done
  for i in $(seq 1 "$servers"); do
    wait_for 10 test -s "$dir/s$i/ready" || die "server s$i did not start: $(tail -3 "$dir/s$i/server.log")"
  done
  for c in $(seq 1 "$clients"); do
    for s in $(seq 1 "$servers"); do
      local mnt="$dir/c$c/s$s"
      mkdir -p "$mnt"
      # Only the network namespace is the client's: the mount is made in this mount namespace.
      nsenter --net="/run/netns/$name-c$c" "$bin/ringfs-mount" "$(address_of "s$s"):$port:/" "$mnt" \
        -o "control=none,client_name=c$c${MOUNT_OPTS:+,$MOUNT_OPTS}" > "$dir/c$c/mount-s$s.log" 2>&1 ||
        die "c$c cannot mount s$s: $(tail -3 "$dir/c$c/mount-s$s.log")"
    done
  done
  echo "local-cluster: $servers server(s), $clients client(s) up in $dir (namespaces $name-*)"
  for c in $(seq 1 "$clients"); do
    for s in $(seq 1 "$servers"); do echo "  $dir/c$c/s$s: client c$c's mount of s$s"; done
  done
}

down() {
  [ -e "$dir/cluster.env" ] || { echo "local-cluster: nothing in $dir"; return 0; }
  # shellcheck disable=SC1091
  . "$dir/cluster.env"
  local status=0
  for c in $(seq 1 "$clients"); do
    for s in $(seq 1 "$servers"); do
      local mnt="$dir/c$c/s$s"
      # From mountinfo, not by a stat of the path: a mount whose server is cut off or whose
      # daemon died answers a stat only after the request timeout, or never.
      if awk -v m="$mnt" '$5 == m { found = 1 } END { exit !found }' /proc/self/mountinfo; then
        umount -l "$mnt" || status=1
      fi
    done
  done
  # The mounts' daemons end with their unmount; servers are stopped by pid.
  for i in $(seq 1 "$servers"); do
    local pidfile="$dir/s$i/server.pid"
    [ -e "$pidfile" ] || continue
    local pid; pid="$(cat "$pidfile")"
    if kill "$pid" 2>/dev/null; then
      wait_for 10 bash -c "! kill -0 $pid 2>/dev/null" || kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$pidfile"
  done
  # ([r]: the pattern must not match the command line of the shell that runs pgrep.)
  wait_for 10 bash -c "! pgrep -f -- '[r]ingfs-mount .* $dir/c' >/dev/null" ||
    { pkill -KILL -f -- "[r]ingfs-mount .* $dir/c" || true; status=1; }
  # Deleting a namespace deletes its end of each veth, and with it the peer.
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^$name-(hub|s[0-9]+|c[0-9]+)$" || true); do
    ip netns delete "$ns" || status=1
  done
  rm -f "$dir/cluster.env"
  echo "local-cluster: down ($dir kept: exports and logs)"
  return $status
}

link() {  # link up|down NODE
  [ -n "$node" ] || die "which node? (s1, c2, ...)"
  [ -e "$dir/cluster.env" ] || die "no cluster in $dir"
  # shellcheck disable=SC1091
  . "$dir/cluster.env"
  ip -n "$name-hub" link set "v-$node" "$1"
}

case "$cmd" in
  up) up ;;
  down) down ;;
  cut) link down ;;
  heal) link up ;;
  *) sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
