#!/usr/bin/env python3
"""Static checks of grafana-ringfs.json (ctest monitoring_dashboard_check); no Grafana needed.

Import-ready: schemaVersion 39, one ${DS_PROMETHEUS} datasource input used by every panel and
target, unique panel ids, non-overlapping grid positions, heatmaps fed by `_bucket` series in
heatmap format; and the per-queue panels the operator needs are there. Whether the queries
return series is checked against a real Prometheus by monitoring_it.
"""
import json
import sys

REQUIRED = {  # what must be plotted: a series name each
    "in flight": "ringfs_frontend_inflight",
    "background queued": "ringfs_frontend_background_queued",
    "background limit": "ringfs_frontend_background_limit",
    "hand-offs": "ringfs_frontend_handoffs_total",
    "failures": "ringfs_frontend_failures_total",
    "request latency heatmap": "ringfs_frontend_request_duration_seconds_bucket",
    "server requests": "ringfs_server_requests_total",
    "server latency heatmap": "ringfs_server_request_duration_seconds_bucket",
}


def panels_of(dashboard):
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])


def main(path):
    with open(path) as f:
        dashboard = json.load(f)
    errors = []
    if dashboard.get("schemaVersion") != 39:
        errors.append("schemaVersion is not 39")
    inputs = [i["name"] for i in dashboard.get("__inputs", []) if i.get("pluginId") == "prometheus"]
    if inputs != ["DS_PROMETHEUS"]:
        errors.append(f"datasource inputs {inputs}, expected ['DS_PROMETHEUS']")
    ids, cells, exprs = set(), {}, []
    for panel in panels_of(dashboard):
        title = panel.get("title", "?")
        if panel["id"] in ids:
            errors.append(f"{title}: duplicate id {panel['id']}")
        ids.add(panel["id"])
        g = panel["gridPos"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                if (x, y) in cells:
                    errors.append(f"{title}: overlaps {cells[(x, y)]}")
                    break
                cells[(x, y)] = title
            else:
                continue
            break
        if g["x"] + g["w"] > 24:
            errors.append(f"{title}: wider than the grid")
        if panel["type"] == "row":
            continue
        if panel.get("datasource", {}).get("uid") != "${DS_PROMETHEUS}":
            errors.append(f"{title}: datasource is not ${{DS_PROMETHEUS}}")
        if not panel.get("targets"):
            errors.append(f"{title}: no query")
        for target in panel.get("targets", []):
            if target.get("datasource", {}).get("uid") != "${DS_PROMETHEUS}":
                errors.append(f"{title} {target.get('refId')}: datasource is not ${{DS_PROMETHEUS}}")
            exprs.append((panel["type"], target["expr"]))
            if panel["type"] == "heatmap" and (
                    target.get("format") != "heatmap" or "_bucket" not in target["expr"]):
                errors.append(f"{title}: a heatmap needs _bucket series in heatmap format")
    for what, series in REQUIRED.items():
        want_heatmap = what.endswith("heatmap")
        if not any(series in e and (t == "heatmap") == want_heatmap for t, e in exprs):
            errors.append(f"no panel for {what} ({series})")
    for e in errors:
        print(f"{path}: {e}")
    print(f"{path}: {len(ids)} panels, {len(exprs)} queries, {len(errors)} problems")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "grafana-ringfs.json"))
