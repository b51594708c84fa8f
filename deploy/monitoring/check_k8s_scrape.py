#!/usr/bin/env python3
"""The Kubernetes scrape job of prometheus.yml, run for real without a cluster (ctest
monitoring_k8s_scrape_check; exit 77 = skipped when /usr/bin/prometheus is missing).

Debian's Prometheus has no kubernetes_sd_configs, so the job (a comment in prometheus.yml) is
uncommented and its discovery replaced by file_sd_configs listing pods as the Kubernetes
discovery would: the same __meta_kubernetes_* labels, each pod's address on an unrelated port.
The pods' prometheus.io/port annotation points at this Prometheus' own /metrics, so the scrapes
succeed. Checked through /api/v1/targets: annotated ringfs pods become targets of jobs
ringfs-server and ringfs-mount at the annotated port (path annotation honoured), with namespace,
pod and node labels, and are up; pods without the annotation or of other apps are dropped.
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

PROMETHEUS = "/usr/bin/prometheus"
HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def kubernetes_job(config_text):
    """The commented-out Kubernetes job of prometheus.yml, uncommented."""
    start = config_text.index("  # - job_name: ringfs-kubernetes-pods")
    lines = []
    for line in config_text[start:].splitlines():
        if not line.startswith("  # "):
            break
        lines.append("  " + line[4:])
    return "\n".join(lines) + "\n"


def pod(name, app, port, scrape="true", path=None, namespace="storage", node="node-1"):
    labels = {
        "__meta_kubernetes_namespace": namespace,
        "__meta_kubernetes_pod_name": name,
        "__meta_kubernetes_pod_node_name": node,
        "__meta_kubernetes_pod_label_app_kubernetes_io_name": app,
    }
    if scrape is not None:
        labels["__meta_kubernetes_pod_annotation_prometheus_io_scrape"] = scrape
        labels["__meta_kubernetes_pod_annotation_prometheus_io_port"] = str(port)
    if path is not None:
        labels["__meta_kubernetes_pod_annotation_prometheus_io_path"] = path
    # The pod IP with a container port that is not the metrics one, as the discovery gives it.
    return {"targets": ["127.0.0.1:7700"], "labels": labels}


def main():
    if not os.access(PROMETHEUS, os.X_OK):
        print(f"SKIPPED: {PROMETHEUS} not found (Debian package prometheus)")
        return 77
    with open(os.path.join(HERE, "prometheus.yml")) as f:
        job = kubernetes_job(f.read())
    assert "kubernetes_sd_configs:\n      - role: pod\n" in job, job
    work = tempfile.mkdtemp(prefix="ringfs-k8s-scrape.")
    port = free_port()
    process = None
    try:
        pods = [
            pod("ringfs-server-0", "ringfs-server", port),
            pod("ringfs-client-abcde", "ringfs-mount", port, path="/metrics", node="node-2"),
            pod("ringfs-client-fghij", "ringfs-mount", port, scrape="false"),
            pod("ringfs-client-klmno", "ringfs-mount", port, scrape=None),
            pod("web-0", "web", port),
        ]
        with open(os.path.join(work, "pods.json"), "w") as f:
            json.dump(pods, f)
        job = job.replace("kubernetes_sd_configs:\n      - role: pod\n",
                          "file_sd_configs:\n      - files: ['%s/pods.json']\n" % work)
        config = ("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                  "scrape_configs:\n" + job)
        with open(os.path.join(work, "prometheus.yml"), "w") as f:
            f.write(config)
        log = open(os.path.join(work, "prometheus.log"), "w")
        process = subprocess.Popen(
            [PROMETHEUS, f"--config.file={work}/prometheus.yml",
             f"--storage.tsdb.path={work}/tsdb", f"--web.listen-address=127.0.0.1:{port}",
             "--log.level=warn"], stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        targets = []
        while time.monotonic() < deadline:
            time.sleep(0.5)
            if process.poll() is not None:
                break
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/targets?state=active",
                                            timeout=2) as r:
                    targets = json.load(r)["data"]["activeTargets"]
            except OSError:
                continue
            if len(targets) >= 2 and all(t["health"] == "up" for t in targets):
                break
        errors = []
        got = {t["labels"].get("pod"): t for t in targets}
        if set(got) != {"ringfs-server-0", "ringfs-client-abcde"}:
            errors.append(f"targets for pods {sorted(map(str, got))}, expected "
                          "['ringfs-client-abcde', 'ringfs-server-0']")
        for name, job_name, node in (("ringfs-server-0", "ringfs-server", "node-1"),
                                     ("ringfs-client-abcde", "ringfs-mount", "node-2")):
            t = got.get(name)
            if t is None:
                continue
            want = {"job": job_name, "instance": f"127.0.0.1:{port}", "namespace": "storage",
                    "pod": name, "node": node}
            for key, value in want.items():
                if t["labels"].get(key) != value:
                    errors.append(f"{name}: label {key}={t['labels'].get(key)!r}, want {value!r}")
            if not re.search(rf"127\.0\.0\.1:{port}/metrics$", t["scrapeUrl"]):
                errors.append(f"{name}: scrapes {t['scrapeUrl']}")
            if t["health"] != "up":
                errors.append(f"{name}: health {t['health']} {t.get('lastError')}")
        if process.poll() is not None:
            errors.append(f"prometheus exited with {process.returncode}")
        for e in errors:
            print(e)
        if errors:
            with open(os.path.join(work, "prometheus.log")) as f:
                print(f.read())
            return 1
        print(f"ok: {len(targets)} targets, jobs ringfs-server and ringfs-mount, all up")
        return 0
    finally:
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
