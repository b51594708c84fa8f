# shellcheck shell=bash
# Job t of bench/run.sh (issue 13, items 4 and 5): real small-file workloads, in interleaved
# rounds. Sourced by run.sh after its helpers (record, bounded, quiet_wait, drop_caches, ...);
# not a script of its own.
#
# The source tree is the first SF_ENTRIES entries (directories, files, symlinks; sorted by name)
# of SMALLFILES_SRC (default /usr/include), packed once per run into a deterministic tarball
# (sorted, owner 0:0, one fixed mtime) and unpacked next to it: both live on a tmpfs under the
# work dir, so reading them costs no disk I/O and drop_caches does not evict them. A git
# repository of SF_GIT_FILES of its regular files in 5 commits (fixed dates, then git gc) is made
# there too. Steps, each on every target, bounded by SF_DEADLINE seconds:
#   tar        tar -xf of the tarball into the target
#   stat-cold  stat (lstat) of SF_STAT_FILES regular files of that tree after drop_caches
#              (which also drops the client kernel's FUSE dentries and inodes), via metabench
#   stat-warm  the same files again, right after
#   read       cat of those files (their data: after the drop_caches above, none is cached)
#   reread     the same again, right after (ringfs drops a file's cached pages at every open
#              unless mounted with kept_pages)
#   rm         rm -rf of the tree
#   rsync      rsync -a of the unpacked tree into the target
#   clone      git clone --no-hardlinks (local) of the repository into the target
# Interleaving: the steps come in three groups (tar+stat+rm on one tree, rsync, clone); for each
# group, round 1 runs it on every target (A B C ...), then round 2, ... so drift of the host moves
# all targets alike. What rsync and clone wrote is removed through the export (not measured).
# For ringfs targets the mount's Prometheus endpoint is scraped before and after each tar, so the
# report can give FUSE requests per extracted entry by opcode.

SMALLFILES_SRC="${SMALLFILES_SRC:-/usr/include}"
if [ "$QUICK" = 1 ]; then
  SF_ENTRIES="${SF_ENTRIES:-3000}"
  SF_STAT_FILES="${SF_STAT_FILES:-2000}"
  SF_GIT_FILES="${SF_GIT_FILES:-500}"
  SF_DEADLINE="${SF_DEADLINE:-60}"
else
  SF_ENTRIES="${SF_ENTRIES:-22000}"
  SF_STAT_FILES="${SF_STAT_FILES:-10000}"
  SF_GIT_FILES="${SF_GIT_FILES:-3000}"
  SF_DEADLINE="${SF_DEADLINE:-240}"
fi
SF_DIR="$WORK/sf"          # tmpfs: tarball, unpacked tree, git repository, lists
SF_TAR="$SF_DIR/src.tar"
SF_TREE="$SF_DIR/tree"
SF_REPO="$SF_DIR/repo"
SF_STAT_LIST="$SF_DIR/stat.list"
SF_NOTE=""                 # what the source was, for the report
SF_COUNT=0                 # entries in the tarball
SF_STATS=0                 # files in the stat list
SF_GITN=0                  # files in the repository
SF_DEST=""                 # where the step in progress writes (to read its error messages)

