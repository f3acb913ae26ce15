"""End-to-end: a real kube-scheduler, configured with gpusched's extender, binds GPU-sharing pods correctly.

Runs etcd, kube-apiserver and kube-scheduler on loopback (control_plane.py), fake GPU nodes (Node objects), and
`$GPUSCHED_BIN extender`, which kube-scheduler calls over TLS with a client certificate (enableHTTPS + tlsConfig):
the extender accepts only certificates of its own client CA that name kube-scheduler. Each test has its own pool of
nodes (label gpusched-e2e/pool, pods select it with a nodeSelector), so tests do not depend on each other's
deletions. All pods have the same priority: kube-scheduler 1.20.2 panics when the extender fails every node for a
pod that could preempt lower-priority pods (real-kubernetes.md).

Environment:
  GPUSCHED_BIN        the gpusched binary (required; the tests skip without it or without its `extender` verb)
  GPUSCHED_K8S_BIN    directory with kube-apiserver and kube-scheduler (else scripts/build-k8s.sh --check)
  GPUSCHED_ETCD       etcd binary (else etcd on PATH)
  GPUSCHED_E2E_POLICY extender policy (default binpack)
  GPUSCHED_E2E_KEEP   keep the temporary directory (logs, certs, configs) after the run
  GPUSCHED_E2E_TMPDIR where to make that directory (default $TMPDIR or /tmp)
  GPUSCHED_E2E_EXTENDER_ADMIN  run the extender as cluster admin instead of with deploy/base/extender/rbac.yaml's permissions

Run: cd tests/e2e && GPUSCHED_BIN=... python3 -m unittest -v test_extender
"""

import collections
import functools
import json
import os
import re
import signal
import ssl
import subprocess
import sys
import time
import unittest
import http.client

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from control_plane import (REPO_ROOT, ControlPlane, Process, find_etcd, find_k8s_bin, free_port,  # noqa: E402
                           lab_binary, wait_until, write_kubeconfig)
from allocation_checks import AllocationChecks  # noqa: E402
from kube import ALLOCATION_ANNOTATION, GPU_MEMORY_MIB, GPUS_ANNOTATION, Kube, gpu_pod, keti_seed_pod  # noqa: E402
import monitoring_check  # noqa: E402
import rbac_audit  # noqa: E402

POOL_LABEL = "gpusched-e2e/pool"
EXTENDER_USER = "system:serviceaccount:kube-system:gpusched-extender"  # deploy/base/extender/rbac.yaml
PATH_PREFIX = "/scheduler"
SHARE = {"gpusched.io/gpu": 1, "gpusched.io/gpu-memory": 20000, "gpusched.io/gpu-core": 30}
BIND_TIMEOUT = 30
FAIL_TIMEOUT = 30
LEASE_S = 4  # the e2e extenders' leaderElection.leaseDurationSeconds
LEASE_PATH = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/gpusched-extender"


def log(msg):
    sys.stderr.write(f"[e2e {time.strftime('%H:%M:%S')}] {msg}\n")
    sys.stderr.flush()


