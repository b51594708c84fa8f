#!/usr/bin/env python3
"""Turns one bench/run.sh output directory into results.json, results.md and plots.

usage: bench/report.py OUT_DIR

Reads OUT_DIR/machine.json, OUT_DIR/runs.jsonl (one line per measured run, written by run.sh)
and the fio / metabench JSON files those lines name. Only the standard library is required;
plots need python3-matplotlib and are left out (with a note) without it.
"""
import json
import math
import os
import re
import statistics
import sys

TARGETS = ["native", "ringfs-uring", "ringfs-uring-base", "ringfs-classic", "ringfs-uring-floor",
           "ringfs-uring-tls", "sshfs"]
URING, CLASSIC, FLOOR, SSHFS, NATIVE = (
    "ringfs-uring", "ringfs-classic", "ringfs-uring-floor", "sshfs", "native")
BASE = "ringfs-uring-base"  # the mount of RINGFS_BASE_BIN: A/B of a frontend change

# (row id, description, unit). Rows g-* are the metadata job at g_count files.
ROWS = [
    ("a", "4k randread QD1 psync", "IOPS"),
    ("b", "4k randread QD16 io_uring", "IOPS"),
    ("c", "4k randread QD1 psync, 2 jobs", "IOPS"),
    ("d", "1M seq read QD8 io_uring", "MB/s"),
    ("e", "1M seq write QD8 io_uring", "MB/s"),
    ("f", "4k randwrite QD16 io_uring", "IOPS"),
    ("g-create", "create", "ops/s"),
    ("g-stat", "stat (cold caches)", "ops/s"),
    ("g-unlink", "unlink", "ops/s"),
    ("t-tar", "tar -xf", "entries/s"),
    ("t-stat-cold", "stat, cold caches", "files/s"),
    ("t-stat-warm", "stat, warm", "files/s"),
    ("t-read", "read the stat'ed files, cold caches", "files/s"),
    ("t-reread", "read them again", "files/s"),
    ("t-rm", "rm -rf", "entries/s"),
    ("t-rsync", "rsync -a", "entries/s"),
    ("t-clone", "git clone --no-hardlinks", "files/s"),
]
SF_ROWS = [row for row, _, _ in ROWS if row.startswith("t-")]

# Short two-line labels for the bar chart.
PLOT_LABELS = {
    "a": "4k rand read\nQD1 psync", "b": "4k rand read\nQD16 uring", "c": "4k rand read\nQD1 ×2",
    "d": "1M seq read\nQD8", "e": "1M seq write\nQD8", "f": "4k rand write\nQD16",
    "g-create": "create", "g-stat": "stat\n(cold)", "g-unlink": "unlink",
    "t-tar": "tar -x", "t-stat-cold": "stat tree\n(cold)", "t-stat-warm": "stat tree\n(warm)",
    "t-read": "read files\n(cold)", "t-reread": "read files\nagain",
    "t-rm": "rm -rf", "t-rsync": "rsync -a", "t-clone": "git clone",
}

# Busy cores, measured just before a run, above which the host counts as shared.
BUSY_HOST = 0.25

# Targets of issue 5: (row, reference target, minimum ratio of ringfs-uring to it).
GOALS = [
    ("a", SSHFS, 5.0), ("a", CLASSIC, 1.5), ("c", SSHFS, 4.0),
    ("b", SSHFS, 3.0), ("b", CLASSIC, 1.0),
    ("d", SSHFS, 3.0), ("e", SSHFS, 3.0), ("f", SSHFS, 20.0),
    ("g-create", SSHFS, 5.0), ("g-stat", SSHFS, 1.5), ("g-unlink", SSHFS, 4.0),
]


