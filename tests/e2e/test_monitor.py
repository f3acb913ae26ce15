"""End-to-end: `gpusched-lab monitor` against a real kube-apiserver (control_plane.py, no kube-scheduler), with
`gpusched scheduler` placing the pods, `gpusched agent --fake-gpus` exporting GPUs whose utilisation and memory are
pinned (a different value per GPU), a real Prometheus (Debian) scraping the agent every second and a real InfluxDB
(Debian) the agent writes to. This test plays the kubelet: a pod bound to the node is set Running, then Succeeded
(or Failed) a few seconds later, as its name says.

Checks: the CSV holds the pinned values for exactly the pod's GPU; the charts are real, non-blank PNGs; the page is
there; every object the monitor created is gone after success, after a failed pod, after SIGINT mid-run and after
--timeout (with the scheduler's reason); directory mode writes the summary; InfluxDB as the source gives the same
values; set-up errors (a YAML that does not parse, Prometheus unreachable) exit 2 and create nothing.
Environment: as test_extender.py (GPUSCHED_BIN, GPUSCHED_LAB_BIN, GPUSCHED_K8S_BIN, GPUSCHED_ETCD, GPUSCHED_E2E_KEEP).
"""
import csv
import http.client
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import threading
import time
import unittest
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from control_plane import (ControlPlane, Process, free_port, lab_binary, suite_skip_reason,  # noqa: E402
                           wait_until)
from kube import ALLOCATION_ANNOTATION, GPUS_ANNOTATION, gpu_pod  # noqa: E402
from test_scheduler import SCHEDULER_NAME, http_get, scheduler_config  # noqa: E402

NODE = "monitor-node-0"
RUN_LABEL = "gpusched.io/monitor-run"
PINNED_UTIL = [71, 37]  # per fake GPU index (GPU 1 is the idler: what load-aware must find past the lower index)
PINNED_MEM = [4096, 2048]


def log(msg):
    sys.stderr.write(f"[e2e-monitor {time.strftime('%H:%M:%S')}] {msg}\n")
    sys.stderr.flush()


def skip_reason():
    why = suite_skip_reason("monitor")
    if why:
        return why
    for b in ("prometheus", "influxd"):
        if not shutil.which(b):
            return f"{b} not found (Debian packages prometheus and influxdb; scripts/install-deps.sh installs them)"
    return None


SKIP_REASON = skip_reason()


def http_status(port, path):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=3)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        r.read()
        return r.status
    finally:
        conn.close()


def png_pixels(path):
    """(width, height, set of distinct scanline bytes) of a PNG: enough to tell a chart from a blank image."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    pos, idat, width, height = 8, b"", 0, 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    return width, height, len(set(raw))


def read(path):
    with open(path) as f:
        return f.read()


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def pod_yaml(name, gpus=1, extra=""):
    return f"""apiVersion: v1
kind: Pod
metadata:
  name: {name}
