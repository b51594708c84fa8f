#!/usr/bin/env python3
"""The Kubernetes scrape job of prometheus.yml on deploy/k8s's pods, in a real Prometheus and
without a cluster (ctest monitoring_k8s_scrape_check; exit 77 = skipped, saying why).

Debian's Prometheus has no kubernetes_sd_configs, so the job (a comment in prometheus.yml) is
uncommented and its discovery replaced by file_sd_configs that list pods the way the Kubernetes
pod discovery does: one target per container port (POD_IP:PORT) with the pod's
__meta_kubernetes_* labels. The pods are those of `kubectl kustomize deploy/k8s` (pod templates
of its StatefulSets and DaemonSets: labels, annotations, ports), plus three made up here: the
server's pod without its scrape annotation and a pod of another app (both must be dropped), and
one whose port annotation points at this Prometheus' own /metrics (it must be up: a scrape
through the rewritten address and path works). Checked through /api/v1/targets: exactly one
target per ringfs pod, job ringfs-server or ringfs-mount, at POD_IP:annotated port and path,
with namespace, pod and node labels.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

PROMETHEUS = "/usr/bin/prometheus"
HERE = os.path.dirname(os.path.abspath(__file__))
K8S = os.path.join(HERE, "..", "k8s")
JOBS = {"ringfs-server": "ringfs-server", "ringfs-client": "ringfs-mount"}


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


def rendered_pods():
    """(name, namespace, labels, annotations, ports) of deploy/k8s's pod templates."""
    import yaml  # python3-yaml, from scripts/install-deps.sh
    text = subprocess.run(["kubectl", "kustomize", K8S], check=True, capture_output=True,
                          text=True, timeout=60).stdout
    pods = []
    for doc in yaml.safe_load_all(text):
        if not doc or doc.get("kind") not in ("StatefulSet", "DaemonSet", "Deployment"):
            continue
        template = doc["spec"]["template"]
        name = doc["metadata"]["name"] + ("-0" if doc["kind"] == "StatefulSet" else "-x7k2p")
        ports = [p["containerPort"] for c in template["spec"]["containers"]
                 for p in c.get("ports", [])]
        pods.append((name, doc["metadata"].get("namespace", "default"),
                     template["metadata"].get("labels", {}),
                     template["metadata"].get("annotations", {}), ports))
    return pods


def meta(value):
    return "".join(c if c.isalnum() else "_" for c in value)


def targets_of(name, namespace, labels, annotations, ports, ip, node):
    """The targets Kubernetes pod discovery makes of one pod: one per container port."""
    common = {"__meta_kubernetes_namespace": namespace, "__meta_kubernetes_pod_name": name,
              "__meta_kubernetes_pod_node_name": node, "__meta_kubernetes_pod_ip": ip}
    for key, value in labels.items():
        common["__meta_kubernetes_pod_label_" + meta(key)] = value
    for key, value in annotations.items():
        common["__meta_kubernetes_pod_annotation_" + meta(key)] = value
    return [{"targets": [f"{ip}:{port}"],
             "labels": dict(common, __meta_kubernetes_pod_container_port_number=str(port))}
            for port in (ports or [80])]