def load_json(path):
    """Loads a JSON file, skipping any text fio prints before the object."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    start = text.find("{")
    if start < 0:
        raise ValueError(f"no JSON in {path}")
    return json.JSONDecoder().raw_decode(text[start:])[0]


def fio_figures(doc, job):
    """(value, unit-scaled) figures of one fio run: value, ops, mean/p99 completion latency."""
    j = doc["jobs"][0]
    direction = "write" if j["write"]["total_ios"] > 0 else "read"
    d = j[direction]
    ops = d["total_ios"]
    if job in ("d", "e"):
        value = d["bw_bytes"] / 1e6
    else:
        value = d["iops"]
    clat = d.get("clat_ns", {})
    pct = clat.get("percentile", {})
    p99 = pct.get("99.000000")
    return {
        "value": value, "ops": ops,
        "lat_mean_us": clat.get("mean", 0) / 1000.0,
        "lat_p99_us": p99 / 1000.0 if p99 else None,
        "runtime_ms": d.get("runtime"),
    }


def load_runs(out):
    runs = []
    with open(os.path.join(out, "runs.jsonl"), encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line:
                runs.append(json.loads(line))
    for r in runs:
        r["value"] = None
        r["ops"] = None
        # A metadata phase that stopped on an error (say EMFILE) still measured a rate over
        # the files it got through: keep it, marked partial.
        salvage = (r["kind"] in ("meta", "sf") and r["status"] in ("failed", "partial")
                   and r.get("file"))
        r.setdefault("round", 1)
        if (r["status"] != "ok" and not salvage) or r["kind"] not in ("fio", "meta", "sf"):
            continue
        path = os.path.join(out, r["file"])
        try:
            doc = load_json(path)
        except (OSError, ValueError) as e:
            r["status"] = "failed"
            r["note"] = (r.get("note") or "") + f" unreadable result: {e}"
            continue
        if r["kind"] == "fio":
            try:
                r.update(fio_figures(doc, r["job"]))
            except (KeyError, IndexError) as e:
                r["status"] = "failed"
                r["note"] = (r.get("note") or "") + f" bad fio JSON: {e}"
                continue
        else:
            r["value"] = doc["ops_per_s"]
            r["ops"] = doc["done"]
            r["requested"] = doc["requested"]
            r["seconds"] = doc["seconds"]
            if doc.get("error"):
                stopped = f"stopped after {doc['done']:,} of {doc['requested']:,}: {doc['error']}"
                r["note"] = (f"{r['note']} ({stopped})" if r["kind"] == "sf" and r.get("note")
                             else stopped)
            if salvage:
                if not doc["done"]:
                    continue
                r["status"] = "partial"
        if r["wall_s"] > 0 and r["hz"] > 0:
            busy_s = r["busy_jiffies"] / r["hz"]
            r["busy_cores"] = busy_s / r["wall_s"]
            r["cpu_us_per_op"] = busy_s * 1e6 / r["ops"] if r["ops"] else None
    return runs


def fmt(v, digits=None):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    if digits is not None:
        return f"{v:,.{digits}f}"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:,.1f}"
    return f"{v:,.2f}"


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


def fmt_ratio(r):
    return "—" if r is None else f"{r:.2f}×"


def median(xs):
    return statistics.median(xs) if xs else None


def aggregate(runs):
    """One run of a (job, target) standing for all its rounds: the median of the rounds that
    succeeded (value, CPU figures, wall time), with the per-round values kept in "values"."""
    oks = [r for r in runs if r["status"] == "ok" and r.get("value") is not None]
    if not oks:
        return runs[-1]
    agg = dict(oks[0])
    agg["values"] = {r["round"]: r["value"] for r in oks}
    agg["value"] = median([r["value"] for r in oks])
    agg["min"] = min(r["value"] for r in oks)
    agg["max"] = max(r["value"] for r in oks)
    agg["rounds_ok"] = len(oks)
    agg["rounds_run"] = len(runs)
    for k in ("busy_cores", "cpu_us_per_op", "wall_s", "seconds"):
        xs = [r[k] for r in oks if r.get(k) is not None]
        agg[k] = median(xs)
    agg["wall_values"] = {r["round"]: r.get("seconds", r["wall_s"]) for r in oks}
    agg["bg_cores"] = max(r.get("bg_cores", 0) for r in oks)
    return agg


def round_ratios(a, b):
    """Per-round ratios a ÷ b of two aggregated runs (rounds both measured): list."""
    if not a or not b or "values" not in a or "values" not in b:
        return []
    return [a["values"][k] / b["values"][k] for k in sorted(a["values"])
            if k in b["values"] and b["values"][k]]


def ratio_stats(a, b):
    """(median, min, max, n) of the per-round ratios a ÷ b, or None."""
    rs = round_ratios(a, b)
    if not rs:
        return None
    return (median(rs), min(rs), max(rs), len(rs))


def ratio_flags(st):
    """Why a ratio's median is not to be trusted: straddles 1, or spread wider than the effect."""
    if st is None or st[3] < 2:
        return ""
    med, lo, hi, _ = st
    flags = []
    if lo < 1.0 < hi:
        flags.append("straddles 1")
    if hi - lo > abs(med - 1.0):
        flags.append("spread > effect")
    return ", ".join(flags)