spec:
  schedulerName: {SCHEDULER_NAME}
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 0
  restartPolicy: Never
  containers:
  - name: main
    image: registry.invalid/cuda:12
    resources:
      limits: {{nvidia.com/gpu: {gpus}}}
      requests: {{cpu: 100m, memory: 128Mi}}
{extra}"""


CONFIGMAP = """---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {name}-config
data: {{epochs: "3"}}
"""


class FakeKubelet:
    """Plays the node's kubelet for the monitor's pods: a pod bound to NODE becomes Running, then, `run_s` seconds
    later, Succeeded; a pod whose name starts with "fail" ends Failed (exit code 3); "forever" never ends."""

    def __init__(self, kube, run_s=5.0):
        self.kube, self.run_s = kube, run_s
        self.started = {}  # pod name -> time it was set Running
        self.stop = threading.Event()
        self.errors = []
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        while not self.stop.is_set():
            try:
                self._step()
            except Exception as e:  # noqa: BLE001 - reported by the test
                self.errors.append(repr(e))
            self.stop.wait(0.2)

    JOBS = "/apis/batch/v1/namespaces/default/jobs"

    def _step(self):
        now = time.time()
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        # No job controller runs here: a Job of the monitor's completes `run_s` seconds after it appears.
        for j in self.kube.call("GET", self.JOBS + "?labelSelector=" + RUN_LABEL)["items"]:
            name = j["metadata"]["name"]
            if j.get("status", {}).get("conditions") or j["metadata"].get("deletionTimestamp"):
                continue
            first = self.started.setdefault("job/" + name, now)
            if now - first >= self.run_s:
                self.kube.call("PATCH", f"{self.JOBS}/{name}/status", {"status": {
                    "conditions": [{"type": "Complete", "status": "True", "lastProbeTime": stamp,
                                    "lastTransitionTime": stamp}],
                    "startTime": stamp, "completionTime": stamp, "succeeded": 1}},
                    content_type="application/merge-patch+json")
        for p in self.kube.list("pods", labelSelector=RUN_LABEL):
            name = p["metadata"]["name"]
            if p["spec"].get("nodeName") != NODE or p["metadata"].get("deletionTimestamp"):
                continue
            phase = p.get("status", {}).get("phase")
            if phase in ("Succeeded", "Failed"):
                continue
            if name not in self.started:
                self.kube.patch("pods", name, {"status": {"phase": "Running", "startTime": stamp, "conditions": [
                    {"type": "Ready", "status": "True", "lastTransitionTime": stamp}]}}, sub="status")
                self.started[name] = now
            elif now - self.started[name] >= self.run_s and not name.startswith("forever"):
                if name.startswith("fail"):
                    status = {"phase": "Failed", "containerStatuses": [{
                        "name": "main", "ready": False, "restartCount": 0, "image": "registry.invalid/cuda:12",
                        "imageID": "", "state": {"terminated": {"exitCode": 3, "reason": "Error",
                                                                "startedAt": stamp, "finishedAt": stamp}}}]}
                else:
                    status = {"phase": "Succeeded"}
                self.kube.patch("pods", name, {"status": status}, sub="status")

    def close(self):
        self.stop.set()
        self.thread.join(5)


@unittest.skipIf(SKIP_REASON is not None, SKIP_REASON or "")
class MonitorE2E(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.cp = ControlPlane(kube_scheduler=False, log=log)
        cls.addClassCleanup(cls.cp.stop)
        cls.cp.start()
        cls.kube = cls.cp.kube()
        cls.kube.ensure_service_account("default")
        d = cls.cp.dir
        # The node, as its kubelet would register it; the agent publishes its GPU inventory.
        cls.kube.create_ready_node(NODE, {"kubernetes.io/hostname": NODE, "kubernetes.io/os": "linux"}, {},
                                   {"cpu": "32", "memory": "128Gi", "pods": "110", "nvidia.com/gpu": "2"})
        # InfluxDB first: the agent writes to it from its start.
        influx_port, rpc_port = free_port(), free_port()
        with open(os.path.join(d, "influxdb.conf"), "w") as f:
            f.write(f'reporting-disabled = true\nbind-address = "127.0.0.1:{rpc_port}"\n'
                    f'[meta]\n  dir = "{d}/influx/meta"\n[data]\n  dir = "{d}/influx/data"\n'
                    f'  wal-dir = "{d}/influx/wal"\n  query-log-enabled = false\n'
                    f'[http]\n  enabled = true\n  bind-address = "127.0.0.1:{influx_port}"\n  log-enabled = false\n'
                    f'[monitor]\n  store-enabled = false\n[continuous_queries]\n  enabled = false\n')
        cls.influxd = Process("influxd", ["influxd", "run", "-config", os.path.join(d, "influxdb.conf")],
                              os.path.join(d, "influxd.log"))
        cls.addClassCleanup(cls.influxd.stop)
        wait_until(lambda: http_status(influx_port, "/ping") == 204, 60, what="influxd /ping", alive=[cls.influxd])
        cls.influx_url = f"http://127.0.0.1:{influx_port}"
        # The agent: two fake A100s with pinned utilisation and memory.
        gpus = os.path.join(d, "gpus.yaml")
        with open(gpus, "w") as f:
            for u, m in zip(PINNED_UTIL, PINNED_MEM):
                f.write(f"- {{model: A100-80GB, utilization: {u}, memory_used_mib: {m}}}\n")
        cls.agent_port = free_port()
        plugin_dir = os.path.join(d, "device-plugins")
        os.makedirs(plugin_dir, exist_ok=True)
        cls.agent = Process("gpusched-agent",
                            [os.environ["GPUSCHED_BIN"], "agent", "--fake-gpus", gpus, "--node-name", NODE,
                             "--kubeconfig", cls.cp.kubeconfig, "--listen", f"127.0.0.1:{cls.agent_port}",
                             "--interval", "0.2", "--device-plugin-dir", plugin_dir,
                             "--pod-resources-socket", os.path.join(d, "no-pod-resources.sock"),
                             "--influxdb-url", cls.influx_url],
                            os.path.join(d, "agent.log"))
        cls.addClassCleanup(cls.agent.stop)
        inventory = wait_until(
            lambda: cls.kube.get("nodes", NODE)["metadata"].get("annotations", {}).get(GPUS_ANNOTATION), 60,
            what="the agent's GPU inventory on the node", alive=[cls.agent])
        cls.uuids = [g["uuid"] for g in json.loads(inventory)]
        # Prometheus scraping the agent every second.
        prom_port = free_port()
        with open(os.path.join(d, "prometheus.yml"), "w") as f:
            f.write("global: {scrape_interval: 1s, evaluation_interval: 1s}\nscrape_configs:\n"
                    f"- job_name: gpusched-agent\n  static_configs: [{{targets: ['127.0.0.1:{cls.agent_port}']}}]\n")
        cls.prometheus = Process("prometheus",
                                 ["prometheus", f"--config.file={d}/prometheus.yml", f"--storage.tsdb.path={d}/tsdb",
                                  f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"],
                                 os.path.join(d, "prometheus.log"))
        cls.addClassCleanup(cls.prometheus.stop)
        cls.prom_url = f"http://127.0.0.1:{prom_port}"
        wait_until(lambda: http_status(prom_port, "/-/ready") == 200, 60, what="prometheus /-/ready",
                   alive=[cls.prometheus])
        # gpusched's scheduler, as the cluster admin (its RBAC is test_scheduler's business).
        cls.sched_port = free_port()
        config = os.path.join(d, "scheduler.yaml")
        with open(config, "w") as f:
            f.write(scheduler_config(cls.sched_port, leader_election=False))
        cls.scheduler = Process("gpusched-scheduler",
                                [os.environ["GPUSCHED_BIN"], "scheduler", "--config", config,
                                 "--kubeconfig", cls.cp.kubeconfig],
                                os.path.join(d, "scheduler.log"))
        cls.addClassCleanup(cls.scheduler.stop)
        wait_until(lambda: http_status(cls.sched_port, "/readyz") == 200, 60, what="gpusched scheduler /readyz",
                   alive=[cls.scheduler])
        # Prometheus has the agent's series before the first run.
        wait_until(lambda: http_status(prom_port, "/api/v1/query?query=DCGM_FI_DEV_GPU_UTIL") == 200 and
                   cls.prom_query("count(DCGM_FI_DEV_GPU_UTIL)") == 2, 30, interval=0.5,
                   what="Prometheus to scrape the agent")
        cls.kubelet = FakeKubelet(cls.kube)
        cls.addClassCleanup(cls.kubelet.close)
        cls.runs = 0

    @classmethod
    def prom_query(cls, q):
        conn = http.client.HTTPConnection("127.0.0.1", int(cls.prom_url.rsplit(":", 1)[1]), timeout=3)
        try:
            conn.request("GET", "/api/v1/query?query=" + q.replace(" ", "%20").replace("(", "%28").replace(")", "%29"))
            result = json.loads(conn.getresponse().read())["data"]["result"]
            return float(result[0]["value"][1]) if result else None
        finally:
            conn.close()

    def setUp(self):
        self.assertEqual(self.kubelet.errors, [], "the fake kubelet failed")
        for p in (self.agent, self.prometheus, self.influxd, self.scheduler):
            p.check_alive()
        type(self).runs += 1
        self.work = os.path.join(self.cp.dir, f"monitor-{self.runs}")
        os.makedirs(self.work)

    def write(self, name, text):
        path = os.path.join(self.work, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def monitor_argv(self, files, *extra, source="prometheus", timeout="60s"):
        argv = [lab_binary(), "monitor", "--kubeconfig", self.cp.kubeconfig, "--interval", "1s",
                "--timeout", timeout, "--out", os.path.join(self.work, "out")]
        for f in files:
            argv += ["-f", f]
        argv += ["--influxdb", self.influx_url] if source == "influxdb" else ["--prometheus", self.prom_url]
        return argv + list(extra)

    def monitor(self, files, *extra, source="prometheus", run_timeout="60s", timeout=120):
        argv = self.monitor_argv(files, *extra, source=source, timeout=run_timeout)
        t0 = time.monotonic()
        res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        log(f"monitor exited {res.returncode} after {time.monotonic() - t0:.1f}s:\n{res.stdout}{res.stderr[-3000:]}")
        return res

    def left_behind(self):
        """Objects still carrying a monitor run label (pods not already terminating, configmaps)."""
        left = []
        for kind in ("pods", "configmaps"):
            for o in self.kube.list(kind, labelSelector=RUN_LABEL):
                if not o["metadata"].get("deletionTimestamp"):
                    left.append(f"{kind}/{o['metadata']['name']}")
        for o in self.kube.call("GET", FakeKubelet.JOBS + "?labelSelector=" + RUN_LABEL)["items"]:
            if not o["metadata"].get("deletionTimestamp"):
                left.append(f"jobs/{o['metadata']['name']}")
        return left

    def run_dirs(self):
        out = os.path.join(self.work, "out")
        return sorted(os.path.join(out, d) for d in os.listdir(out) if os.path.isdir(os.path.join(out, d)))

    def check_metrics(self, run_dir, pod):
        """The CSV holds the pinned values for exactly the GPU the pod was given; the charts are real."""
        rows = read_csv(os.path.join(run_dir, "metrics.csv"))
        self.assertTrue(rows, "metrics.csv has no rows")
        uuids = {r["gpu_uuid"] for r in rows}
        self.assertEqual(len(uuids), 1, f"rows for {uuids}")
        uuid = uuids.pop()
        self.assertIn(uuid, self.uuids)
        index = self.uuids.index(uuid)
        self.assertEqual({r["pod"] for r in rows}, {pod})
        self.assertEqual({r["node"] for r in rows}, {NODE})
        util = [float(r["value"]) for r in rows if r["metric"] == "util"]
        mem = [float(r["value"]) for r in rows if r["metric"] == "fb_used"]
        self.assertGreaterEqual(len(util), 3, "fewer than 3 utilisation samples over a 5 s run")
        self.assertEqual(set(util), {PINNED_UTIL[index]})
        self.assertEqual(set(mem), {PINNED_MEM[index]})
        self.assertTrue(all(r["unit"] == "%" for r in rows if r["metric"] == "util"))
        for metric in ("util", "temp", "memcopy", "power", "fb_used"):
            w, h, distinct = png_pixels(os.path.join(run_dir, f"{metric}.png"))
            self.assertEqual((w, h), (900, 560))
            self.assertGreater(distinct, 5, f"{metric}.png looks blank")
            self.assertTrue(os.path.getsize(os.path.join(run_dir, f"{metric}.svg")) > 1000)
        page = read(os.path.join(run_dir, "index.html"))
        self.assertIn("<svg", page)
        self.assertIn(uuid, page)
        return uuid

    # -- tests ------------------------------------------------------------------------------------------------

    def test_0_top(self):
        """`gpusched top`: the pinned utilisation and memory per GPU from Prometheus (and from InfluxDB), and the
        row of a pod bound to GPU 1 with an allocation annotation."""
        pod = gpu_pod("top-holder", {"nvidia.com/gpu": 1})
        self.kube.create("pods", pod)
        allocation = {"node": NODE, "id": 1, "containers": [{"name": "main", "gpus": [
            {"index": 1, "uuid": self.uuids[1], "milli": 1000, "memory_mib": 0, "exclusive": True}]}]}
        self.kube.bind("top-holder", NODE, annotations={ALLOCATION_ANNOTATION: json.dumps(allocation)})
        try:
            for source in (["--prometheus", self.prom_url], ["--influxdb", self.influx_url]):
                argv = [os.environ["GPUSCHED_BIN"], "top", *source, "--kubeconfig", self.cp.kubeconfig]
                r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
                log("$ " + " ".join(argv) + "\n" + r.stdout + r.stderr)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertRegex(r.stdout, rf"(?m)^{NODE}\s+0\s+\S+\s+{PINNED_UTIL[0]}%\s+{PINNED_MEM[0]}/\d+\s+\S+\s+-$")
                self.assertRegex(r.stdout,
                                 rf"(?m)^{NODE}\s+1\s+\S+\s+{PINNED_UTIL[1]}%\s+{PINNED_MEM[1]}/\d+\s+\S+\s+default/top-holder$")
                self.assertRegex(r.stdout, rf"(?m)^default/top-holder\s+{NODE}\s+1\s+{PINNED_UTIL[1]}%\s+{PINNED_MEM[1]}\s")
        finally:
            self.kube.delete("pods", "top-holder")
            wait_until(lambda: self.kube.get("pods", "top-holder") is None, 30, what="top-holder deleted")

    def test_1_pod_succeeds_with_prometheus(self):
        f = self.write("train.yaml", pod_yaml("train") + CONFIGMAP.format(name="train"))
        res = self.monitor([f])
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
        self.assertIn("train: succeeded", res.stdout)
        (run_dir,) = self.run_dirs()
        self.check_metrics(run_dir, "train")
        self.assertEqual(self.left_behind(), [])
        page = read(os.path.join(run_dir, "index.html"))
        self.assertIn("ConfigMap default/train-config", page)

    def test_2_failed_pod_is_a_failed_run_and_is_cleaned_up(self):
        f = self.write("fail.yaml", pod_yaml("fail-once"))
        res = self.monitor([f])
        self.assertEqual(res.returncode, 1)
        self.assertIn("fail: failed: main: Error (exit code 3)", res.stdout)
        self.assertEqual(self.left_behind(), [])

    def test_2b_keep_leaves_the_objects(self):
        f = self.write("kept.yaml", pod_yaml("kept") + CONFIGMAP.format(name="kept"))
        res = self.monitor([f], "--keep")
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
        self.assertIn("kept: run id gm-", res.stdout)
        self.assertEqual(sorted(self.left_behind()), ["configmaps/kept-config", "pods/kept"])
        self.kube.delete("pods", "kept")
        self.kube.delete("configmaps", "kept-config")
        wait_until(lambda: not self.left_behind(), 30, what="the kept objects to go")

    def test_3_sigint_mid_run_cleans_up(self):
        f = self.write("forever.yaml", pod_yaml("forever-serve"))
        proc = subprocess.Popen(self.monitor_argv([f]), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_until(lambda: "forever-serve" in self.kubelet.started, 60, what="the pod to run")
            time.sleep(3)
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        log(f"monitor exited {proc.returncode}:\n{out}{err[-2000:]}")
        self.assertEqual(proc.returncode, 1)
        self.assertIn("forever: interrupted", out)
        self.assertEqual(self.left_behind(), [])
        (run_dir,) = self.run_dirs()
        self.assertTrue(os.path.exists(os.path.join(run_dir, "metrics.csv")))

    def test_4_timeout_of_an_unschedulable_pod_says_why(self):
        f = self.write("huge.yaml", pod_yaml("huge", gpus=9))
        res = self.monitor([f], run_timeout="6s")
        self.assertEqual(res.returncode, 1)
        self.assertIn("huge: timed out after 6.0 s (not scheduled: ", res.stdout)
        self.assertRegex(res.stdout, r"Unschedulable|nvidia\.com/gpu|GPU")
        self.assertEqual(self.left_behind(), [])
        (run_dir,) = self.run_dirs()
        page = read(os.path.join(run_dir, "index.html"))
        self.assertIn("never scheduled", page)

    def test_5_directory_mode_writes_the_summary(self):
        d = os.path.join(self.work, "set")
        os.makedirs(d)
        with open(os.path.join(d, "a.yaml"), "w") as f:
            f.write(pod_yaml("job-a"))
        with open(os.path.join(d, "b.yaml"), "w") as f:
            f.write(pod_yaml("job-b"))
        res = self.monitor([d], "--parallel", "2")  # both at once: one GPU each
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
        out = os.path.join(self.work, "out")
        rows = read_csv(os.path.join(out, "summary.csv"))
        self.assertEqual([r["workload"] for r in rows], ["a", "b"])
        for r in rows:
            self.assertEqual(r["outcome"], "succeeded")
            self.assertEqual(r["gpus"], "1")
            self.assertIn(float(r["mean_util_pct"]), [float(u) for u in PINNED_UTIL])
            self.assertGreater(float(r["energy_j"]), 0)
            self.assertGreaterEqual(float(r["duration_s"]), 4)
        self.assertEqual(sorted(float(r["mean_util_pct"]) for r in rows), sorted(float(u) for u in PINNED_UTIL),
                         "the two pods ran at once, on different GPUs")
        self.assertTrue(os.path.exists(os.path.join(out, "index.html")))
        self.assertEqual(len(self.run_dirs()), 2)
        self.assertEqual(self.left_behind(), [])

    def test_5b_duration_ends_a_workload_that_never_ends(self):
        f = self.write("serve.yaml", pod_yaml("forever-duration"))
        res = self.monitor([f], "--duration", "3s", "--metrics", "util,sm_clock")
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
        self.assertIn("serve: succeeded (ran for --duration 3.0 s)", res.stdout)
        (run_dir,) = self.run_dirs()
        metrics = {r["metric"] for r in read_csv(os.path.join(run_dir, "metrics.csv"))}
        self.assertEqual(metrics, {"util", "sm_clock"})
        self.assertEqual(self.left_behind(), [])

    def test_6_influxdb_source(self):
        f = self.write("influx.yaml", pod_yaml("influx-train"))
        res = self.monitor([f], source="influxdb")
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
        (run_dir,) = self.run_dirs()
        self.check_metrics(run_dir, "influx-train")
        self.assertEqual(self.left_behind(), [])

    def test_6b_job_completes_and_a_rejected_object_is_a_failed_run(self):
        job = self.write("sweep.yaml", """apiVersion: batch/v1