sf_prepare() {  # builds the tarball, tree, stat list and repository once per run
  command -v rsync >/dev/null || apt_install rsync || true
  command -v git >/dev/null || apt_install git || true
  mkdir -p "$SF_DIR"
  mount -t tmpfs -o size=3g,mode=755 ringfs-bench-sf "$SF_DIR" ||
    log "no tmpfs for the small-files source; using the work dir"
  local src parent base
  src="$(cd "$SMALLFILES_SRC" && pwd)" || die "no $SMALLFILES_SRC"
  parent="$(dirname "$src")"; base="$(basename "$src")"
  (cd "$parent" && find "$base" | LC_ALL=C sort | sed -n "1,${SF_ENTRIES}p") > "$SF_DIR/entries.list"
  SF_COUNT="$(wc -l < "$SF_DIR/entries.list")"
  tar -C "$parent" --no-recursion -T "$SF_DIR/entries.list" --owner=0 --group=0 --numeric-owner \
    --mtime='2024-01-01 00:00:00Z' --format=gnu -cf "$SF_TAR" || die "cannot pack $src"
  mkdir -p "$SF_TREE"
  tar -C "$SF_TREE" -xf "$SF_TAR" || die "cannot unpack $SF_TAR"
  local bytes
  bytes="$(du -sb "$SF_TREE" | cut -f1)"
  # Regular files, relative to the tree's top (which is also the top of every extracted copy).
  (cd "$SF_TREE" && find . -type f | LC_ALL=C sort | sed -n "1,${SF_STAT_FILES}p" | sed 's|^\./||') \
    > "$SF_STAT_LIST"
  SF_STATS="$(wc -l < "$SF_STAT_LIST")"

  if command -v git >/dev/null; then
    mkdir -p "$SF_REPO"
    (cd "$SF_TREE" && find . -type f -size -64k | LC_ALL=C sort | sed -n "1,${SF_GIT_FILES}p" |
       sed 's|^\./||') > "$SF_DIR/git.list"
    SF_GITN="$(wc -l < "$SF_DIR/git.list")"
    (
      set -e
      cd "$SF_REPO"
      export GIT_AUTHOR_NAME=bench GIT_AUTHOR_EMAIL=bench@localhost GIT_COMMITTER_NAME=bench \
        GIT_COMMITTER_EMAIL=bench@localhost GIT_CONFIG_NOSYSTEM=1 HOME="$SF_DIR"
      git init -q -b main .
      split -n l/5 -d "$SF_DIR/git.list" "$SF_DIR/git.part."
      local i=0 part
      for part in "$SF_DIR"/git.part.*; do
        i=$((i + 1))
        (cd "$SF_TREE" && tar --no-recursion -T "$part" -cf -) | tar -xf -
        git add -A .
        GIT_AUTHOR_DATE="2024-01-0${i}T00:00:00Z" GIT_COMMITTER_DATE="2024-01-0${i}T00:00:00Z" \
          git commit -q -m "part $i"
      done
      git gc -q
    ) > "$LOGS/smallfiles-git.log" 2>&1 || { log "cannot build the git repository (see logs/smallfiles-git.log)"; SF_GITN=0; }
  fi
  SF_NOTE="$SF_COUNT entries of $src ($(awk -v b="$bytes" 'BEGIN { printf "%.0f MiB", b / 1048576 }'), $(find "$SF_TREE" -type f | wc -l) files); stat over $SF_STATS files; git repository of $SF_GITN files in 5 commits"
  [ "$SF_COUNT" -lt 20000 ] && [ "$QUICK" != 1 ] && SF_NOTE="$SF_NOTE; fewer than 20,000 entries"
  log "small files: $SF_NOTE"
  # Reading these now keeps them in memory (tmpfs: nothing to read from disk anyway).
  cat "$SF_TAR" > /dev/null
}

sf_metrics_url() {  # the Prometheus URL of a ringfs target, or nothing
  local port="${METRICS_PORT[$1]:-}"
  [ -n "$port" ] && echo "http://127.0.0.1:$port/metrics"
}

sf_scrape() {  # sf_scrape TARGET FILE: the mount's /metrics into FILE (nothing without metrics)
  local url
  url="$(sf_metrics_url "$1")" || return 0
  [ -n "$url" ] || return 0
  curl -s --max-time 10 "$url" > "$2" 2>/dev/null || python3 -c 'import sys, urllib.request
sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' "$url" > "$2" 2>/dev/null ||
    rm -f "$2"
}