def fmt_ratio_stats(st):
    if st is None:
        return "—"
    med, lo, hi, n = st
    if n < 2:
        return f"{med:.2f}×"
    return f"{med:.2f}× ({lo:.2f}–{hi:.2f})"


METRIC_LINE = re.compile(r'^(ringfs_frontend_[a-z_]+)(?:\{([^}]*)\})?\s+(\S+)')


def read_metrics(path):
    """{op: count} of ringfs_frontend_requests_total summed over queues and classes, plus
    "(received)" and "(local answers)" totals, from one Prometheus scrape."""
    got = {}
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = METRIC_LINE.match(line)
            if not m:
                continue
            name, labels, val = m.groups()
            try:
                v = float(val)
            except ValueError:
                continue
            if name == "ringfs_frontend_requests_total":
                op = re.search(r'op="([^"]*)"', labels or "")
                key = op.group(1) if op else "?"
            elif name == "ringfs_frontend_requests_received_total":
                key = "(received by the daemon)"
            elif name == "ringfs_frontend_local_answers_total":
                key = "(answered locally)"
            else:
                continue
            got[key] = got.get(key, 0.0) + v
    return got


def requests_per_entry(out, runs):
    """target -> {op: median over rounds of requests per extracted entry} for job t's tar."""
    per = {}
    for r in runs:
        if r["job"] != "t-tar" or r["status"] != "ok":
            continue
        base = os.path.join(out, "sf", f"{r['target']}-tar-r{r['round']}.metrics")
        if not (os.path.exists(base + ".before") and os.path.exists(base + ".after")):
            continue
        try:
            before, after = read_metrics(base + ".before"), read_metrics(base + ".after")
        except OSError:
            continue
        entries = int(r["param"] or 0)
        if not entries:
            continue
        for op in after:
            d = after[op] - before.get(op, 0.0)
            per.setdefault(r["target"], {}).setdefault(op, []).append(d / entries)
    return {t: {op: median(v) for op, v in ops.items()} for t, ops in per.items()}