def _skip_reason():
    _, why = find_k8s_bin()
    if why:
        return why
    _, why = find_etcd()
    if why:
        return why
    binary = os.environ.get("GPUSCHED_BIN")
    if not binary:
        return "GPUSCHED_BIN is unset (ctest sets it to the gpusched target)"
    if not os.access(binary, os.X_OK):
        return f"GPUSCHED_BIN={binary} is not an executable file"
    try:
        res = subprocess.run([binary, "extender", "--help"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{binary} extender --help failed: {e}"
    # CLI11 answers --help of the main app (exit 0) when the subcommand does not exist: look at the usage line.
    if res.returncode != 0 or not re.search(r"(?m)^Usage: \S+ extender\b", res.stdout + res.stderr):
        out = (res.stdout + res.stderr).strip().splitlines()
        return f"{binary} has no `extender` subcommand yet (`extender --help` printed: {out[:2]})"
    return None


SKIP_REASON = _skip_reason()


SCHEDULER_CLIENT_NAME = "kube-scheduler"  # the CN of kube-scheduler's client certificate, the one allowed name


class ExtenderTls:
    """The certificates of the extender's TLS, made with the control plane's Pki (openssl) in its directory.

    server:   the extender's serving certificate for 127.0.0.1, signed by the cluster CA (kube-scheduler's caFile)
    client CA: a CA of the extender's own; it signs kube-scheduler's client certificate (CN=kube-scheduler), and
               an intruder's (valid CA, a name not allowed)
    rogue:    a client certificate with CN=kube-scheduler from an unrelated CA"""

    def __init__(self, pki):
        self.pki = pki
        self.server_crt, self.server_key = pki.server_cert("gpusched-extender", ips=["127.0.0.1"])
        pki._ca("extender-client-ca", "gpusched-e2e-extender-client-ca")
        self.client_ca_crt = os.path.join(pki.dir, "extender-client-ca.crt")
        self.scheduler_crt, self.scheduler_key = pki._leaf(
            "extender-client-kube-scheduler", f"/CN={SCHEDULER_CLIENT_NAME}", "extender-client-ca", "clientAuth")
        self.intruder_crt, self.intruder_key = pki._leaf(
            "extender-client-intruder", "/CN=gpusched-e2e-intruder", "extender-client-ca", "clientAuth")
        pki._ca("rogue-ca", "gpusched-e2e-rogue-ca")
        self.rogue_crt, self.rogue_key = pki._leaf(
            "rogue-kube-scheduler", f"/CN={SCHEDULER_CLIENT_NAME}", "rogue-ca", "clientAuth")

    def scheduler_tls_config(self):
        """kube-scheduler's tlsConfig for the extender stanza (v1beta1 ExtenderTLSConfig field names)."""
        return {"certFile": self.scheduler_crt, "keyFile": self.scheduler_key, "caFile": self.pki.ca_crt}

    def context(self, cert=None, key=None):
        """A client context that verifies the extender (cluster CA, IP 127.0.0.1), presenting `cert` if given."""
        ctx = ssl.create_default_context(cafile=self.pki.ca_crt)
        if cert:
            ctx.load_cert_chain(cert, key)
        return ctx

    def scheduler_context(self):
        return self.context(self.scheduler_crt, self.scheduler_key)


class Extender:
    """`gpusched extender` as a child process on a fixed loopback port (kept across restarts), over TLS with client
    certificates when `tls` (an ExtenderTls) is given."""

    def __init__(self, binary, workdir, kubeconfig, port, policy="binpack", interference_model=None, tls=None,
                 name="extender", leader_election=False):
        self.binary, self.workdir, self.kubeconfig, self.policy = binary, workdir, kubeconfig, policy
        self.name = name
        self.interference_model = interference_model
        self.port = port
        self.tls = tls
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}{PATH_PREFIX}"
        self.config = os.path.join(workdir, f"{name}.yaml")
        with open(self.config, "w") as f:
            f.write(f'listen: "127.0.0.1:{self.port}"\npathPrefix: "{PATH_PREFIX}"\npolicy: {policy}\n')
            if tls:
                f.write(f"tls:\n  certFile: {tls.server_crt}\n  keyFile: {tls.server_key}\n"
                        f"  clientCAFile: {tls.client_ca_crt}\n  allowedClientNames: [{SCHEDULER_CLIENT_NAME}]\n")
            if interference_model:
                f.write("interference: {enabled: true}\n")
            if leader_election:
                # Short timings so that a failover fits in a test; the rules are those of the defaults (15/10/2).
                f.write(f"leaderElection: {{enabled: true, leaseDurationSeconds: {LEASE_S}, renewDeadlineSeconds: 3, "
                        "retryPeriodSeconds: 1}\n")
        self.proc = None
        self.runs = []  # every Process started, for logs

    def connection(self, timeout=2, context=None):
        """A connection to the extender; over TLS as kube-scheduler unless another `context` is given."""
        if not self.tls:
            return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        return http.client.HTTPSConnection("127.0.0.1", self.port, timeout=timeout,
                                           context=context or self.tls.scheduler_context())

    def start(self, timeout=30, ready=True):
        """Starts the process and, with `ready`, waits for /readyz to answer 200; returns the seconds taken."""
        t0 = time.monotonic()
        n = len(self.runs) + 1
        args = [self.binary, "extender", "--config", self.config, "--kubeconfig", self.kubeconfig]
        if self.interference_model:
            args += ["--interference-model", self.interference_model]
        self.proc = Process(f"gpusched-{self.name}-{n}", args, os.path.join(self.workdir, f"{self.name}-{n}.log"))
        self.runs.append(self.proc)
        if ready:
            self.wait_readyz(200, timeout)
        return time.monotonic() - t0

    def readyz(self):
        """(status, body) of GET /readyz; (None, why) while nothing answers."""
        conn = self.connection()
        try:
            conn.request("GET", "/readyz")
            r = conn.getresponse()
            return r.status, r.read().decode(errors="replace")
        except (OSError, http.client.HTTPException) as e:
            return None, f"{type(e).__name__}: {e}"
        finally:
            conn.close()

    def wait_readyz(self, status, timeout=30, text=None):
        """Waits until /readyz answers `status` (with `text` in its body when given); returns the body."""
        seen = []

        def check():
            got, body = self.readyz()
            seen[:] = [body]
            return got == status and (text is None or text in body)
        wait_until(check, timeout, interval=0.1, what=f"{self.name} /readyz {status} {text or ''}", alive=[self.proc])
        return seen[0]

    def stop(self):
        if self.proc:
            self.proc.stop()

    def kill(self):
        if self.proc:
            self.proc.kill()

    # Sanitizer reports (the asan build); LeakSanitizer also turns the exit status non-zero.
    SANITIZER = re.compile(r"ERROR: (AddressSanitizer|LeakSanitizer)|ThreadSanitizer|runtime error:")

    def shutdown_problems(self):
        """What went wrong with the extender processes, judged from exit statuses and logs after stop()."""
        problems = []
        last = self.runs[-1] if self.runs else None
        for p in self.runs:
            rc = p.proc.returncode
            # Runs but the last were SIGKILLed on purpose; the last got SIGTERM and should exit 0.
            if p is last and rc not in (0, -signal.SIGTERM):
                problems.append(f"{p.name} exited with status {rc} after SIGTERM (see {p.log_path})")
            with open(p.log_path, errors="replace") as f:
                m = self.SANITIZER.search(f.read())
            if m:
                problems.append(f"{p.name}: sanitizer report '{m.group(0)}' in {p.log_path}")
        return problems

    def tails(self, lines=60):
        return "\n".join(f"----- {p.name} ({p.log_path}), last {lines} lines -----\n{p.tail(lines)}"
                         for p in self.runs)


def dump_logs_on_failure(test):
    @functools.wraps(test)
    def wrapper(self, *a, **kw):
        try:
            return test(self, *a, **kw)
        except BaseException:
            self.dump_logs()
            raise
    return wrapper


GPU_RESOURCES = ("gpusched.io/gpu", "gpusched.io/gpu-memory", "gpusched.io/gpu-core", "nvidia.com/gpu")


def requests_gpu(pod):
    for c in pod["spec"].get("containers", []) + pod["spec"].get("initContainers", []):
        res = c.get("resources", {})
        if any(r in GPU_RESOURCES for part in ("limits", "requests") for r in res.get(part, {})):
            return True
    return False


@unittest.skipIf(SKIP_REASON is not None, SKIP_REASON or "")
class ExtenderE2E(AllocationChecks, unittest.TestCase):
    cp = None
    ext = None
    second = None  # the second replica of test_9
    must_stay_pending = []  # pods that did not fit; nothing frees GPUs in this suite, so they never may

    # -- set-up -----------------------------------------------------------------------------------------------

    @classmethod
    def setUpClass(cls):
        cls.t_suite = time.monotonic()
        binary = os.environ["GPUSCHED_BIN"]
        port = free_port()

        def scheduler_tls(pki):
            cls.tls = ExtenderTls(pki)
            return cls.tls.scheduler_tls_config()
        cls.tls = None
        cls.cp = ControlPlane(extender_url=f"https://127.0.0.1:{port}{PATH_PREFIX}", extender_tls=scheduler_tls,
                              log=log)
        cls.addClassCleanup(cls._cleanup)
        try:
            cls.cp.start()
            cls.kube = cls.cp.kube()
            cls.kube.ensure_service_account("default")
            kubeconfig = cls.cp.kubeconfig
            if not os.environ.get("GPUSCHED_E2E_EXTENDER_ADMIN"):
                # Run the extender with exactly deploy/base/extender/rbac.yaml's permissions: a client certificate for the
                # ServiceAccount's user name, which that file's ClusterRoleBinding names.
                with open(os.path.join(REPO_ROOT, "deploy", "base", "extender", "rbac.yaml")) as f:
                    cls.kube.apply_yaml(f.read())
                crt, key = cls.cp.pki.client_cert("extender", f"/CN={EXTENDER_USER}")
                kubeconfig = write_kubeconfig(os.path.join(cls.cp.dir, "extender.kubeconfig"), cls.cp.server,
                                              cls.cp.pki.ca_crt, crt, key)
            cls.interference_model = cls._train_interference_model(binary)
            cls.ext = Extender(binary, cls.cp.dir, kubeconfig, port,
                               policy=os.environ.get("GPUSCHED_E2E_POLICY", "binpack"),
                               interference_model=cls.interference_model, tls=cls.tls, leader_election=True)
            ready_s = cls.ext.start()
            log(f"extender ready in {ready_s:.1f}s at {cls.ext.url}")
            cls.startup_s = time.monotonic() - cls.t_suite
        except BaseException:
            cls._dump_class_logs()
            raise

    @classmethod
    def tearDownClass(cls):
        # deploy/base/extender/rbac.yaml grants exactly the verbs the extender used in this suite (rbac_audit.py).
        if not os.environ.get("GPUSCHED_E2E_EXTENDER_ADMIN"):
            try:
                rbac_audit.check_component(cls.kube, cls.cp.audit_log, rbac_audit.EXTENDER, log=log)
            except AssertionError:
                cls._dump_class_logs()
                raise

    @classmethod
    def _train_interference_model(cls, binary):
        """`gpusched-lab interference train` on ../shared's measurements, for test_7; None when the data is absent."""
        data = os.path.join(REPO_ROOT, "..", "shared", "data", "interference")
        if not os.path.isdir(data):
            log(f"no co-location data at {data}: the interference test will be skipped")
            return None
        out = os.path.join(cls.cp.dir, "interference-model.json")
        t0 = time.monotonic()
        subprocess.run([lab_binary(), "interference", "train", "--data", data, "--out", out], check=True,
                       stdout=subprocess.DEVNULL, timeout=300)
        log(f"interference model trained in {time.monotonic() - t0:.1f}s")
        return out

    @classmethod
    def _cleanup(cls):
        problems = []
        try:
            for replica in (cls.ext, cls.second):
                if replica:
                    replica.stop()
                    problems += replica.shutdown_problems()
            if problems:
                cls._dump_class_logs()
        finally:
            if cls.cp:
                cls.cp.stop()
            log(f"suite wall time {time.monotonic() - cls.t_suite:.1f}s "
                f"(control plane start-up {cls.cp.timings.get('startup_s', float('nan')):.1f}s)")
        if problems:
            raise AssertionError("gpusched extender: " + "; ".join(problems))

    @classmethod
    def _dump_class_logs(cls):
        if cls.cp:
            cls.cp.keep_dir = True  # a failure keeps every log for a look afterwards
        parts = []
        if cls.cp:
            parts.append(cls.cp.log_tails(40))
        for replica in (cls.ext, cls.second):
            if replica:
                parts.append(replica.tails(80))
        sys.stderr.write("\n".join(parts) + "\n")

    def dump_logs(self):
        self._dump_class_logs()
        try:
            pods = self.kube.list("pods")
            sys.stderr.write("----- pods -----\n")
            for p in pods:
                sys.stderr.write(f"{p['metadata']['name']}: node={p['spec'].get('nodeName')} "
                                 f"alloc={p['metadata'].get('annotations', {}).get(ALLOCATION_ANNOTATION)}\n")
        except Exception as e:  # noqa: BLE001 - best effort diagnostics
            sys.stderr.write(f"(cannot list pods: {e})\n")

    # -- helpers ----------------------------------------------------------------------------------------------

    def make_pool(self, pool, nodes, gpus):
        inventories = {}
        for i in range(nodes):
            name = f"{pool}-node-{i}"
            inventories[name] = self.kube.create_gpu_node(name, gpus=gpus, labels={POOL_LABEL: pool})
        return inventories

    def create_pod(self, name, limits, pool):
        return self.kube.create("pods", gpu_pod(name, limits, labels={POOL_LABEL: pool},
                                                node_selector={POOL_LABEL: pool}))

    def alive(self):
        self.ext.proc.check_alive()
        for name in ("kube-scheduler", "kube-apiserver"):
            self.cp.process(name).check_alive()

    def wait_bound(self, name, timeout=BIND_TIMEOUT):
        def bound():
            pod = self.kube.get("pods", name)
            return pod if pod and pod["spec"].get("nodeName") else None
        try:
            return Kube.wait_for(bound, timeout, what=f"pod {name} to be bound", on_poll=self.alive)
        except TimeoutError:
            msgs = [e.get("message") for e in self.kube.events_for(name)]
            raise AssertionError(f"pod {name} was not bound within {timeout}s; its events: {msgs}") from None

    def failed_scheduling(self, name):
        """The newest FailedScheduling message of the pod that comes from the extender's filter, or None.

        Messages of a failed extender call (connection refused while it restarts) do not count."""
        events = self.kube.events_for(name, reason="FailedScheduling")
        events.sort(key=lambda e: (e.get("lastTimestamp") or e.get("eventTime") or "", e["metadata"]["name"]))
        for e in reversed(events):
            msg = e.get("message") or e.get("note") or ""
            if "Post " in msg or "connection refused" in msg or "deadline exceeded" in msg:
                continue
            return msg
        return None

    def wait_bound_or_failed(self, name, timeout=BIND_TIMEOUT):
        """('bound', pod) or ('failed', FailedScheduling message), whichever kube-scheduler reports first."""
        def decided():
            pod = self.kube.get("pods", name)
            if pod and pod["spec"].get("nodeName"):
                return ("bound", pod)
            msg = self.failed_scheduling(name)
            if msg:
                return ("failed", msg)
            return None
        return Kube.wait_for(decided, timeout, what=f"pod {name} to be bound or to fail scheduling",
                             on_poll=self.alive)

    def assert_pending_with_reason(self, name, timeout=FAIL_TIMEOUT, numbers=True):
        """The pod fails scheduling with the extender's reason (naming a GPU, and with numbers=True giving milli
        or MiB figures), and stays unbound."""
        state, value = self.wait_bound_or_failed(name, timeout)
        if state == "bound":
            self.fail(f"pod {name} should not fit but was bound to {value['spec']['nodeName']} with "
                      f"{value['metadata'].get('annotations', {}).get(ALLOCATION_ANNOTATION)}")
        log(f"{name} FailedScheduling: {value}")
        self.assertIn("nodes are available", value, f"not a filter verdict: {value!r}")
        self.assertIn("GPU", value, f"the extender's reason should name the GPU: {value!r}")
        if numbers:
            self.assertTrue("milli" in value or "MiB" in value,
                            f"the extender's reason should give the numbers (milli or MiB): {value!r}")
        pod = self.kube.get("pods", name)
        self.assertFalse(pod["spec"].get("nodeName"), f"{name} got bound after a FailedScheduling event")
        # kube-scheduler retries it on every cluster event; audit() checks it stays pending for the whole suite.
        type(self).must_stay_pending.append(name)
        return value

    def audit(self):
        """Cluster-wide invariants over every pod's allocation; returns {(node, uuid): [milli, MiB, pods]}."""
        nodes = {n["metadata"]["name"]: json.loads(n["metadata"].get("annotations", {}).get(GPUS_ANNOTATION, "[]"))
                 for n in self.kube.list("nodes")}
        usage = collections.defaultdict(lambda: [0, 0, []])
        exclusive = collections.defaultdict(list)
        ids = collections.defaultdict(list)
        for pod in self.kube.list("pods"):
            name = pod["metadata"]["name"]
            text = pod["metadata"].get("annotations", {}).get(ALLOCATION_ANNOTATION)
            if not pod["spec"].get("nodeName"):
                self.assertIsNone(text, f"unbound pod {name} carries an allocation: {text}")
                continue
            if text is None and not requests_gpu(pod):
                continue
            alloc = self.allocation(pod)
            ids[alloc["id"]].append(name)
            inventory = {g["uuid"]: g for g in nodes.get(alloc["node"], [])}
            for c in alloc["containers"]:
                for g in c.get("gpus") or []:
                    inv = inventory.get(g.get("uuid"))
                    self.assertIsNotNone(inv, f"{name}: GPU {g} is not on node {alloc['node']}")
                    self.assertEqual(g.get("index"), inv["index"], f"{name}: index/uuid mismatch {g}")
                    u = usage[(alloc["node"], g["uuid"])]
                    u[0] += g.get("milli", 0)
                    u[1] += g.get("memory_mib", 0)
                    u[2].append(name)
                    if g.get("exclusive"):
                        exclusive[(alloc["node"], g["uuid"])].append(name)
        for (node, uuid), (milli, mib, pods) in usage.items():
            self.assertLessEqual(milli, 1000, f"{uuid} on {node} overcommitted in compute: {pods}")
            self.assertLessEqual(mib, GPU_MEMORY_MIB, f"{uuid} on {node} overcommitted in memory: {pods}")
        for key, holders in exclusive.items():
            self.assertEqual(usage[key][2], holders[:1],
                             f"exclusive GPU {key[1]} shared: exclusive for {holders}, used by {usage[key][2]}")
        for name in self.must_stay_pending:
            pod = self.kube.get("pods", name)
            self.assertFalse(pod["spec"].get("nodeName"),
                             f"{name} did not fit earlier and nothing was freed since, yet it was bound: "
                             f"{pod['metadata'].get('annotations', {}).get(ALLOCATION_ANNOTATION)}")
        dup = {i: p for i, p in ids.items() if len(p) > 1}
        self.assertFalse(dup, f"allocation ids are not unique: {dup}")
        return usage

    def log_usage(self, pool):
        usage = self.audit()
        for (node, uuid), (milli, mib, pods) in sorted(usage.items()):
            if node.startswith(pool + "-"):
                log(f"  {uuid}: {milli} milli, {mib} MiB, pods {sorted(pods)}")

    # -- tests ------------------------------------------------------------------------------------------------

    @dump_logs_on_failure
    def test_0_metrics_and_version(self):
        """/metrics passes `promtool check metrics` (Prometheus's naming rules); /version names the release."""
        for path in ("/metrics", "/version"):
            conn = self.ext.connection(timeout=5)
            try:
                conn.request("GET", path)
                r = conn.getresponse()
                body = r.read().decode()
            finally:
                conn.close()
            self.assertEqual(r.status, 200, body[:300])
            if path == "/metrics":
                self.assertIn("gpusched_extender_http_requests_total", body)
                self.assertEqual(monitoring_check.promtool_check_metrics(body), [])
            else:
                self.assertRegex(json.loads(body)["version"], r"^\d+\.\d+\.\d+$")

    @dump_logs_on_failure
    def test_1_share(self):
        """Six 30% / 20000 MiB pods on 2 nodes x 2 GPUs all bind, with valid allocations, never overcommitted."""
        pool = "share"
        self.make_pool(pool, nodes=2, gpus=2)
        names = [f"share-{i}" for i in range(6)]
        t0 = time.monotonic()
        for name in names:
            self.create_pod(name, SHARE, pool)
        for name in names:
            pod = self.wait_bound(name)
            self.assertTrue(pod["spec"]["nodeName"].startswith(pool + "-"), pod["spec"]["nodeName"])
            self.check_share_allocation(pod, SHARE)
        log(f"6 shared pods bound in {time.monotonic() - t0:.1f}s")
        self.log_usage(pool)
        # Each pod is told which GPU it got, where, and which allocation: the GPU its annotation names.
        for name in names:
            pod = self.kube.get("pods", name)
            alloc = json.loads(pod["metadata"]["annotations"][ALLOCATION_ANNOTATION])
            gpu = alloc["containers"][0]["gpus"][0]
            events = Kube.wait_for(lambda n=name: self.kube.events_for(n, reason="GPUsAssigned"), 10,
                                   what=f"the GPUsAssigned event of {name}")
            self.assertEqual(len(events), 1, events)
            e = events[0]
            self.assertEqual(e["type"], "Normal")
            self.assertEqual(e["source"]["component"], "gpusched-extender")
            self.assertEqual(e["involvedObject"]["uid"], pod["metadata"]["uid"])
            self.assertEqual(e["message"], f"gpusched assigned GPU {gpu['index']} (30%) on node "
                                           f"{pod['spec']['nodeName']} (allocation {alloc['id']})")
        log(f"share-0 event: {self.kube.events_for('share-0', reason='GPUsAssigned')[0]['message']}")

    @dump_logs_on_failure
    def test_2_capacity_exhaustion(self):
        """Pods are added one by one until one does not fit: 3 per GPU by compute, 12 on 4 GPUs; the 13th stays
        Pending with a FailedScheduling event that carries the extender's reason."""
        pool = "full"
        self.make_pool(pool, nodes=2, gpus=2)
        expected = 4 * (1000 // (SHARE["gpusched.io/gpu-core"] * 10))  # compute, not memory, runs out first
        t0 = time.monotonic()
        bound = 0
        for i in range(expected + 4):
            name = f"full-{i}"
            self.create_pod(name, SHARE, pool)
            state, value = self.wait_bound_or_failed(name)
            if state == "bound":
                self.check_share_allocation(value, SHARE)
                bound += 1
                continue
            log(f"{name} did not fit after {bound} bound pods ({time.monotonic() - t0:.1f}s)")
            self.assertEqual(bound, expected, f"expected {expected} pods to fit; the reason given: {value}")
            self.assert_pending_with_reason(name)
            break
        else:
            self.fail(f"{expected + 4} pods of 30% fit on 4 GPUs")
        self.log_usage(pool)
        # The pending pod is retried on every cluster event; it must still be pending after more pods came and went
        # elsewhere. Checked again at the end of the other tests through audit().

    @dump_logs_on_failure
    def test_3_whole_gpus(self):
        """nvidia.com/gpu pods get whole exclusive GPUs, never one that another pod holds, and vice versa."""
        pool = "whole"
        inv = self.make_pool(pool, nodes=2, gpus=2)
        share = self.wait_bound_after_create("whole-share-0", SHARE, pool)
        node_a = share["spec"]["nodeName"]
        node_b = next(n for n in inv if n != node_a)
        shared_uuid = self.allocation(share)["containers"][0]["gpus"][0]["uuid"]

        whole = self.wait_bound_after_create("whole-2gpu-0", {"nvidia.com/gpu": 2}, pool)
        alloc = self.allocation(whole)
        self.assertEqual(whole["spec"]["nodeName"], node_b,
                         f"2 whole GPUs only fit on {node_b} ({node_a} shares a GPU): {alloc}")
        gpus = alloc["containers"][0]["gpus"]
        self.assertEqual(len(gpus), 2, alloc)
        self.assertEqual(len({g["uuid"] for g in gpus}), 2, alloc)
        for g in gpus:
            self.assertTrue(g.get("exclusive"), f"nvidia.com/gpu must be exclusive: {alloc}")
        log(f"whole-2gpu-0 got {[(g['uuid'], g.get('milli'), g.get('memory_mib')) for g in gpus]}")

        # No node has 2 free whole GPUs now: kube-scheduler rejects node B (Insufficient nvidia.com/gpu), the
        # extender rejects node A (one of its GPUs is shared).
        self.create_pod("whole-2gpu-1", {"nvidia.com/gpu": 2}, pool)
        self.assert_pending_with_reason("whole-2gpu-1", numbers=False)

        one = self.wait_bound_after_create("whole-1gpu-0", {"nvidia.com/gpu": 1}, pool)
        alloc1 = self.allocation(one)
        self.assertEqual(one["spec"]["nodeName"], node_a, alloc1)
        g1 = alloc1["containers"][0]["gpus"]
        self.assertEqual(len(g1), 1, alloc1)
        self.assertTrue(g1[0].get("exclusive"), alloc1)
        self.assertNotEqual(g1[0]["uuid"], shared_uuid, f"exclusive GPU given while shared: {alloc1}")

        # A shared pod now fits only beside whole-share-0, never on an exclusive GPU.
        share2 = self.wait_bound_after_create("whole-share-1", SHARE, pool)
        a2 = self.check_share_allocation(share2, SHARE)
        self.assertEqual(a2["containers"][0]["gpus"][0]["uuid"], shared_uuid, a2)
        self.log_usage(pool)

    @dump_logs_on_failure
    def test_4_restart(self):
        """A killed and restarted extender rebuilds its state from the pods' allocation annotations."""
        pool = "restart"
        self.make_pool(pool, nodes=1, gpus=1)
        for i in range(3):
            pod = self.wait_bound_after_create(f"restart-{i}", SHARE, pool)
            self.check_share_allocation(pod, SHARE)
        before = {p["metadata"]["name"]: self.allocation(p)["id"] for p in self.kube.list("pods")
                  if p["spec"].get("nodeName")}
        self.ext.kill()
        ready_s = self.ext.start()
        log(f"extender killed and restarted, ready in {ready_s:.1f}s")

        # 900 milli are in use: 300 more would overcommit compute if the state were lost.
        self.create_pod("restart-over", SHARE, pool)
        self.assert_pending_with_reason("restart-over")
        # 100 milli and 20000 MiB fit exactly (1000 milli, 80000 of 81920 MiB).
        edge = {"gpusched.io/gpu": 1, "gpusched.io/gpu-memory": 20000, "gpusched.io/gpu-core": 10}
        pod = self.wait_bound_after_create("restart-edge", edge, pool)
        alloc = self.check_share_allocation(pod, edge)
        self.assertNotIn(alloc["id"], before.values(), f"allocation id reused after restart: {alloc}")
        # Now the GPU is full in compute; a 1% pod must not fit either.
        self.create_pod("restart-over-2", {"gpusched.io/gpu": 1, "gpusched.io/gpu-memory": 1000,
                                           "gpusched.io/gpu-core": 1}, pool)
        self.assert_pending_with_reason("restart-over-2")
        self.assertFalse(self.kube.get("pods", "restart-over")["spec"].get("nodeName"))
        self.log_usage(pool)

    @dump_logs_on_failure
    def test_4b_restart_under_load(self):
        """kill -9 of the extender while kube-scheduler streams GPU pods at it, and a restart that serves at once, as a
        container restarted under load does. Until the new process's pod and node caches synced its verbs refuse
        (an error: kube-scheduler fails the cycle and retries the pod), so no GPU is allocated twice: exactly the 12
        pods that fit (3 per GPU by compute) are bound, each by one Binding, no GPU over 1000 milli or its memory, and
        the other 4 fail with the filter's reason."""
        pool = "stream"
        self.make_pool(pool, nodes=2, gpus=2)
        names = [f"stream-{i}" for i in range(16)]
        created = []

        def create(upto):
            for n in names[len(created):upto]:
                self.create_pod(n, SHARE, pool)
                created.append(n)

        def bound(n):
            pod = self.kube.get("pods", n)
            return bool(pod and pod["spec"].get("nodeName"))

        create(8)
        Kube.wait_for(lambda: sum(bound(n) for n in created) >= 3, BIND_TIMEOUT, what="3 stream pods bound",
                      on_poll=self.alive)
        self.ext.kill()  # binds in flight may or may not land
        self.ext.start(ready=False)
        create(len(names))  # the rest arrive while it starts
        got, body = self.ext.readyz()
        log(f"restarted extender, at once: /readyz {got} {body.strip()[:200]}")
        self.ext.wait_readyz(200, timeout=LEASE_S + 30)

        def filter_verdict(n):
            """The pod's newest FailedScheduling that is the extender's filter verdict (not a refused or failed
            call: connection refused while it restarts, a 503 while it syncs or stands by)."""
            msg = self.failed_scheduling(n)
            return msg if msg and "nodes are available" in msg and "code 503" not in msg else None

        def decided():
            return all(bound(n) or filter_verdict(n) for n in names) and sum(bound(n) for n in names) >= 12

        # kube-scheduler 1.20 keeps a pod whose cycle failed (connection refused, a 503 while syncing, a bind that
        # lost a race) among its unschedulable pods for a minute unless a cluster event moves it: a change to a
        # node's labels is one. Nudge every 10 s until every pod is decided.
        nudges = [0, 0.0]

        def nudge():
            self.alive()
            if time.monotonic() - nudges[1] >= 10:
                nudges[0] += 1
                nudges[1] = time.monotonic()
                self.kube.patch("nodes", f"{pool}-node-0",
                                {"metadata": {"labels": {"gpusched-e2e/nudge": str(nudges[0])}}})
        Kube.wait_for(decided, 120, interval=0.5, what="every stream pod bound or refused by the filter",
                      on_poll=nudge)
        placed = [n for n in names if bound(n)]
        log(f"after the restart under load: {len(placed)} of {len(names)} stream pods bound")
        self.assertEqual(len(placed), 12, f"bound: {placed}")
        for n in names:
            if n not in placed:
                type(self).must_stay_pending.append(n)
        for n in placed:
            self.check_share_allocation(self.kube.get("pods", n), SHARE)

        # One Binding took effect per pod (kube-apiserver's audit log). A Binding in flight at the SIGKILL may be
        # logged as refused although it committed: a pod with a single Binding, and bound, was bound by it.
        sent = {n: [] for n in placed}

        def recorded():
            for n in sent:
                sent[n] = []
            for r in rbac_audit.requests_of(rbac_audit.read_audit_log(self.cp.audit_log), None):
                if r.resource == "pods/binding" and r.verb == "create" and r.name in sent:
                    sent[r.name].append((r.user, r.code))
            return all(sent.values())
        try:
            wait_until(recorded, 10, interval=0.2, what="the stream pods' Bindings in the audit log")
        except TimeoutError:
            pass  # the assertion below names the pods

        def effective(n):
            ok = [b for b in sent[n] if 200 <= b[1] < 300]
            return ok if ok or len(sent[n]) != 1 else sent[n]
        wrong = {n: sent[n] for n in placed if len(effective(n)) != 1}
        self.assertFalse(wrong, f"pods not bound by exactly one Binding (user, HTTP status): {wrong}")
        conn = self.ext.connection(timeout=10)
        try:
            conn.request("GET", "/metrics")
            metrics = conn.getresponse().read().decode(errors="replace")
        finally:
            conn.close()
        refused = [line for line in metrics.splitlines() if line.startswith("gpusched_extender_unsynced_refusals")]
        log(f"calls the restarted extender refused before its caches synced: {refused or 'none'}")
        self.log_usage(pool)

    @dump_logs_on_failure
    def test_5_pod_without_gpu(self):
        """A pod that asks for no managed resource never reaches the extender: kube-scheduler binds it itself."""
        pool = "plain"
        self.make_pool(pool, nodes=1, gpus=1)
        pod = self.wait_bound_after_create("plain-0", {}, pool)
        self.assertNotIn(ALLOCATION_ANNOTATION, pod["metadata"].get("annotations", {}), pod["metadata"])
        self.audit()

    @dump_logs_on_failure
    def test_6_multi_container(self):
        """Each GPU container of a pod gets its own entry in the allocation; a container without GPU gets none."""
        pool = "multi"
        self.make_pool(pool, nodes=1, gpus=2)
        trainer = {"gpusched.io/gpu": 2, "gpusched.io/gpu-memory": 10000, "gpusched.io/gpu-core": 50}
        helper = {"gpusched.io/gpu": 1, "gpusched.io/gpu-memory": 30000, "gpusched.io/gpu-core": 40}
        pod = gpu_pod("multi-0", trainer, labels={POOL_LABEL: pool}, node_selector={POOL_LABEL: pool})
        base = pod["spec"]["containers"][0]
        pod["spec"]["containers"] = [
            dict(base, name="trainer"),
            dict(base, name="helper", resources={"limits": {k: str(v) for k, v in helper.items()}}),
            dict(base, name="sidecar", resources={"requests": {"cpu": "50m"}}),
        ]
        pod["spec"]["initContainers"] = [dict(base, name="init", resources={"requests": {"cpu": "50m"}})]
        self.kube.create("pods", pod)
        bound = self.wait_bound("multi-0")
        alloc = self.allocation(bound)
        log(f"multi-0 allocation: {json.dumps(alloc)}")
        by_name = {c.get("name"): c.get("gpus") or [] for c in alloc["containers"]}
        self.assertEqual(len(by_name.get("trainer", [])), 2, alloc)
        self.assertEqual({g["index"] for g in by_name["trainer"]}, {0, 1}, alloc)
        for g in by_name["trainer"]:
            self.assertEqual((g.get("milli"), g.get("memory_mib"), bool(g.get("exclusive"))), (500, 10000, False),
                             alloc)
        self.assertEqual(len(by_name.get("helper", [])), 1, alloc)
        g = by_name["helper"][0]
        self.assertEqual((g.get("milli"), g.get("memory_mib"), bool(g.get("exclusive"))), (400, 30000, False), alloc)
        self.assertFalse(by_name.get("sidecar"), f"a container without GPU got GPUs: {alloc}")
        self.assertFalse(by_name.get("init"), f"an init container without GPU got GPUs: {alloc}")
        self.audit()

    @dump_logs_on_failure
    def test_7_interference_aware(self):
        """Pods annotated with their application class and gpusched.io/policy interference-aware: the first two
        take empty GPUs, a Transformer joins the Recommendation model (its measured best partner) rather than the
        ResNet-50, and a second ResNet-50 (batch 128), which does not fit in memory next to the first, stays
        Pending with the model's reason."""
        if not self.interference_model:
            self.skipTest("no co-location data in ../shared/data/interference to train the model")
        pool = "colo"
        for i in range(2):
            self.kube.create_gpu_node(f"{pool}-node-{i}", gpus=1, labels={POOL_LABEL: pool},
                                      model="Tesla-P100-PCIE-16GB", gpu_memory_mib=16384)
        half = {"gpusched.io/gpu": 1, "gpusched.io/gpu-memory": 4000, "gpusched.io/gpu-core": 50}

        def create(name, app):
            self.kube.create("pods", gpu_pod(name, half, labels={POOL_LABEL: pool}, node_selector={POOL_LABEL: pool},
                                             annotations={"gpusched.io/policy": "interference-aware",
                                                          "gpusched.io/app": app}))

        self.colocation_scenario(create, lambda name: self.wait_bound(name)["spec"]["nodeName"],
                                 lambda name: self.assert_pending_with_reason(name, numbers=False))
        self.audit()

    def post_bind(self, body, context):
        """POSTs a bind to the extender with that TLS client context: (status, text), or (None, why) when the
        connection was refused (a failed TLS handshake)."""
        conn = self.ext.connection(timeout=10, context=context)
        try:
            conn.request("POST", PATH_PREFIX + "/bind", body=json.dumps(body),
                         headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            return r.status, r.read().decode(errors="replace")
        except (ssl.SSLError, OSError, http.client.HTTPException) as e:
            return None, f"{type(e).__name__}: {e}"
        finally:
            conn.close()

    @dump_logs_on_failure
    def test_8_attacks(self):
        """Binds kube-scheduler did not ask for, sent straight to the extender: without a client certificate, with
        one of another CA or a name not allowed, without PodUID, to a node the pod never passed filter on, for a
        pod already bound, for another scheduler's pod. Each is refused, and every target pod stays as it was."""
        pool = "attack"
        inv = self.make_pool(pool, nodes=2, gpus=1)
        # Bound by kube-scheduler through the extender: the target of "move a bound pod".
        bound = self.wait_bound_after_create("attack-bound", SHARE, pool)
        bound_node = bound["spec"]["nodeName"]
        other_node = next(n for n in sorted(inv) if n != bound_node)
        bound_alloc = bound["metadata"]["annotations"][ALLOCATION_ANNOTATION]
        # Pending with GPU room for it on other_node, but kube-scheduler never asks the extender about it (its
        # nodeSelector matches no node): a bind of it is one kube-scheduler never decided.
        pending = self.kube.create("pods", gpu_pod("attack-pending", SHARE, labels={POOL_LABEL: pool},
                                                   node_selector={POOL_LABEL: "attack-nowhere"}))
        # Another scheduler's pod, on the pool's nodes; nobody runs that scheduler.
        foreign = gpu_pod("attack-foreign", SHARE, labels={POOL_LABEL: pool}, node_selector={POOL_LABEL: pool})
        foreign["spec"]["schedulerName"] = "gpusched-e2e-nobody"
        foreign = self.kube.create("pods", foreign)

        def body(pod, node, uid=True):
            b = {"PodName": pod["metadata"]["name"], "PodNamespace": "default", "Node": node}
            if uid:
                b["PodUID"] = pod["metadata"]["uid"]
            return b

        tls = self.tls
        as_scheduler = tls.scheduler_context()
        # (what, client context, bind body, expected status (None: refused at the TLS handshake), text in Error)
        cases = [
            ("a. no client certificate", tls.context(), body(pending, other_node), {None, 403}, None),
            ("b. CN=kube-scheduler from another CA", tls.context(tls.rogue_crt, tls.rogue_key),
             body(pending, other_node), {None, 403}, None),
            ("b2. the extender's CA, a name not allowed", tls.context(tls.intruder_crt, tls.intruder_key),
             body(pending, other_node), {403}, None),
            ("c. kube-scheduler's certificate, no PodUID", as_scheduler, body(pending, other_node, uid=False), {400},
             "PodUID is required"),
            ("d. a node the pod never passed filter on", as_scheduler, body(pending, other_node), {403},
             "did not pass gpusched's filter for this pod"),
            ("e. a pod already bound, to another node", as_scheduler, body(bound, other_node), {409},
             f"already bound to node {bound_node}"),
            ("f. another scheduler's pod", as_scheduler, body(foreign, other_node), {403},
             "schedulerName is gpusched-e2e-nobody"),
        ]
        for what, ctx, b, statuses, text in cases:
            deadline = time.monotonic() + 15
            while True:
                status, answer = self.post_bind(b, ctx)
                # Right after creation the extender's watch may not have the pod yet: that refusal proves nothing.
                if status == 404 and "pod cache" in answer and time.monotonic() < deadline:
                    time.sleep(0.2)
                    continue
                break
            log(f"attack {what}: {status} {answer.strip()[:200]}")
            self.assertIn(status, statuses, f"{what}: answered {status} {answer}")
            if status is not None and status != 403:
                error = json.loads(answer).get("Error", "")
                self.assertIn(text, error, f"{what}: {answer}")
                self.assertIn(f"pod default/{b['PodName']} to node {b['Node']} refused", error, what)

        # The pods gpusched could identify hear why their binds were refused; the pod-less refusals (a, b, c) tell
        # nobody. The same refusal again is no new Event: it raises the first one's count.
        self.post_bind(cases[4][2], as_scheduler)

        def refusals(name, want_count=1):
            got = self.kube.events_for(name, reason="GPUBindRefused")
            return got if got and max(e.get("count", 1) for e in got) >= want_count else None
        pending_events = Kube.wait_for(lambda: refusals("attack-pending", 2), 15,
                                       what="attack-pending's GPUBindRefused events, one counted twice")
        by_message = {e["message"]: e for e in pending_events}
        self.assertEqual(len(by_message), len(pending_events), "a repeat was written as a new Event")
        twice = [e for e in pending_events if e.get("count", 1) == 2]
        self.assertEqual(len(twice), 1, pending_events)
        self.assertIn("did not pass gpusched's filter for this pod", twice[0]["message"])
        self.assertEqual(twice[0]["type"], "Warning")
        for e in pending_events:
            self.assertNotIn("PodUID is required", e["message"])  # c named no uid: not the pod's to hear
        for name, text in (("attack-bound", "already bound to node"), ("attack-foreign", "schedulerName is")):
            got = Kube.wait_for(lambda n=name: refusals(n), 15, what=f"{name}'s GPUBindRefused event")
            self.assertIn(text, got[0]["message"])
        log(f"attack-pending events: {[(e['count'], e['message'][:90]) for e in pending_events]}")

        # Nothing moved: the pending pods are unbound without an allocation, the bound one where it was.
        time.sleep(1)  # a bind that went through would show by now
        for pod in (pending, foreign):
            now = self.kube.get("pods", pod["metadata"]["name"])
            self.assertFalse(now["spec"].get("nodeName"), f"{pod['metadata']['name']} got bound: {now['spec']}")
            self.assertNotIn(ALLOCATION_ANNOTATION, now["metadata"].get("annotations") or {}, now["metadata"])
            type(self).must_stay_pending.append(pod["metadata"]["name"])
        now = self.kube.get("pods", "attack-bound")
        self.assertEqual(now["spec"]["nodeName"], bound_node)
        self.assertEqual(now["metadata"]["annotations"][ALLOCATION_ANNOTATION], bound_alloc)
        self.audit()

    @dump_logs_on_failure
    def test_9_leader_election(self):
        """Two replicas on one Lease: the second stands by (not ready; a bind sent to it is refused naming the
        leader, and changes nothing). kill -9 of the leader: the standby takes over once the lease ran out. The old
        leader, restarted, stands by; the new one stopped with SIGTERM hands the Lease back at once, and a pod
        kube-scheduler could not bind meanwhile (its extender was a standby) binds after the handover."""
        leader = self.kube.call("GET", LEASE_PATH)["spec"]["holderIdentity"]
        self.assertTrue(leader)
        second = Extender(os.environ["GPUSCHED_BIN"], self.cp.dir, self.ext.kubeconfig, free_port(), tls=self.tls,
                          name="extender-b", leader_election=True)
        type(self).second = second
        second.start(ready=False)
        # Until its first look at the Lease the standby says "leader: none yet"; wait for it to name the holder.
        body = second.wait_readyz(503, timeout=20, text=f"standby (leader: {leader})")
        self.assertIn(leader, body)

        # A bind sent to the standby: refused before anything happens.
        pending = self.kube.create("pods", gpu_pod("ha-pending", SHARE, labels={POOL_LABEL: "ha"},
                                                   node_selector={POOL_LABEL: "ha-nowhere"}))
        conn = second.connection(timeout=10)
        try:
            conn.request("POST", PATH_PREFIX + "/bind", headers={"Content-Type": "application/json"},
                         body=json.dumps({"PodName": "ha-pending", "PodNamespace": "default",
                                          "PodUID": pending["metadata"]["uid"], "Node": "anywhere"}))
            r = conn.getresponse()
            status, answer = r.status, r.read().decode(errors="replace")
        finally:
            conn.close()
        log(f"bind sent to the standby: {status} {answer.strip()[:200]}")
        self.assertEqual(status, 503, answer)
        self.assertIn(f"standby (leader: {leader})", json.loads(answer)["Error"])
        type(self).must_stay_pending.append("ha-pending")

        # kill -9 of the leader: the standby leads after the lease ran out (and its settle time).
        transitions = self.kube.call("GET", LEASE_PATH)["spec"].get("leaseTransitions", 0)
        self.ext.kill()
        t0 = time.monotonic()
        second.wait_readyz(200, timeout=LEASE_S + 15)
        failover_s = time.monotonic() - t0
        lease = self.kube.call("GET", LEASE_PATH)["spec"]
        log(f"failover after kill -9 of the leader: {failover_s:.1f}s (lease {LEASE_S}s); lease now {lease}")
        self.assertNotEqual(lease["holderIdentity"], leader)
        self.assertEqual(lease.get("leaseTransitions", 0), transitions + 1)
        self.assertLess(failover_s, LEASE_S + 1 + 1 + 5, "takeover took longer than lease + retry + settle + slack")

        # The old leader comes back as a standby; kube-scheduler (which calls it) cannot bind through it.
        self.ext.start(ready=False)
        self.ext.wait_readyz(503, timeout=20, text="standby")
        pool = "ha"
        self.make_pool(pool, nodes=1, gpus=1)
        self.create_pod("ha-0", SHARE, pool)
        time.sleep(2)
        self.assertFalse(self.kube.get("pods", "ha-0")["spec"].get("nodeName"), "bound through a standby")

        # SIGTERM to the new leader: it releases the Lease; the restarted one leads at its next attempt.
        second.stop()
        t1 = time.monotonic()
        self.ext.wait_readyz(200, timeout=LEASE_S + 15)
        handover_s = time.monotonic() - t1
        log(f"handover after SIGTERM of the leader: {handover_s:.1f}s")
        self.assertLess(handover_s, LEASE_S, "a released lease should pass at the standby's next attempt")
        # kube-scheduler keeps a pod whose bind failed among its unschedulable pods until a cluster event (or a
        # minute in 1.20): a new node is one.
        self.make_pool("ha-nudge", nodes=1, gpus=1)
        pod = self.wait_bound("ha-0", timeout=BIND_TIMEOUT)
        self.check_share_allocation(pod, SHARE)
        self.assertEqual(second.shutdown_problems(), [])
        self.audit()

    def wait_bound_after_create(self, name, limits, pool):
        self.create_pod(name, limits, pool)
        return self.wait_bound(name)


    @dump_logs_on_failure
    def test_10_keti_seed_pods_share_one_gpu(self):
        """Two verbatim KETI seed pods (keti.com/mpsgpu 1, cpu 250m, memory 6400Mi, hostIPC, /tmp/nvidia-mps) on a
        node of one GPU, through kube-scheduler and the extender: both bind to that GPU as MPS shares."""
        pool = "keti"
        self.make_pool(pool, nodes=1, gpus=1)
        names = ["keti-ext-0", "keti-ext-1"]
        for name in names:
            self.kube.create("pods", keti_seed_pod(name, labels={POOL_LABEL: pool}, node_selector={POOL_LABEL: pool}))
        uuids = set()
        for name in names:
            pod = self.wait_bound(name)
            alloc = json.loads(pod["metadata"]["annotations"][ALLOCATION_ANNOTATION])
            gpus = [g for c in alloc["containers"] for g in c.get("gpus") or []]
            self.assertEqual(len(gpus), 1, alloc)
            self.assertFalse(gpus[0].get("exclusive"), f"keti.com/mpsgpu is an MPS share: {alloc}")
            uuids.add(gpus[0]["uuid"])
        self.assertEqual(len(uuids), 1, "both on the node's one GPU")
        log(f"2 KETI seed pods share {uuids.pop()} through the extender")
        for name in names:
            self.kube.delete("pods", name, grace=0)

if __name__ == "__main__":
    unittest.main(verbosity=2)