# tar exits 2 and rsync 23 on sshfs: SFTP's SETSTAT follows symlinks, so setting times (and, for
# tar, owner) of a symlink whose target is outside the tree fails (ENOENT) after the link itself
# was made. When every error in LOG is of that kind, for an entry that is a symlink in the source
# tree, sf_symlink_errors prints how many entries it was and succeeds.
sf_symlink_errors() {  # sf_symlink_errors LOG DEST_PREFIX
  local line name names=() n
  while IFS= read -r line; do
    case "$line" in
      "tar: Exiting with failure status due to previous errors") continue ;;
      "rsync error: some files/attrs were not transferred "*"(code 23)"*) continue ;;
      "tar: "*": Cannot utime: "*) name="${line#tar: }"; name="${name%%: Cannot utime: *}" ;;
      "tar: "*": Cannot change ownership to "*) name="${line#tar: }"; name="${name%%: Cannot change ownership to *}" ;;
      'rsync: [generator] failed to set times on "'*'": No such file or directory (2)')
        name="${line#rsync: \[generator\] failed to set times on \"}"
        name="${name%%\": No such file or directory (2)}"
        name="${name#"$2"/}" ;;
      *) return 1 ;;
    esac
    [ -L "$SF_TREE/$name" ] || return 1
    names+=("$name")
  done < "$1"
  n="$(printf '%s\n' "${names[@]}" | sort -u | grep -c .)" || return 1
  echo "$n"
}

# sf_step TARGET STEP ENTRIES CMD...: one measured step; writes sf/TARGET-STEP-rR.json in
# metabench's format (unless CMD is metabench, which writes it itself) and records it.
sf_step() {
  local target="$1" step="$2" entries="$3"; shift 3
  local json="sf/$target-$step-r$ROUND.json" c0 c1 t0 t1 rc=0 status=ok note=""
  mkdir -p "$OUT/sf"
  sync
  quiet_wait
  log "$target: small files $step (round $ROUND)"
  t0="$(now)"; c0="$(cpu_sample)"
  if [ "$1" = "$METABENCH" ]; then
    bounded $((SF_DEADLINE + 30)) "$@" > "$OUT/$json" 2> "$LOGS/sf-$target-$step-r$ROUND.log" || rc=$?
  else
    bounded "$SF_DEADLINE" "$@" > "$LOGS/sf-$target-$step-r$ROUND.log" 2>&1 || rc=$?
  fi
  c1="$(cpu_sample)"; t1="$(now)"
  local linknote="" nlinks
  if { { [ "$step" = tar ] && [ "$rc" = 2 ]; } || { [ "$step" = rsync ] && [ "$rc" = 23 ]; }; } &&
     nlinks="$(sf_symlink_errors "$LOGS/sf-$target-$step-r$ROUND.log" "$SF_DEST")"; then
    local what=times
    [ "$step" = tar ] && what="times and owner"
    linknote="$step exit $rc accepted: $what of $nlinks symlinks pointing outside the tree could not be set (the filesystem follows symlinks on SETATTR); everything else copied"
    rc=0
  fi
  if [ "$1" != "$METABENCH" ]; then
    "$PY" -c 'import json, sys
n, t0, t1, rc = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
s = t1 - t0
ok = rc == 0
print(json.dumps({"phase": sys.argv[5], "requested": n, "done": n if ok else 0, "seconds": s,
                  "ops_per_s": n / s if ok and s > 0 else 0.0, "errno": 0 if ok else rc,
                  "error": "" if ok else f"exit {rc}", "deadline_hit": rc in (124, 137)}))' \
      "$entries" "$t0" "$t1" "$rc" "$step" > "$OUT/$json"
  fi
  if [ "$rc" = 124 ] || [ "$rc" = 137 ] || grep -q '"deadline_hit": true' "$OUT/$json" 2>/dev/null; then
    status=failed
    note="deadline of ${SF_DEADLINE}s hit: not finished"
    SF_SLOW["$target"]="round $ROUND: $step hit the deadline of ${SF_DEADLINE}s"
    [ "$1" = "$METABENCH" ] && [ "$rc" = 0 ] && { status=partial; note="deadline of ${SF_DEADLINE}s hit: partial"; }
  elif [ "$rc" != 0 ]; then
    status=failed
    note="exit $rc: $(tail -n 3 "$LOGS/sf-$target-$step-r$ROUND.log" 2>/dev/null | tr '\n' ' ' | cut -c1-200)"
  fi
  [ -z "$note" ] && note="$linknote"
  [ -n "$note" ] && log "$target: $step: $note"
  record "$target" "t-$step" "$entries" sf "$json" "$status" "$t0" "$t1" "$c0" "$c1" "$note"
  return "$rc"
}