def build(out):
    machine = load_json(os.path.join(out, "machine.json"))
    runs = load_runs(out)
    g_count = str(machine.get("g_count", 10000))
    targets = [t for t in TARGETS if t in machine.get("targets", ",".join(TARGETS)).split(",")]

    # Runs by (row, target), then one aggregated run per pair: summary[row][target] = run
    summary = {row: {} for row, _, _ in ROWS}
    scaling = {}   # target -> {qd: run}
    meta = {}      # target -> phase -> {n: run}
    notes = []
    for r in runs:
        t = r["target"]
        if r["kind"] == "fio":
            if r["job"] == "s":
                scaling.setdefault(t, {}).setdefault(int(r["param"]), []).append(r)
            else:
                summary[r["job"]].setdefault(t, []).append(r)
        elif r["kind"] == "meta":
            phase = r["job"].split("-", 1)[1]
            meta.setdefault(t, {}).setdefault(phase, {}).setdefault(int(r["param"]), []).append(r)
            if r["param"] == g_count:
                summary["g-" + phase].setdefault(t, []).append(r)
        elif r["kind"] == "sf" and r["job"] in summary:
            summary[r["job"]].setdefault(t, []).append(r)
        if r.get("note") and r["kind"] != "info":
            label = f"{r['job']} {r['param']}".strip()
            if r.get("round", 1) > 1:
                label += f" round {r['round']}"
            notes.append(f"{t} {label}: {r['status']}: {r['note'].strip()}")
        elif r["kind"] == "info" and r.get("note"):
            notes.append(f"{t}: {r['note'].strip()}")
    seen = set()
    notes = [n for n in notes if not (n in seen or seen.add(n))]
    summary = {row: {t: aggregate(v) for t, v in ts.items()} for row, ts in summary.items()}
    scaling = {t: {qd: aggregate(v) for qd, v in qs.items()} for t, qs in scaling.items()}
    meta = {t: {ph: {n: aggregate(v) for n, v in ns.items()} for ph, ns in p.items()}
            for t, p in meta.items()}
    rpe = requests_per_entry(out, runs)

    def value(row, target):
        r = summary[row].get(target)
        return r["value"] if r and r["status"] == "ok" else None

    goals = []
    def rstat(row, a, b):
        ra, rb = summary[row].get(a), summary[row].get(b)
        if not ra or not rb or ra["status"] != "ok" or rb["status"] != "ok":
            return None
        return ratio_stats(ra, rb)

    for row, ref, need in GOALS:
        st = rstat(row, URING, ref)
        got = st[0] if st else None
        goals.append({"row": row, "vs": ref, "need": need, "ratio": got,
                      "met": None if got is None else got >= need})
    cpu_goals = []
    for row, _, _ in ROWS:
        if row.startswith("t-"):
            continue  # issue 5's CPU goal is about jobs a-g
        u = summary[row].get(URING)
        s = summary[row].get(SSHFS)
        cu = u.get("cpu_us_per_op") if u and u["status"] == "ok" else None
        cs = s.get("cpu_us_per_op") if s and s["status"] == "ok" else None
        cpu_goals.append({"row": row, "uring_cpu_us": cu, "sshfs_cpu_us": cs,
                          "met": None if cu is None or cs is None else cu < cs})

    result = {
        "machine": machine, "targets": targets, "runs": runs,
        "table": {row: {t: summary[row][t].get("value") for t in summary[row]} for row in summary},
        "goals": goals, "cpu_goals": cpu_goals,
        "scaling": {t: {qd: r.get("value") for qd, r in v.items()} for t, v in scaling.items()},
        "meta_scaling": {t: {ph: {n: r.get("value") for n, r in v.items()} for ph, v in p.items()}
                         for t, p in meta.items()},
        "notes": notes,
        "rounds": {row: {t: {"median": r.get("value"), "min": r.get("min"), "max": r.get("max"),
                             "per_round": r.get("values"), "wall_s_per_round": r.get("wall_values")}
                         for t, r in ts.items() if r.get("values")}
                   for row, ts in summary.items() if ts},
        "ratios": {row: {f"{a} / {b}": ratio_stats(summary[row].get(a), summary[row].get(b))
                         for a, b in RATIO_PAIRS if a in summary[row] and b in summary[row]}
                   for row in summary if summary[row]},
        "requests_per_entry_tar": rpe,
    }
    with open(os.path.join(out, "results.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1, default=str)

    plot_note = make_plots(out, machine, targets, summary, scaling, meta, value)
    md = render_md(machine, targets, summary, scaling, meta, goals, cpu_goals, notes, value,
                   g_count, plot_note, rstat, rpe)
    with open(os.path.join(out, "results.md"), "w", encoding="utf-8") as f:
        f.write(md)
    return md


RATIO_PAIRS = [(URING, NATIVE), (CLASSIC, NATIVE), (SSHFS, NATIVE), (URING, CLASSIC),
               (URING, SSHFS), (URING, BASE)]


def row_label(row, desc, g_count):
    if row.startswith("g-"):
        return f"g {desc} ({int(g_count):,} files)"
    return f"{row} {desc}"


def render_md(machine, targets, summary, scaling, meta, goals, cpu_goals, notes, value, g_count,
              plot_note, rstat, rpe):
    L = []
    L.append("# ringfs benchmark results")
    L.append("")
    dirty = " (work tree has uncommitted changes)" if machine.get("worktree_dirty") else ""
    L.append(f"- date: {machine['date']}")
    L.append(f"- commit: `{machine['commit']}`{dirty}")
    L.append(f"- machine: Linux {machine['kernel']}, {machine['cpus']} × {machine['cpu_model']}, "
             f"{machine['mem_gib']} GiB")
    L.append(f"- {machine['fio']}; {machine.get('sshfs') or 'sshfs not used'}")
    if machine.get("export_fs"):
        L.append(f"- export: {machine['export_fs']}")
    mode = "quick" if machine.get("quick") else "full"
    L.append(f"- mode: {mode}; fio jobs {machine['runtime_s']} s each, scaling points "
             f"{machine['scale_runtime_s']} s each, direct=1, {machine['file_mib']} MiB file "
             f"warm in the server's page cache; jobs `{machine['jobs']}`")
    L.append("- everything on loopback (127.0.0.1); host CPU from /proc/stat covers the whole "
             "host (fio, FUSE daemons, servers, sshd)")
    fr, tr = machine.get("fio_rounds", 1), machine.get("t_rounds", 1)
    jobs = machine["jobs"].split(",")
    parts = []
    if fr > 1 and any(j != "t" for j in jobs):
        parts.append(f"{fr} for fio and metadata jobs")
    if tr > 1 and "t" in jobs:
        parts.append(f"{tr} for small files (job t)")
    if parts:
        L.append(f"- rounds: {', '.join(parts)}; all targets mounted at once and measured in turn "
                 "in each round (A B C A B C …); figures are medians over rounds, ratios medians "
                 "of per-round ratios")
    if machine.get("smallfiles"):
        L.append(f"- small files (job t): {machine['smallfiles']}")
    L.append("")

    L.append("## Absolute figures")
    L.append("")
    L.append("| job | unit | " + " | ".join(targets) + " |")
    L.append("|---|---|" + "---:|" * len(targets))
    noisy = []
    for row, desc, unit in ROWS:
        if not summary[row]:
            continue
        cells = []
        for t in targets:
            r = summary[row].get(t)
            mark = ""
            if r and r["status"] == "ok" and r.get("bg_cores", 0) >= BUSY_HOST:
                mark = "†"
                noisy.append(f"{t} {row} ({r['bg_cores']:.2f} cores)")
            cells.append(fmt(value(row, t)) + mark)
        L.append(f"| {row_label(row, desc, g_count)} | {unit} | " + " | ".join(cells) + " |")
    L.append("")
    if noisy:
        L.append(f"† the host was busy with other work (≥ {BUSY_HOST} cores) in the second "
                 "before this run, even after waiting for it to settle: " + ", ".join(noisy))
        L.append("")

    L.append("## Ratios")
    L.append("")
    L.append("ringfs-uring ÷ sshfs and ÷ ringfs-classic are what issue 5 sets goals for; "
             "uring ÷ floor says how much of the transport floor (no storage) is reached.")
    L.append("")
    cols = [(URING, SSHFS), (URING, CLASSIC), (CLASSIC, SSHFS), (FLOOR, SSHFS), (URING, FLOOR),
            (URING, NATIVE), (CLASSIC, NATIVE), (SSHFS, NATIVE), (URING, BASE), (BASE, CLASSIC)]
    cols = [(a, b) for a, b in cols if a in targets and b in targets]
    short = {URING: "uring", CLASSIC: "classic", FLOOR: "floor", SSHFS: "sshfs",
             NATIVE: "native", BASE: "base"}
    L.append("| job | " + " | ".join(f"{short[a]} ÷ {short[b]}" for a, b in cols) + " |")
    L.append("|---|" + "---:|" * len(cols))
    for row, desc, _ in ROWS:
        if not summary[row]:
            continue
        cells = [fmt_ratio_stats(rstat(row, a, b)) for a, b in cols]
        L.append(f"| {row_label(row, desc, g_count)} | " + " | ".join(cells) + " |")
    L.append("")

    shown_goals = [g for g in goals if summary[g["row"]]]  # only jobs this run measured
    shown_cpu = [c for c in cpu_goals
                 if c["uring_cpu_us"] is not None or c["sshfs_cpu_us"] is not None]
    if shown_goals or shown_cpu:
        render_goals(L, shown_goals, shown_cpu)

    L.append("## Host CPU: busy cores / CPU-µs per operation")
    L.append("")
    L.append("Busy cores = busy jiffies ÷ HZ ÷ elapsed; CPU-µs/op = busy CPU time ÷ operations "
             "(for d and e an operation is one 1 MiB I/O).")
    L.append("")
    L.append("| job | " + " | ".join(targets) + " |")
    L.append("|---|" + "---:|" * len(targets))
    for row, desc, _ in ROWS:
        if not summary[row]:
            continue
        cells = []
        for t in targets:
            r = summary[row].get(t)
            if not r or r["status"] != "ok" or r.get("busy_cores") is None:
                cells.append("—")
            else:
                cells.append(f"{r['busy_cores']:.2f} / {fmt(r.get('cpu_us_per_op'))}")
        L.append(f"| {row_label(row, desc, g_count)} | " + " | ".join(cells) + " |")
    L.append("")

    render_rounds(L, targets, summary, g_count, rstat)
    render_smallfiles(L, targets, summary, rpe)

    if meta:
        counts = sorted({n for p in meta.values() for ph in p.values() for n in ph})
        L.append("## Metadata scaling (ops/s, files in one directory)")
        L.append("")
        L.append("The rate should not fall as the directory grows; the last column is the rate "
                 "at the largest size measured ÷ the rate at the smallest.")
        L.append("")
        L.append("| target | op | " + " | ".join(f"{n:,}" for n in counts) + " | largest ÷ smallest |")
        L.append("|---|---|" + "---:|" * (len(counts) + 1))
        for t in targets:
            if t not in meta:
                continue
            for phase in ("create", "stat", "unlink"):
                runs = meta[t].get(phase, {})
                cells = []
                ok = []
                for n in counts:
                    r = runs.get(n)
                    if r is None:
                        cells.append("—")
                    elif r["status"] == "skipped":
                        cells.append("skipped")
                    elif r["status"] not in ("ok", "partial") or r.get("value") is None:
                        cells.append("failed")
                    else:
                        partial = r.get("ops") is not None and r.get("ops") < r.get("requested", 0)
                        cells.append(fmt(r["value"]) + (f" (partial: {r['ops']:,})" if partial
                                                        else ""))
                        if not partial:
                            ok.append(r["value"])
                trend = fmt_ratio(ratio(ok[-1], ok[0])) if len(ok) >= 2 else "—"
                L.append(f"| {t} | {phase} | " + " | ".join(cells) + f" | {trend} |")
        L.append("")

    if scaling:
        qds = sorted({qd for v in scaling.values() for qd in v})
        L.append("## Scaling curve: 4k randread io_uring, IOPS by iodepth")
        L.append("")
        L.append("| target | " + " | ".join(f"QD{q}" for q in qds) + " |")
        L.append("|---|" + "---:|" * len(qds))
        for t in targets:
            if t not in scaling:
                continue
            cells = []
            for q in qds:
                r = scaling[t].get(q)
                cells.append(fmt(r["value"]) if r and r["status"] == "ok" else "—")
            L.append(f"| {t} | " + " | ".join(cells) + " |")
        L.append("")

    L.append("## Plots")
    L.append("")
    if plot_note:
        L.append(plot_note)
    else:
        L.append("![ratios](table.png)")
        L.append("")
        L.append("![scaling](scaling.png)")
        if meta:
            L.append("")
            L.append("![metadata scaling](meta.png)")
    L.append("")
    if notes:
        L.append("## Notes")
        L.append("")
        for n in notes:
            L.append(f"- {n}")
        L.append("")
    return "\n".join(L)


def render_goals(L, goals, cpu_goals):
    L.append("## Goals of issue 5 (ringfs-uring, same run)")
    L.append("")
    L.append("| job | goal | measured | met |")
    L.append("|---|---|---:|:---:|")
    for g in goals:
        met = "—" if g["met"] is None else ("yes" if g["met"] else "**no**")
        L.append(f"| {g['row']} | ≥ {g['need']:g}× {g['vs']} | {fmt_ratio(g['ratio'])} | {met} |")
    for c in cpu_goals:
        met = "—" if c["met"] is None else ("yes" if c["met"] else "**no**")
        L.append(f"| {c['row']} | CPU-µs/op < sshfs | {fmt(c['uring_cpu_us'])} vs "
                 f"{fmt(c['sshfs_cpu_us'])} | {met} |")
    L.append("")


def render_rounds(L, targets, summary, g_count, rstat):
    """Per job: each target's median and min–max over rounds, its ratio to native and
    uring ÷ classic as median (min–max) of per-round ratios, flagged when not conclusive."""
    rows = [(row, desc, unit) for row, desc, unit in ROWS
            if any(r.get("rounds_run", 1) > 1 for r in summary[row].values())]
    if not rows:
        return
    L.append("## Rounds: median and min–max per target, per-round ratios")
    L.append("")
    L.append("Targets were measured in turn in every round, so each round gives one ratio between "
             "two targets; the ratio column is the median of those (min–max). ⚠ marks a ratio "
             "whose min–max straddles 1.0 or whose spread (max − min) is wider than its effect "
             "(|median − 1|): the rounds do not agree on which side is faster.")
    L.append("")
    L.append("| job | target | unit | median | min–max | rounds ok | ÷ native | |")
    L.append("|---|---|---|---:|---:|---:|---:|---|")
    for row, desc, unit in rows:
        label = row_label(row, desc, g_count)
        for t in targets:
            r = summary[row].get(t)
            if not r:
                continue
            if r["status"] != "ok" or r.get("values") is None:
                L.append(f"| {label} | {t} | {unit} | {r['status']} | | 0/{r.get('rounds_run', 1)} | | |")
                continue
            st = rstat(row, t, NATIVE) if t != NATIVE else None
            flag = ratio_flags(st)
            L.append(f"| {label} | {t} | {unit} | {fmt(r['value'])} | {fmt(r['min'])}–"
                     f"{fmt(r['max'])} | {r['rounds_ok']}/{r['rounds_run']} | "
                     f"{fmt_ratio_stats(st) if t != NATIVE else '1'} | "
                     f"{'⚠ ' + flag if flag else ''} |")
        for a, b, name in ((URING, CLASSIC, "uring ÷ classic"), (URING, BASE, "uring ÷ base")):
            st = rstat(row, a, b)
            if st is not None:
                flag = ratio_flags(st)
                L.append(f"| {label} | **{name}** | | | | {st[3]} | {fmt_ratio_stats(st)} | "
                         f"{'⚠ ' + flag if flag else ''} |")
    L.append("")


def fmt_s(x):
    return f"{x:.3f}" if x < 10 else f"{x:.1f}"


def render_smallfiles(L, targets, summary, rpe):
    if not any(summary[row] for row in SF_ROWS):
        return
    L.append("## Small files (job t): wall time in seconds, median (min–max) over rounds")
    L.append("")
    L.append("| step | " + " | ".join(targets) + " |")
    L.append("|---|" + "---:|" * len(targets))
    for row, desc, _ in ROWS:
        if row not in SF_ROWS or not summary[row]:
            continue
        cells = []
        for t in targets:
            r = summary[row].get(t)
            if not r:
                cells.append("—")
            elif r["status"] != "ok" or not r.get("wall_values"):
                cells.append(r["status"])
            else:
                w = list(r["wall_values"].values())
                cell = fmt_s(median(w))
                if len(w) > 1:
                    cell += f" ({fmt_s(min(w))}–{fmt_s(max(w))})"
                cells.append(cell)
        L.append(f"| {row} {desc} | " + " | ".join(cells) + " |")
    L.append("")
    if rpe:
        ts = [t for t in targets if t in rpe]
        # Opcodes tar did not send (counters that only exist from earlier steps) are left out.
        ops = sorted({op for t in ts for op in rpe[t] if abs(rpe[t][op]) >= 0.0005},
                     key=lambda op: (op.startswith("("), -max(rpe[t].get(op, 0) for t in ts), op))
        L.append("### FUSE requests per extracted entry (tar -xf), by opcode")
        L.append("")
        L.append("From the mount's Prometheus endpoint (`ringfs_frontend_requests_total{op}`, "
                 "what the daemon forwarded to the server), scraped before and after each tar; "
                 "median over rounds. An entry is a directory, file or symlink of the tarball.")
        L.append("")
        L.append("| opcode | " + " | ".join(ts) + " |")
        L.append("|---|" + "---:|" * len(ts))
        total = {t: sum(v for op, v in rpe[t].items() if not op.startswith("(")) for t in ts}
        for op in ops:
            cells = [f"{rpe[t][op]:.3f}" if op in rpe[t] else "—" for t in ts]
            L.append(f"| {op} | " + " | ".join(cells) + " |")
        L.append("| **forwarded, all opcodes** | " + " | ".join(f"{total[t]:.3f}" for t in ts) + " |")
        L.append("")


def make_plots(out, machine, targets, summary, scaling, meta, value):
    if machine.get("plots_note"):
        return machine["plots_note"]
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "plots skipped: python3-matplotlib is not installed"
    colors = {NATIVE: "#777777", URING: "#1f77b4", CLASSIC: "#ff7f0e", FLOOR: "#2ca02c",
              SSHFS: "#d62728"}

    # table.png: every target's figure relative to sshfs (or absolute if sshfs is missing).
    rows = [(r, d) for r, d, _ in ROWS if summary[r]]
    have_sshfs = any(value(r, SSHFS) for r, _ in rows)
    shown = [t for t in targets if t != SSHFS] if have_sshfs else targets
    fig, ax = plt.subplots(figsize=(12, 5))
    width = 0.8 / max(len(shown), 1)
    for i, t in enumerate(shown):
        ys = []
        for r, _ in rows:
            v = ratio(value(r, t), value(r, SSHFS)) if have_sshfs else value(r, t)
            ys.append(v if v else 0)
        xs = [k + (i - (len(shown) - 1) / 2) * width for k in range(len(rows))]
        ax.bar(xs, ys, width, label=t, color=colors.get(t))
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([f"{r}\n{PLOT_LABELS.get(r, d)}" for r, d in rows], fontsize=8)
    ax.set_yscale("log")
    if have_sshfs:
        ax.axhline(1.0, color=colors[SSHFS], linewidth=1, linestyle="--", label="sshfs = 1")
        ax.set_ylabel("ratio to sshfs (log)")
    else:
        ax.set_ylabel("IOPS, MB/s or ops/s (log)")
    ax.set_title(f"ringfs vs peers, {machine['date']}")
    ax.legend(fontsize=8)
    ax.grid(axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "table.png"), dpi=110)
    plt.close(fig)

    # scaling.png: IOPS vs iodepth.
    fig, ax = plt.subplots(figsize=(8, 5))
    for t in targets:
        pts = sorted((qd, r["value"]) for qd, r in scaling.get(t, {}).items()
                     if r["status"] == "ok")
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=t,
                    color=colors.get(t))
    ax.set_xscale("log", base=2)
    ax.set_xlabel("iodepth")
    ax.set_ylabel("IOPS")
    ax.set_title("4k randread io_uring, direct=1")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "scaling.png"), dpi=110)
    plt.close(fig)

    if meta:
        fig, axes = plt.subplots(1, 3, figsize=(13, 4))
        for ax, phase in zip(axes, ("create", "stat", "unlink")):
            for t in targets:
                pts = sorted((n, r["value"]) for n, r in meta.get(t, {}).get(phase, {}).items()
                             if r["status"] == "ok")
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=t,
                            color=colors.get(t))
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("files in the directory")
            ax.set_title(phase + (" (cold caches)" if phase == "stat" else ""))
            ax.grid(alpha=0.3, which="both")
        axes[0].set_ylabel("ops/s")
        axes[0].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(out, "meta.png"), dpi=110)
        plt.close(fig)
    return ""


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    md = build(sys.argv[1])
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