def main():
    if not os.access(PROMETHEUS, os.X_OK):
        print(f"SKIPPED: {PROMETHEUS} not found (Debian package prometheus)")
        return 77
    if shutil.which("kubectl") is None or not os.path.isdir(K8S):
        print("SKIPPED: kubectl or deploy/k8s not found (kubectl renders the pods)")
        return 77
    with open(os.path.join(HERE, "prometheus.yml")) as f:
        job = kubernetes_job(f.read())
    assert "kubernetes_sd_configs:\n      - role: pod\n" in job, job
    pods = rendered_pods()
    ringfs = [p for p in pods if p[2].get("app.kubernetes.io/name") in JOBS]
    if {p[2]["app.kubernetes.io/name"] for p in ringfs} != set(JOBS):
        print(f"deploy/k8s renders no pods labelled {sorted(JOBS)}: {[p[0] for p in pods]}")
        return 1

    work = tempfile.mkdtemp(prefix="ringfs-k8s-scrape.")
    port = free_port()
    process = None
    try:
        # Addresses from TEST-NET-1 (never routed): those scrapes fail, their labels are checked.
        expected = {}
        sd = []
        for i, (name, namespace, labels, annotations, ports) in enumerate(ringfs):
            ip, node = f"192.0.2.{10 + i}", f"node-{i}"
            sd += targets_of(name, namespace, labels, annotations, ports, ip, node)
            expected[name] = {
                "job": JOBS[labels["app.kubernetes.io/name"]],
                "instance": f"{ip}:{annotations['prometheus.io/port']}",
                "namespace": namespace, "pod": name, "node": node,
                "url": f"http://{ip}:{annotations['prometheus.io/port']}"
                       f"{annotations.get('prometheus.io/path', '/metrics')}"}
        server = next(p for p in ringfs if p[2]["app.kubernetes.io/name"] == "ringfs-server")
        unannotated = {k: v for k, v in server[3].items() if k != "prometheus.io/scrape"}
        sd += targets_of("ringfs-server-1", server[1], server[2], unannotated, server[4],
                         "192.0.2.50", "node-9")
        sd += targets_of("web-0", "default", {"app.kubernetes.io/name": "web"}, server[3],
                         server[4], "192.0.2.51", "node-9")
        live = dict(server[3], **{"prometheus.io/port": str(port)})
        sd += targets_of("ringfs-server-live", server[1], server[2], live, server[4],
                         "127.0.0.1", "node-live")
        expected["ringfs-server-live"] = {
            "job": "ringfs-server", "instance": f"127.0.0.1:{port}", "namespace": server[1],
            "pod": "ringfs-server-live", "node": "node-live",
            "url": f"http://127.0.0.1:{port}{server[3].get('prometheus.io/path', '/metrics')}"}

        with open(os.path.join(work, "pods.json"), "w") as f:
            json.dump(sd, f, indent=1)
        job = job.replace("kubernetes_sd_configs:\n      - role: pod\n",
                          "file_sd_configs:\n      - files: ['%s/pods.json']\n" % work)
        with open(os.path.join(work, "prometheus.yml"), "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
                    "scrape_configs:\n" + job)
        log = open(os.path.join(work, "prometheus.log"), "w")
        process = subprocess.Popen(
            [PROMETHEUS, f"--config.file={work}/prometheus.yml",
             f"--storage.tsdb.path={work}/tsdb", f"--web.listen-address=127.0.0.1:{port}",
             "--log.level=warn"], stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        targets = []
        while time.monotonic() < deadline and process.poll() is None:
            time.sleep(0.5)
            try:
                with urllib.request.urlopen(
                        f"http://127.0.0.1:{port}/api/v1/targets?state=active", timeout=2) as r:
                    targets = json.load(r)["data"]["activeTargets"]
            except OSError:
                continue
            live_up = [t for t in targets if t["labels"].get("pod") == "ringfs-server-live"
                       and t["health"] == "up"]
            if len(targets) >= len(expected) and live_up:
                break

        errors = []
        by_pod = {}
        for t in targets:
            by_pod.setdefault(t["labels"].get("pod"), []).append(t)
        if set(by_pod) != set(expected):
            errors.append(f"targets for pods {sorted(map(str, by_pod))}, expected "
                          f"{sorted(expected)}")
        for name, want in expected.items():
            got = by_pod.get(name, [])
            if len(got) != 1:
                errors.append(f"{name}: {len(got)} targets, expected 1")
                continue
            t = got[0]
            for key in ("job", "instance", "namespace", "pod", "node"):
                if t["labels"].get(key) != want[key]:
                    errors.append(f"{name}: {key}={t['labels'].get(key)!r}, want {want[key]!r}")
            if t["scrapeUrl"] != want["url"]:
                errors.append(f"{name}: scrapes {t['scrapeUrl']}, want {want['url']}")
        live = by_pod.get("ringfs-server-live", [{}])[0]
        if live.get("health") != "up":
            errors.append(f"ringfs-server-live: {live.get('health')} {live.get('lastError')}")
        if process.poll() is not None:
            errors.append(f"prometheus exited with {process.returncode}")
        for e in errors:
            print(e)
        if errors:
            with open(os.path.join(work, "prometheus.log")) as f:
                print(f.read())
            return 1
        print("ok: " + ", ".join(f"{n} -> {w['job']} {w['url']}" for n, w in expected.items()))
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