kind: Job
metadata: {name: sweep}
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      automountServiceAccountToken: false
      containers: [{name: main, image: registry.invalid/cuda:12}]
""")
        res = self.monitor([job])
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
        self.assertIn("sweep: succeeded", res.stdout)
        self.assertEqual(self.left_behind(), [])
        bad = self.write("rejected.yaml", CONFIGMAP.format(name="rejected") + """---
apiVersion: v1
kind: Pod
metadata: {name: no-image}
spec:
  containers: [{name: main}]
""")
        res = self.monitor([bad])
        self.assertEqual(res.returncode, 1)
        self.assertIn("rejected.yaml:8: the API server refused the Pod no-image", res.stdout)
        self.assertIn("image", res.stdout)
        self.assertEqual(self.left_behind(), [], "the ConfigMap created before the refusal is deleted")

    def test_8_load_aware_scheduler(self):
        """`gpusched scheduler` with policy load-aware, once over Prometheus and once over InfluxDB, both fed by the
        agent's fake GPUs: a shared pod goes to the idle GPU (index 1, 37 % busy), not to the lower index a
        placement blind to load would take (binpack's tie-break)."""
        for source in ("prometheus", "influxdb"):
            name = f"gpusched-load-{source}"
            port = free_port()
            text = scheduler_config(port, leader_election=False)
            text = text.replace(f"schedulerNames: [{SCHEDULER_NAME}]", f"schedulerNames: [{name}]", 1)
            text = text.replace("policy: binpack", "policy: load-aware", 1)
            text += "metrics:\n  refreshSeconds: 1\n"
            text += (f"  prometheus: {{url: \"{self.prom_url}\"}}\n" if source == "prometheus"
                     else f"  influxdb: {{url: \"{self.influx_url}\", database: gpusched}}\n")
            config = self.write(f"{name}.yaml", text)
            proc = Process(name, [os.environ["GPUSCHED_BIN"], "scheduler", "--config", config,
                                  "--kubeconfig", self.cp.kubeconfig, "-v"],
                           os.path.join(self.work, f"{name}.log"))
            try:
                wait_until(lambda: http_get(port, "/readyz")[0] == 200, 60, what=f"{name} /readyz", alive=[proc])
                time.sleep(2)  # a refresh of the metrics cache past the first samples
                pod = gpu_pod(f"forever-{name}", {"gpusched.io/gpu": 1, "gpusched.io/gpu-core": 30,
                                                  "gpusched.io/gpu-memory": 1000})
                pod["spec"]["schedulerName"] = name
                self.kube.create("pods", pod)
                bound = wait_until(lambda: (self.kube.get("pods", pod["metadata"]["name"]) or {}).get(
                    "metadata", {}).get("annotations", {}).get(ALLOCATION_ANNOTATION), 30,
                    what=f"{pod['metadata']['name']} bound", alive=[proc])
                gpus = [g for c in json.loads(bound)["containers"] for g in c["gpus"]]
                log(f"{name}: {pod['metadata']['name']} on GPU {gpus[0]['index']} "
                    f"(pinned utilisation {PINNED_UTIL})")
                self.assertEqual([g["index"] for g in gpus], [1], f"{source}: the idle GPU")
                self.assertEqual(http_get(port, "/readyz")[1].strip()[:3], "ok:")
            finally:
                self.kube.delete("pods", f"forever-{name}", grace=0)
                wait_until(lambda: self.kube.get("pods", f"forever-{name}") is None, 30, what="the pod deleted")
                proc.stop()

    def test_7_setup_errors_create_nothing(self):
        bad = self.write("bad.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: [x\n")
        res = self.monitor([bad])
        self.assertEqual(res.returncode, 2)
        self.assertIn("bad.yaml:", res.stderr)
        good = self.write("good.yaml", pod_yaml("never-made"))
        argv = self.monitor_argv([good])
        argv[argv.index(self.prom_url)] = f"http://127.0.0.1:{free_port()}"
        res = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        self.assertEqual(res.returncode, 2, res.stdout + res.stderr)
        self.assertIn("the metrics source does not answer", res.stderr)
        res = self.monitor([self.write("deploy.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n")])
        self.assertEqual(res.returncode, 2)
        self.assertIn("give --duration", res.stderr)
        self.assertEqual(self.kube.list("pods", labelSelector=RUN_LABEL), [])
        status, _ = self.kube.raw("GET", "/api/v1/namespaces/default/pods/never-made")
        self.assertEqual(status, 404)


if __name__ == "__main__":
    unittest.main()