sf_skip() {  # sf_skip TARGET STEP WHY
  record "$1" "t-$2" "" sf "" skipped 0 0 "0 0" "0 0" "$3"
}

# One round of one group on one target. Names carry target and round, so no client cache of one
# round can answer for the next.
sf_tree_group() {  # tar, stat-cold, stat-warm, rm on TARGET DIR
  local target="$1" dir="$2" sub="sf-$1-r$ROUND-tar" met="$OUT/sf/$1-tar-r$ROUND.metrics"
  rm -rf --one-file-system "${EXPORT:?}/$sub"
  mkdir "$EXPORT/$sub"
  mkdir -p "$OUT/sf"
  sf_scrape "$target" "$met.before"
  SF_DEST="$dir/$sub"
  if sf_step "$target" tar "$SF_COUNT" tar -C "$dir/$sub" -xf "$SF_TAR"; then
    sf_scrape "$target" "$met.after"
    drop_caches
    sf_step "$target" stat-cold "$SF_STATS" "$METABENCH" stat "$dir/$sub" "$SF_STATS" "$SF_DEADLINE" "$SF_STAT_LIST" || true
    sf_step "$target" stat-warm "$SF_STATS" "$METABENCH" stat "$dir/$sub" "$SF_STATS" "$SF_DEADLINE" "$SF_STAT_LIST" || true
    local pass
    for pass in read reread; do
      sf_step "$target" "$pass" "$SF_STATS" bash -c 'cd "$1" && xargs -d "\n" cat < "$2" > /dev/null' \
        sf-read "$dir/$sub" "$SF_STAT_LIST" || true
    done
    sf_step "$target" rm "$SF_COUNT" rm -rf "${dir:?}/$sub" || true
  else
    rm -f "$met.before"
    for s in stat-cold stat-warm read reread rm; do sf_skip "$target" "$s" "not run: tar failed in round $ROUND"; done
  fi
  rm -rf --one-file-system "${EXPORT:?}/$sub"
}

sf_rsync_group() {
  local target="$1" dir="$2" sub="sf-$1-r$ROUND-rsync"
  if ! command -v rsync >/dev/null; then sf_skip "$target" rsync "rsync is not installed"; return; fi
  rm -rf --one-file-system "${EXPORT:?}/$sub"
  SF_DEST="$dir/$sub"
  sf_step "$target" rsync "$SF_COUNT" rsync -a "$SF_TREE/" "$dir/$sub/" || true
  rm -rf --one-file-system "${EXPORT:?}/$sub"
}

sf_clone_group() {
  local target="$1" dir="$2" sub="sf-$1-r$ROUND-clone"
  if [ "$SF_GITN" = 0 ]; then sf_skip "$target" clone "no git repository (git missing or failed)"; return; fi
  rm -rf --one-file-system "${EXPORT:?}/$sub"
  sf_step "$target" clone "$SF_GITN" env GIT_CONFIG_NOSYSTEM=1 HOME="$SF_DIR" \
    git clone -q --no-hardlinks "$SF_REPO" "$dir/$sub" || true
  rm -rf --one-file-system "${EXPORT:?}/$sub"
}

declare -A SF_SLOW=()  # target -> why its later rounds are skipped (a step hit the deadline)

run_smallfiles() {  # run_smallfiles TARGET...: every group, round-major, over the given targets
  local group target r
  sf_prepare
  for group in tree rsync clone; do
    for r in $(seq 1 "$T_ROUNDS"); do
      ROUND="$r"
      for target in "$@"; do
        if [ -n "${SF_SLOW[$target]:-}" ]; then
          case "$group" in
            tree) for s in tar stat-cold stat-warm read reread rm; do sf_skip "$target" "$s" "skipped: ${SF_SLOW[$target]}"; done ;;
            *) sf_skip "$target" "$group" "skipped: ${SF_SLOW[$target]}" ;;
          esac
          continue
        fi
        "sf_${group}_group" "$target" "${MNT[$target]}"
      done
    done
    # A deadline on one group says nothing certain about the next: give every target a new chance.
    SF_SLOW=()
  done
  ROUND=1
}
