"""End-to-end: `gpusched scheduler`, gpusched's own scheduler, schedules GPU pods against a real kube-apiserver.

Runs etcd and kube-apiserver on loopback without kube-scheduler (control_plane.py, kube_scheduler=False), fake GPU
nodes (Node objects) and `$GPUSCHED_BIN scheduler` with deploy/base/scheduler/scheduler.yaml's configuration (the ConfigMap's
file, with the listen address and shorter lease timings replaced) and exactly that file's RBAC permissions (a client
certificate for the ServiceAccount's user name; rbac_audit.py compares them with the requests it made at the end).
Every pod has spec.schedulerName gpusched; each test has its own pool of nodes (label gpusched-e2e/pool, matched by
the pods' nodeSelector), so tests do not depend on each other's deletions.

  0. deploy/base/scheduler/scheduler.yaml passes the apiserver's validation (server-side dry run).
  1. fractional sharing: three 30% / 20000 MiB pods share one GPU, each with an allocation and a Scheduled event.
  2. priority: with no node, a low- and a high-priority pod both fail (FailedScheduling, PodScheduled=False
     Unschedulable); a node with one GPU appears: the high one binds, the low one stays pending.
  3. node predicates: taints and tolerations, a cordoned node, nodeSelector, required node affinity (In), a cpu
     request no node has (Insufficient cpu), a pod created with spec.nodeName left alone.
  4. inter-pod constraints: replicas with required podAntiAffinity go to different zones and the one that does not
     fit binds once a replica leaves; required podAffinity waits for its peer; DoNotSchedule topology spread
     balances the zones; a term with a namespaceSelector counts the pods of the namespaces whose labels match.
  5. a GPU freed by a deletion goes to the pending pod within 1 s (RESULT freed_to_bound_s=...).
  6. two replicas on one Lease: kill -9 of the leader, the standby binds new pods within lease + 10 s.
  7. kill -9 while 20 pods are being bound, restart: all 20 end bound, no GPU overcommitted, each bound once.
  8. share preemption: a pod of high priority evicts the one low-priority share that no PodDisruptionBudget
     protects (Eviction API, nominatedNodeName, Preempted event) and binds; a budget refuses the next eviction.
  9. host ports and extended resources: a second pod on a bound host port, or asking for an FPGA the node has no
     more of, stays pending with kube-scheduler's reason.
After every test, audit() checks every pod of the cluster (allocations valid and within each GPU's capacity, unique
ids, pods that did not fit still pending); tests 6 and 7 also count the bindings in kube-apiserver's audit log.

Tests 6 and 7 stop the suite's scheduler (SIGTERM) and start it again afterwards. All replicas use the Lease name of
deploy/base/scheduler/scheduler.yaml (gpusched-scheduler): its Role grants get and update on that name only.

Environment:
  GPUSCHED_BIN        the gpusched binary (required; the tests skip without it or without its `scheduler` verb)
  GPUSCHED_K8S_BIN    directory with kube-apiserver (and kube-scheduler, unused here; else scripts/build-k8s.sh --check)
  GPUSCHED_ETCD       etcd binary (else etcd on PATH)
  GPUSCHED_E2E_KEEP   keep the temporary directory (logs, certs, configs, audit log) after the run
  GPUSCHED_E2E_TMPDIR where to make that directory (default $TMPDIR or /tmp)
  GPUSCHED_E2E_SCHEDULER_ADMIN  run the scheduler as cluster admin instead of with deploy/base/scheduler/scheduler.yaml's RBAC
  GPUSCHED_E2E_RBAC_PARTIAL     report RBAC grants left unused without failing (when running some tests only)

Run: cd tests/e2e && GPUSCHED_BIN=... python3 -m unittest -v test_scheduler
"""

import collections
import functools
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import unittest
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from control_plane import (REPO_ROOT, ControlPlane, Process, find_etcd, find_k8s_bin, free_port,  # noqa: E402
                           lab_binary, wait_until, write_kubeconfig)
from allocation_checks import AllocationChecks  # noqa: E402
from kube import (ALLOCATION_ANNOTATION, GPU_MEMORY_MIB, GPUS_ANNOTATION, Kube, KubeError, gpu_pod,  # noqa: E402
                  keti_seed_pod)
import monitoring_check  # noqa: E402
import rbac_audit  # noqa: E402

POOL_LABEL = "gpusched-e2e/pool"
ZONE_LABEL = "gpusched-e2e/zone"
SCHEDULER_NAME = "gpusched"  # deploy/base/scheduler/scheduler.yaml's schedulerNames
SHARE = {"gpusched.io/gpu": 1, "gpusched.io/gpu-memory": 20000, "gpusched.io/gpu-core": 30}
WHOLE = {"nvidia.com/gpu": 1}
BIND_TIMEOUT = 30
FAIL_TIMEOUT = 30
# Short lease timings so that a failover fits in a test (deploy/ has 15/10/2).
LEASE_S, RENEW_S, RETRY_S = 4, 3, 1
LEASE_NAME = "gpusched-scheduler"  # deploy/base/scheduler/scheduler.yaml: its Role grants get and update on this name only
LEASE_PATH = f"/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/{LEASE_NAME}"
DEPLOY = os.path.join(REPO_ROOT, "deploy", "base", "scheduler", "scheduler.yaml")
QUEUE_CRD = os.path.join(REPO_ROOT, "deploy", "base", "scheduler", "gpuqueue-crd.yaml")
QUEUES = "/apis/gpusched.io/v1alpha1/gpuqueues"
PODGROUPS = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups"
# The coscheduling plugin's PodGroup API as far as gpusched reads it (spec.minMember): a stand-in for the
# scheduler-plugins CRD, which users install with that plugin; gpusched never ships or requires it.
PODGROUP_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "podgroups.scheduling.x-k8s.io"},
    "spec": {"group": "scheduling.x-k8s.io", "scope": "Namespaced",
             "names": {"plural": "podgroups", "singular": "podgroup", "kind": "PodGroup", "listKind": "PodGroupList"},
             "versions": [{"name": "v1alpha1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                               "spec": {"type": "object", "properties": {
                                   "minMember": {"type": "integer", "format": "int32"}}}}}}}]}}
ADMIN_ENV = "GPUSCHED_E2E_SCHEDULER_ADMIN"
ADMIN_USER = "gpusched-e2e-admin"  # the CN of control_plane.Pki's admin certificate


def log(msg):
    sys.stderr.write(f"[e2e-scheduler {time.strftime('%H:%M:%S')}] {msg}\n")
    sys.stderr.flush()


def _skip_reason():
    for _, why in (find_k8s_bin(), find_etcd()):
        if why:
            return why
    binary = os.environ.get("GPUSCHED_BIN")
    if not binary:
        return "GPUSCHED_BIN is unset (ctest sets it to the gpusched target)"
    if not os.access(binary, os.X_OK):
        return f"GPUSCHED_BIN={binary} is not an executable file"
    try:
        res = subprocess.run([binary, "scheduler", "--help"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{binary} scheduler --help failed: {e}"
    # CLI11 answers --help of the main app (exit 0) when the subcommand does not exist: look at the usage line.
    if res.returncode != 0 or not re.search(r"(?m)^Usage: \S+ scheduler\b", res.stdout + res.stderr):
        out = (res.stdout + res.stderr).strip().splitlines()
        return f"{binary} has no `scheduler` subcommand yet (`scheduler --help` printed: {out[:2]})"
    return None


SKIP_REASON = _skip_reason()


# -- deploy/base/scheduler/scheduler.yaml ------------------------------------------------------------------------------------------


def deploy_documents():
    """deploy/base/scheduler/scheduler.yaml's documents (text), in file order."""
    with open(DEPLOY) as f:
        return [d for d in re.split(r"(?m)^---[ \t]*$", f.read()) if re.search(r"(?m)^kind:", d)]


def deploy_scheduler_config():
    """The scheduler's config file as the ConfigMap of deploy/base/scheduler/scheduler.yaml holds it."""
    cm = [d for d in deploy_documents() if re.search(r"(?m)^kind:[ \t]*ConfigMap[ \t]*$", d)]
    if len(cm) != 1:
        raise AssertionError(f"deploy/base/scheduler/scheduler.yaml: expected one ConfigMap, found {len(cm)}")
    m = re.search(r"(?m)^  scheduler\.yaml: \|\n((?:    .*\n|[ \t]*\n)+)", cm[0] + "\n")
    if not m:
        raise AssertionError("deploy/base/scheduler/scheduler.yaml: the ConfigMap has no `scheduler.yaml: |` block")
    return "".join(line[4:] + "\n" for line in m.group(1).splitlines())


def scheduler_config(port, leader_election=True):
    """deploy/'s config with the listen address on loopback, leader election on or off and the short timings."""
    text = deploy_scheduler_config()
    subs = [(r'(?m)^listen:.*$', f'listen: "127.0.0.1:{port}"'),
            (r'(?m)^(schedulerNames: \[[^\]\n]*\b' + SCHEDULER_NAME + r'\b[^\]\n]*\]).*$', r'\g<1>'),
            (r'(?m)^([ \t]+enabled:).*$', r'\g<1> ' + ("true" if leader_election else "false")),
            (r'(?m)^([ \t]+namespace:)[ \t]*kube-system\b.*$', r'\g<1> kube-system'),
            (r'(?m)^([ \t]+name:)[ \t]*' + LEASE_NAME + r'\b.*$', r'\g<1> ' + LEASE_NAME),
            (r'(?m)^([ \t]+leaseDurationSeconds:).*$', rf'\g<1> {LEASE_S}'),
            (r'(?m)^([ \t]+renewDeadlineSeconds:).*$', rf'\g<1> {RENEW_S}'),
            (r'(?m)^([ \t]+retryPeriodSeconds:).*$', rf'\g<1> {RETRY_S}')]
    for pattern, repl in subs:
        text, n = re.subn(pattern, repl, text)
        if n != 1:
            raise AssertionError(f"deploy/base/scheduler/scheduler.yaml's config: expected one match of {pattern!r}, found {n}")
    return text


# -- talking to a scheduler -------------------------------------------------------------------------------------------


def http_get(port, path, timeout=2):
    """(status, body) of a plain GET on 127.0.0.1; (None, why) while nothing answers."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.read().decode(errors="replace")
    except (OSError, http.client.HTTPException) as e:
        return None, f"{type(e).__name__}: {e}"
    finally:
        conn.close()


_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})?\s+(\S+)')


def parse_metrics(text):
    """[(name, {label: value}, float)] of a Prometheus text exposition."""
    out = []
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if not m or line.startswith("#"):
            continue
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        try:
            out.append((m.group(1), labels, float(m.group(3))))
        except ValueError:
            continue
    return out


class Scheduler:
    """`gpusched scheduler` as a child process with its own config and loopback port (kept across restarts)."""

    # Sanitizer reports (the asan build); LeakSanitizer also turns the exit status non-zero.
    SANITIZER = re.compile(r"ERROR: (AddressSanitizer|LeakSanitizer)|ThreadSanitizer|runtime error:")

    def __init__(self, binary, workdir, kubeconfig, name="scheduler", leader_election=True):
        self.binary, self.workdir, self.kubeconfig, self.name = binary, workdir, kubeconfig, name
        self.port = free_port()
        self.config = os.path.join(workdir, f"{name}.yaml")
        with open(self.config, "w") as f:
            f.write(scheduler_config(self.port, leader_election))
        self.proc = None
        self.extra_args = []  # more command-line arguments
        self.runs = []  # every Process started, for logs
        self.killed = set()  # runs SIGKILLed on purpose
        self.up = False  # meant to be running (tests fail fast when it dies)

    def start(self, timeout=60, ready=True):
        """Starts a new run and, with `ready`, waits for /readyz 200; returns the seconds taken."""
        t0 = time.monotonic()
        n = len(self.runs) + 1
        self.proc = Process(f"gpusched-{self.name}-{n}",
                            [self.binary, "scheduler", "--config", self.config, "--kubeconfig", self.kubeconfig, "-v",
                             *self.extra_args],
                            os.path.join(self.workdir, f"{self.name}-{n}.log"))
        self.runs.append(self.proc)
        self.up = True
        if ready:
            self.wait_readyz(200, timeout)
        return time.monotonic() - t0

    def readyz(self):
        return http_get(self.port, "/readyz")

    def wait_readyz(self, status, timeout=30):
        seen = []

        def check():
            got, body = self.readyz()
            seen[:] = [f"{got} {body.strip()[:200]}"]
            return got == status
        try:
            wait_until(check, timeout, interval=0.1, what=f"{self.name} /readyz {status}", alive=[self.proc])
        except TimeoutError as e:
            raise TimeoutError(f"{e}; last answer: {seen[0] if seen else None}") from None
        return seen[0]

    def metrics(self):
        status, body = http_get(self.port, "/metrics", timeout=5)
        if status != 200:
            raise AssertionError(f"{self.name} GET /metrics: {status} {body[:200]}")
        return parse_metrics(body)

    def stop(self):
        self.up = False
        if self.proc:
            self.proc.stop()

    def kill(self):
        self.up = False
        if self.proc:
            self.killed.add(self.proc)
            self.proc.kill()

    def check_alive(self):
        if self.up and self.proc:
            self.proc.check_alive()

    def log_text(self, proc=None):
        try:
            with open((proc or self.proc).log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def shutdown_problems(self):
        """What went wrong with this scheduler's runs, judged from exit statuses and logs after stop()."""
        problems = []
        for p in self.runs:
            rc = p.proc.returncode
            if p not in self.killed and rc not in (0, -signal.SIGTERM):
                problems.append(f"{p.name} exited with status {rc} after SIGTERM (see {p.log_path})")
            m = self.SANITIZER.search(self.log_text(p))
            if m:
                problems.append(f"{p.name}: sanitizer report '{m.group(0)}' in {p.log_path}")
        return problems

    def tails(self, lines=80):
        return "\n".join(f"----- {p.name} ({p.log_path}), last {lines} lines -----\n{p.tail(lines)}"
                         for p in self.runs)


class BindWatcher:
    """Watches the pods of a pool and calls `fire` (once, on its own thread) as soon as `threshold` of them are
    bound: a kill at that moment lands in the middle of a burst of binds, which polling would overshoot."""

    def __init__(self, kube, pool, threshold, fire):
        self.kube, self.pool, self.threshold, self.fire = kube, pool, threshold, fire
        self.bound = set()
        self.fired_at = None  # (monotonic time, pods bound then)
        self.error = None
        selector = f"{POOL_LABEL}={pool}"
        listing = kube.call("GET", "/api/v1/namespaces/default/pods?" +
                            urllib.parse.urlencode({"labelSelector": selector}))
        self.bound = {p["metadata"]["name"] for p in listing["items"] if p["spec"].get("nodeName")}
        self.conn = http.client.HTTPSConnection(kube.host, kube.port, timeout=120, context=kube.ctx)
        self.conn.request("GET", "/api/v1/namespaces/default/pods?" + urllib.parse.urlencode(
            {"labelSelector": selector, "watch": "1", "resourceVersion": listing["metadata"]["resourceVersion"]}))
        self.response = self.conn.getresponse()
        if self.response.status != 200:
            raise AssertionError(f"watch of pool {pool}: HTTP {self.response.status}")
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            while self.fired_at is None:
                line = self.response.readline()
                if not line:
                    return
                event = json.loads(line)
                pod = event.get("object") or {}
                if event.get("type") in ("ADDED", "MODIFIED") and (pod.get("spec") or {}).get("nodeName"):
                    self.bound.add(pod["metadata"]["name"])
                if len(self.bound) >= self.threshold:
                    self.fired_at = (time.monotonic(), len(self.bound))
                    self.fire()
        except Exception as e:  # noqa: BLE001 - reported by the test
            self.error = e

    def close(self):
        try:
            if self.conn.sock:
                self.conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.conn.close()
        self.thread.join(timeout=5)


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


def event_order(e):
    """Events sort by their last write (etcd's revision, global across kinds)."""
    try:
        return int(e["metadata"].get("resourceVersion") or 0)
    except ValueError:
        return 0


@unittest.skipIf(SKIP_REASON is not None, SKIP_REASON or "")
class SchedulerE2E(AllocationChecks, unittest.TestCase):
    cp = None
    main = None
    schedulers = []  # every Scheduler of the suite, for logs and shutdown checks
    must_stay_pending = []  # pods that did not fit; nothing frees their pools' resources, so they never may

    # -- set-up -----------------------------------------------------------------------------------------------

    @classmethod
    def setUpClass(cls):
        cls.t_suite = time.monotonic()
        cls.schedulers = []
        cls.must_stay_pending = []
        cls.cp = ControlPlane(kube_scheduler=False, log=log)
        cls.addClassCleanup(cls._cleanup)
        try:
            cls.cp.start()
            cls.kube = cls.cp.kube()
            cls.kube.ensure_service_account("default")
            # The GpuQueue CRD, as the install ships it, served before the scheduler starts (it asks once).
            with open(QUEUE_CRD) as f:
                cls.kube.call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", f.read(),
                              content_type="application/yaml")
            wait_until(lambda: cls.kube.raw("GET", QUEUES)[0] == 200, 30, interval=0.2,
                       what="the GpuQueue CRD to be served")
            # The coscheduling PodGroup CRD, as a cluster with that plugin has it (read only by gpusched).
            cls.kube.call("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", PODGROUP_CRD)
            wait_until(lambda: cls.kube.raw("GET", PODGROUPS)[0] == 200, 30, interval=0.2,
                       what="the PodGroup CRD to be served")
            cls.admin = bool(os.environ.get(ADMIN_ENV))
            cls.user = ADMIN_USER if cls.admin else rbac_audit.SCHEDULER.user
            kubeconfig = cls.cp.kubeconfig
            if not cls.admin:
                # Exactly deploy/base/scheduler/scheduler.yaml's permissions: its ServiceAccount, roles and bindings, and a client
                # certificate for the ServiceAccount's user name, which those bindings name.
                rbac_audit.apply_rbac(cls.kube, rbac_audit.SCHEDULER.manifest)
                crt, key = cls.cp.pki.client_cert("scheduler", f"/CN={cls.user}")
                kubeconfig = write_kubeconfig(os.path.join(cls.cp.dir, "scheduler.kubeconfig"), cls.cp.server,
                                              cls.cp.pki.ca_crt, crt, key)
                cls._wait_rbac_effective()
            cls.kubeconfig = kubeconfig
            cls.main = cls.new_scheduler("scheduler")
            ready_s = cls.main.start()
            cls.startup_s = time.monotonic() - cls.t_suite
            log(f"scheduler ready in {ready_s:.1f}s (port {cls.main.port}); suite start-up {cls.startup_s:.1f}s "
                f"(control plane {cls.cp.timings['startup_s']:.1f}s)")
        except BaseException:
            cls._dump_class_logs()
            raise

    @classmethod
    def new_scheduler(cls, name, leader_election=True):
        s = Scheduler(os.environ["GPUSCHED_BIN"], cls.cp.dir, cls.kubeconfig, name=name,
                      leader_election=leader_election)
        cls.schedulers.append(s)
        return s

    @classmethod
    def _wait_rbac_effective(cls):
        """Waits until the API server's authorizer knows the new bindings (asked as the admin, with
        SubjectAccessReviews, so that the scheduler's user makes no request that could be refused)."""
        checks = [{"verb": "list", "resource": "pods"},
                  {"verb": "create", "resource": "pods", "subresource": "binding", "namespace": "default"},
                  {"verb": "update", "group": "coordination.k8s.io", "resource": "leases", "namespace": "kube-system",
                   "name": LEASE_NAME}]

        def allowed():
            for attrs in checks:
                review = cls.kube.call("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", {
                    "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                    "spec": {"user": cls.user, "resourceAttributes": attrs}})
                if not (review.get("status") or {}).get("allowed"):
                    return False
            return True
        wait_until(allowed, 30, interval=0.2, what="deploy/base/scheduler/scheduler.yaml's RBAC to take effect")

    @classmethod
    def tearDownClass(cls):
        # How many Events the pods that never fit collected (each attempt writes one).
        counts = {n: len(cls.kube.events_for(n, reason="FailedScheduling")) for n in cls.must_stay_pending}
        log(f"FailedScheduling events of the pods still pending: {counts}")
        # deploy/base/scheduler/scheduler.yaml grants exactly the verbs the scheduler used in this suite (rbac_audit.py).
        if not cls.admin:
            try:
                rbac_audit.check_component(cls.kube, cls.cp.audit_log, rbac_audit.SCHEDULER, log=log)
            except AssertionError:
                cls._dump_class_logs()
                raise

    @classmethod
    def _cleanup(cls):
        problems = []
        try:
            for s in cls.schedulers:
                s.stop()
                problems += s.shutdown_problems()
            if problems:
                cls._dump_class_logs()
        finally:
            if cls.cp:
                startup = cls.cp.timings.get("startup_s", float("nan"))
                cls.cp.stop()
                log(f"suite wall time {time.monotonic() - cls.t_suite:.1f}s (control plane start-up {startup:.1f}s)")
        if problems:
            raise AssertionError("gpusched scheduler: " + "; ".join(problems))

    @classmethod
    def _dump_class_logs(cls):
        if cls.cp:
            cls.cp.keep_dir = True  # a failure keeps every log for a look afterwards
        parts = []
        if cls.cp:
            parts.append(cls.cp.log_tails(40))
        for s in cls.schedulers:
            parts.append(s.tails(80))
        sys.stderr.write("\n".join(parts) + "\n")

    def dump_logs(self):
        self._dump_class_logs()
        try:
            sys.stderr.write("----- pods -----\n")
            for p in self.kube.list("pods"):
                conditions = [(c.get("type"), c.get("status"), c.get("reason"))
                              for c in p.get("status", {}).get("conditions") or []]
                sys.stderr.write(f"{p['metadata']['name']}: node={p['spec'].get('nodeName')} "
                                 f"conditions={conditions} "
                                 f"alloc={p['metadata'].get('annotations', {}).get(ALLOCATION_ANNOTATION)}\n")
            lease = self.lease()
            sys.stderr.write(f"----- lease -----\n{json.dumps((lease or {}).get('spec'))}\n")
        except Exception as e:  # noqa: BLE001 - best effort diagnostics
            sys.stderr.write(f"(cannot list pods: {e})\n")

    # -- helpers ----------------------------------------------------------------------------------------------

    def make_pool(self, pool, nodes, gpus):
        inventories = {}
        for i in range(nodes):
            name = f"{pool}-node-{i}"
            inventories[name] = self.kube.create_gpu_node(name, gpus=gpus, labels={POOL_LABEL: pool})
        return inventories

    @staticmethod
    def pod(name, limits, pool, node_selector=None, priority_class=None):
        """A pod for gpusched's scheduler in `pool` (nodeSelector on the pool label, plus `node_selector`)."""
        selector = {POOL_LABEL: pool}
        selector.update(node_selector or {})
        p = gpu_pod(name, limits, labels={POOL_LABEL: pool}, node_selector=selector, priority_class=priority_class)
        p["spec"]["schedulerName"] = SCHEDULER_NAME
        return p

    def create_pod(self, name, limits, pool, **kw):
        return self.kube.create("pods", self.pod(name, limits, pool, **kw))

    def alive(self):
        for s in self.schedulers:
            s.check_alive()
        self.cp.process("kube-apiserver").check_alive()

    def lease(self):
        status, obj = self.kube.raw("GET", LEASE_PATH)
        return obj if status == 200 else None

    def lease_holder(self):
        return ((self.lease() or {}).get("spec") or {}).get("holderIdentity") or ""

    def events(self, name, reason=None):
        items = self.kube.events_for(name, reason=reason)
        items.sort(key=event_order)
        return items

    def wait_bound(self, name, timeout=BIND_TIMEOUT):
        def bound():
            pod = self.kube.get("pods", name)
            return pod if pod and pod["spec"].get("nodeName") else None
        try:
            return Kube.wait_for(bound, timeout, what=f"pod {name} to be bound", on_poll=self.alive)
        except TimeoutError:
            msgs = [(e.get("reason"), e.get("message")) for e in self.events(name)]
            raise AssertionError(f"pod {name} was not bound within {timeout}s; its events: {msgs}") from None

    def wait_failed(self, name, nodes=None, timeout=FAIL_TIMEOUT):
        """Waits for a FailedScheduling event of the pod (with nodes=N, one from an attempt that saw N nodes: its
        message starts with "0/N "), while the pod stays unbound; returns the newest such message."""
        def decided():
            pod = self.kube.get("pods", name)
            if pod and pod["spec"].get("nodeName"):
                return ("bound", pod)
            for e in reversed(self.events(name, reason="FailedScheduling")):
                msg = e.get("message") or ""
                if nodes is None or msg.startswith(f"0/{nodes} "):
                    self.assertEqual(e.get("type"), "Warning", f"FailedScheduling event of {name}: {e}")
                    return ("failed", msg)
            return None
        try:
            state, value = Kube.wait_for(decided, timeout, what=f"a FailedScheduling event of {name}",
                                         on_poll=self.alive)
        except TimeoutError:
            msgs = [(e.get("reason"), e.get("message")) for e in self.events(name)]
            which = "" if nodes is None else f" for {nodes} nodes"
            raise AssertionError(f"pod {name}: no FailedScheduling event{which} within {timeout}s; its events: "
                                 f"{msgs}") from None
        if state == "bound":
            self.fail(f"pod {name} should not fit but was bound to {value['spec']['nodeName']} with "
                      f"{value['metadata'].get('annotations', {}).get(ALLOCATION_ANNOTATION)}")
        log(f"{name} FailedScheduling: {value}")
        return value

    def assert_unschedulable(self, name, msg):
        """The FailedScheduling verdict of a pod that fits no node: "0/N nodes are available: ...", and the pod's
        condition PodScheduled=False, reason Unschedulable."""
        self.assertTrue(msg.startswith("0/"), f"{name}: {msg!r}")
        self.assertIn("nodes are available", msg, f"{name}: {msg!r}")

        def condition():
            pod = self.kube.get("pods", name)
            for c in pod.get("status", {}).get("conditions") or []:
                if c.get("type") == "PodScheduled":
                    return c
            return None
        try:
            cond = Kube.wait_for(lambda: (lambda c: c if c and c.get("status") == "False" else None)(condition()),
                                 10, what=f"condition PodScheduled=False on {name}", on_poll=self.alive)
        except TimeoutError:
            self.fail(f"{name}: no PodScheduled=False condition within 10s; conditions: "
                      f"{self.kube.get('pods', name).get('status', {}).get('conditions')}")
        self.assertEqual(cond.get("reason"), "Unschedulable", f"{name}: {cond}")
        self.assertFalse(self.kube.get("pods", name)["spec"].get("nodeName"))
        type(self).must_stay_pending.append(name)
        return cond

    def check_whole_allocation(self, pod, count=1):
        alloc = self.allocation(pod)
        gpus = [g for c in alloc["containers"] for g in c.get("gpus") or []]
        self.assertEqual(len(gpus), count, alloc)
        self.assertTrue(all(g.get("exclusive") for g in gpus), f"nvidia.com/gpu must be exclusive: {alloc}")
        return alloc

    def audit(self, pool=None):
        """Invariants over every pod of the cluster: valid allocations on GPUs of the node's inventory, no GPU over
        its compute or memory, an exclusive GPU held once, unique allocation ids, unbound pods without allocation,
        and the pods that did not fit still pending. Returns {(node, uuid): [milli, MiB, pods]} of the nodes of
        `pool` (of all nodes without), and logs it."""
        nodes = {n["metadata"]["name"]: json.loads(n["metadata"].get("annotations", {}).get(GPUS_ANNOTATION, "[]"))
                 for n in self.kube.list("nodes")}
        usage = collections.defaultdict(lambda: [0, 0, []])
        exclusive = collections.defaultdict(list)
        ids = collections.defaultdict(list)
        memory = {}
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
                    key = (alloc["node"], g["uuid"])
                    memory[key] = inv.get("memory_mib", GPU_MEMORY_MIB)
                    u = usage[key]
                    u[0] += g.get("milli", 0)
                    u[1] += g.get("memory_mib", 0)
                    u[2].append(name)
                    if g.get("exclusive"):
                        exclusive[key].append(name)
        for key, (milli, mib, pods) in usage.items():
            self.assertLessEqual(milli, 1000, f"{key[1]} on {key[0]} overcommitted in compute: {pods}")
            self.assertLessEqual(mib, memory[key], f"{key[1]} on {key[0]} overcommitted in memory: {pods}")
        for key, holders in exclusive.items():
            self.assertEqual(usage[key][2], holders[:1],
                             f"exclusive GPU {key[1]} shared: exclusive for {holders}, used by {usage[key][2]}")
        for name in self.must_stay_pending:
            pod = self.kube.get("pods", name)
            if pod is not None:
                self.assertFalse(pod["spec"].get("nodeName"),
                                 f"{name} did not fit earlier and nothing was freed since, yet it was bound: "
                                 f"{pod['metadata'].get('annotations', {}).get(ALLOCATION_ANNOTATION)}")
        dup = {i: p for i, p in ids.items() if len(p) > 1}
        self.assertFalse(dup, f"allocation ids are not unique: {dup}")
        mine = {k: v for k, v in usage.items() if pool is None or k[0].startswith(pool + "-node-")}
        for (node, uuid), (milli, mib, pods) in sorted(mine.items()):
            log(f"  {uuid}: {milli} milli, {mib} MiB, pods {sorted(pods)}")
        return mine

    def bindings(self, names):
        """{pod: [(user, HTTP status, time received) of each Binding anyone sent for it]}, from kube-apiserver's audit
        log (status 0: no response recorded)."""
        sent = {n: [] for n in names}
        for r in rbac_audit.requests_of(rbac_audit.read_audit_log(self.cp.audit_log), None):
            if r.resource == "pods/binding" and r.verb == "create" and r.namespace == "default" and r.name in sent:
                sent[r.name].append((r.user, r.code, r.received))
        return sent

    def assert_bound_once(self, names):
        """Every pod is bound, by the scheduler's user, and by exactly one Binding that took effect (the audit log,
        blocking mode, has them all once the pods show their node; wait a little for the last lines all the same).

        A Binding that took effect is one logged with success, or the only Binding anyone sent for a pod that is bound:
        that one bound it, whatever status was logged. When the scheduler is SIGKILLed, kube-apiserver (1.20) ends
        the Bindings still in flight with 409 in its audit log, at the moment the connection drops, whether or not
        it had committed them (seen: 12 of 14 such Bindings had bound their pod; the other 2 pods were bound after
        the restart). A pod with two successful Bindings, or bound by anyone else, fails; a Binding that was refused
        besides the one that bound the pod is allowed and logged."""
        for n in names:
            self.assertTrue(self.kube.get("pods", n)["spec"].get("nodeName"), f"{n} is not bound")
        sent = {}

        def effective(n):
            ok = [b for b in sent[n] if 200 <= b[1] < 300]
            return ok if ok or len(sent[n]) != 1 else sent[n]

        def recorded():
            sent.update(self.bindings(names))
            return all(effective(n) for n in names)
        try:
            wait_until(recorded, 10, interval=0.2, what="the bindings in the audit log")
        except TimeoutError:
            pass  # the assertion below names the pods
        wrong = {n: sent[n] for n in names
                 if len(effective(n)) != 1 or any(user != self.user for user, _, _ in effective(n))}
        self.assertFalse(wrong, "pods not bound by exactly one Binding of the scheduler (user, HTTP status, time "
                         f"received of each): {wrong}")
        refused = {n: [c for _, c, _ in sent[n] if not 200 <= c < 300] for n in names if len(sent[n]) > 1}
        odd = {n: sent[n][0][1] for n in names if not 200 <= effective(n)[0][1] < 300}
        log(f"{len(names)} pods bound once each"
            + (f"; refused Bindings besides the one that bound the pod: {refused}" if refused else "")
            + (f"; bound by a Binding logged without success (status): {odd}" if odd else ""))

    def stop_main(self):
        """Stops the suite's scheduler (SIGTERM: it hands the Lease back) for a test that runs its own replicas, and
        starts it again after the test."""
        holder = self.lease_holder()
        self.main.stop()
        rc = self.main.proc.proc.returncode
        self.assertIn(rc, (0, -signal.SIGTERM), f"the scheduler exited with {rc} on SIGTERM")
        log(f"suite scheduler stopped (exit {rc}); the Lease held by {holder!r} is now held by "
            f"{self.lease_holder()!r}")
        self.addCleanup(self.restart_main)

    def restart_main(self):
        ready_s = self.main.start(timeout=LEASE_S + 30)
        log(f"suite scheduler started again, ready in {ready_s:.1f}s")

    # -- tests ------------------------------------------------------------------------------------------------

    @dump_logs_on_failure
    def test_0_deploy_manifest(self):
        """deploy/base/scheduler/scheduler.yaml passes the apiserver's validation (server-side dry run). The ServiceAccount, roles
        and bindings exist already (the suite applied them), so every object is dry-run under another name."""
        kinds = []
        for doc in deploy_documents():
            kind = re.search(r"(?m)^kind:[ \t]*(\S+)", doc).group(1)
            doc, n = re.subn(r"(?m)^(metadata:\n(?:[ ]{2}.*\n)*?[ ]{2}name:[ \t]*)(\S+)", r"\g<1>\g<2>-dry-run", doc,
                             count=1)
            self.assertEqual(n, 1, f"no metadata.name in the {kind} of deploy/base/scheduler/scheduler.yaml")
            if kind == "PodDisruptionBudget" and self.cp.version < (1, 21):
                # policy/v1 came in 1.21; the same spec as policy/v1beta1.
                doc, n = re.subn(r"(?m)^apiVersion:[ \t]*policy/v1[ \t]*$", "apiVersion: policy/v1beta1", doc)
                self.assertEqual(n, 1)
                obj = self.kube.call("POST", "/apis/policy/v1beta1/namespaces/kube-system/poddisruptionbudgets"
                                     "?dryRun=All", doc, content_type="application/yaml")
            else:
                obj = self.kube.apply_yaml(doc, dry_run=True)[0]
            kinds.append(obj["kind"])
        self.assertEqual(sorted(kinds), ["ClusterRole", "ClusterRoleBinding", "ConfigMap", "Deployment",
                                         "PodDisruptionBudget", "Role", "RoleBinding", "ServiceAccount"])

    @dump_logs_on_failure
    def test_1_fractional_sharing(self):
        """Three 30% / 20000 MiB pods share the one GPU of a node: each is bound with an allocation of 300 milli /
        20000 MiB on it, 900 milli and 60000 MiB in all, and gets a Normal event Scheduled."""
        pool = "share"
        inv = self.make_pool(pool, nodes=1, gpus=1)
        node = next(iter(inv))
        uuid = inv[node][0]["uuid"]
        names = [f"share-{i}" for i in range(3)]
        t0 = time.monotonic()
        for name in names:
            self.create_pod(name, SHARE, pool)
        for name in names:
            pod = self.wait_bound(name)
            self.assertEqual(pod["spec"]["nodeName"], node)
            alloc = self.check_share_allocation(pod, SHARE)
            self.assertEqual(alloc["containers"][0]["gpus"][0]["uuid"], uuid, alloc)
        log(f"3 shared pods bound in {time.monotonic() - t0:.2f}s")
        usage = self.audit(pool)
        self.assertEqual(usage[(node, uuid)][:2], [900, 60000])
        self.assertEqual(sorted(usage[(node, uuid)][2]), names)

        for name in names:
            expected = f"Successfully assigned default/{name} to {node}"
            try:
                event = Kube.wait_for(lambda: next(iter(self.events(name, reason="Scheduled")), None), 10,
                                      what=f"the Scheduled event of {name}", on_poll=self.alive)
            except TimeoutError:
                self.fail(f"{name}: no Scheduled event; its events: {[e.get('reason') for e in self.events(name)]}")
            self.assertEqual(event.get("type"), "Normal", event)
            self.assertIn(expected, event.get("message") or "", event)

        # The metrics count what happened.
        samples = self.main.metrics()
        names_seen = {n for n, _, _ in samples}
        for metric in ("gpusched_scheduler_pending_pods", "gpusched_scheduler_schedule_attempts_total",
                       "gpusched_scheduler_binds_total", "gpusched_scheduler_leader"):
            self.assertIn(metric, names_seen, f"/metrics lacks {metric}")
        binds = {tuple(sorted(l.items())): v for n, l, v in samples if n == "gpusched_scheduler_binds_total"}
        attempts = {tuple(sorted(l.items())): v for n, l, v in samples
                    if n == "gpusched_scheduler_schedule_attempts_total"}
        leader = [v for n, _, v in samples if n == "gpusched_scheduler_leader"]
        log(f"metrics: binds {binds}, attempts {attempts}, leader {leader}")
        self.assertGreaterEqual(sum(binds.values()), 3, binds)
        self.assertGreaterEqual(sum(attempts.values()), 3, attempts)
        self.assertEqual(leader, [1.0])
        # Every scheduler metric the alerts and the dashboard of deploy/monitoring use is there, and the page passes
        # `promtool check metrics`.
        status, text = http_get(self.main.port, "/metrics", timeout=5)
        self.assertEqual(status, 200)
        self.assertEqual(monitoring_check.check_exposition(text, ["gpusched_scheduler_"]), [])
        self.assertEqual(monitoring_check.promtool_check_metrics(text), [])

    @dump_logs_on_failure
    def test_2_priority_order(self):
        """With no node in the pool, a low- and then a high-priority pod both fail (FailedScheduling "0/N nodes are
        available", PodScheduled=False Unschedulable). A node with one GPU appears: the high one binds, the low one
        is tried again on the new node and stays pending."""
        pool = "prio"
        classes = self.priority_classes()
        for which in ("low", "high"):
            pc, value = classes[which]
            pod = self.pod(f"prio-{which}", WHOLE, pool, priority_class=pc)
            # The Priority admission plugin reads PriorityClasses from its informer: the new ones show up shortly.
            created = wait_until(lambda: self._create_if_admitted(pod), 15, interval=0.2,
                                 what=f"prio-{which} to be admitted with PriorityClass {pc}")
            self.assertEqual(created["spec"].get("priority"), value, created["spec"])
        for which in ("low", "high"):
            msg = self.wait_failed(f"prio-{which}")
            self.assert_unschedulable(f"prio-{which}", msg)
        type(self).must_stay_pending.remove("prio-high")

        self.make_pool(pool, nodes=1, gpus=1)
        nodes = len(self.kube.list("nodes"))
        t0 = time.monotonic()
        high = self.wait_bound("prio-high")
        log(f"prio-high bound {time.monotonic() - t0:.2f}s after its node appeared")
        self.check_whole_allocation(high)
        # The low one was tried on the new node too (its verdict counts it), and did not fit.
        msg = self.wait_failed("prio-low", nodes=nodes)
        self.assertIn("nodes are available", msg)
        self.assertFalse(self.kube.get("pods", "prio-low")["spec"].get("nodeName"))
        # A node changes in a way that frees nothing: prio-low is tried again and gets the same verdict, which is no
        # new Event but the first one's count going up (as kube-scheduler aggregates).
        self.kube.patch("nodes", f"{pool}-node-0", {"metadata": {"labels": {"gpusched-e2e/touched": "1"}}},
                        namespace=None)

        def repeated():
            return [e for e in self.kube.events_for("prio-low", reason="FailedScheduling")
                    if e["message"] == msg and e.get("count", 1) >= 2]
        again = Kube.wait_for(repeated, 30, what="prio-low's FailedScheduling event counted twice")
        self.assertEqual(len(again), 1, again)
        same = [e for e in self.kube.events_for("prio-low", reason="FailedScheduling") if e["message"] == msg]
        self.assertEqual(len(same), 1, f"a repeat was written as a new Event: {same}")
        log(f"prio-low: {again[0]['count']} x {msg!r}")
        self.audit(pool)

    def priority_classes(self):
        """{"low": (name, 10), "high": (name, 1000)}: two PriorityClasses, created unless they exist."""
        classes = {"low": ("gpusched-e2e-prio-low", 10), "high": ("gpusched-e2e-prio-high", 1000)}
        for pc, value in classes.values():
            status, body = self.kube.raw("POST", "/apis/scheduling.k8s.io/v1/priorityclasses", {
                "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": pc},
                "value": value, "globalDefault": False, "description": "gpusched e2e"})
            self.assertIn(status, (201, 409), f"PriorityClass {pc}: {status} {body}")
        return classes

    def create_admitted(self, pod):
        """Creates the pod once the Priority admission plugin knows its PriorityClass (it reads them from an
        informer: new ones show up shortly)."""
        return wait_until(lambda: self._create_if_admitted(pod), 15, interval=0.2,
                          what=f"{pod['metadata']['name']} to be admitted with its PriorityClass")

    def _create_if_admitted(self, pod):
        try:
            return self.kube.create("pods", pod)
        except KubeError as e:
            if "PriorityClass" in str(e) or "priorityclass" in str(e).lower():
                return None
            raise

    @dump_logs_on_failure
    def test_3_node_predicates(self):
        """Node A (2 GPUs) has a NoSchedule taint, B is cordoned, C and D are plain; each has a zone label of its own.
        A cpu request above every node's 32 cpus fails with Insufficient cpu; nodeSelector on C's zone gets C; a
        pod tolerating A's taint with required node affinity (In) on A's zone gets A although D is free; a pod
        without the toleration gets D, never A (a free GPU, tainted) nor B (cordoned), and the next one stays
        pending naming both; one with the toleration then gets A. A pod created with spec.nodeName is left alone."""
        pool = "pred"
        taint = {"key": "gpusched-e2e/dedicated", "value": "gpu", "effect": "NoSchedule"}
        toleration = {"key": taint["key"], "operator": "Equal", "value": taint["value"], "effect": "NoSchedule"}
        node = {z: f"{pool}-node-{z}" for z in "abcd"}
        for z in "abcd":
            self.kube.create_gpu_node(node[z], gpus=2 if z == "a" else 1, labels={POOL_LABEL: pool, ZONE_LABEL: z})
        self.kube.patch("nodes", node["a"], {"spec": {"taints": [taint]}})
        self.kube.patch("nodes", node["b"], {"spec": {"unschedulable": True}})
        nodes = len(self.kube.list("nodes"))

        def make(name, limits=WHOLE, selector=None, tolerate=False, affinity_zones=None, cpu=None):
            p = self.pod(name, limits, pool, node_selector=selector)
            if tolerate:
                p["spec"]["tolerations"] = [toleration]
            if affinity_zones:
                p["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [
                        {"key": ZONE_LABEL, "operator": "In", "values": affinity_zones}]}]}}}
            if cpu:
                p["spec"]["containers"][0]["resources"]["requests"]["cpu"] = cpu
            self.kube.create("pods", p)
            return name

        t0 = time.monotonic()
        # More cpu than any node has; the GPU share and the toleration would fit A, C and D.
        make("pred-cpu", {"gpusched.io/gpu": 1, "gpusched.io/gpu-memory": 1000, "gpusched.io/gpu-core": 5},
             tolerate=True, cpu="64")
        msg = self.wait_failed("pred-cpu", nodes=nodes)
        self.assert_unschedulable("pred-cpu", msg)
        self.assertIn("Insufficient cpu", msg)

        make("pred-selector", selector={ZONE_LABEL: "c"})
        self.assertEqual(self.wait_bound("pred-selector")["spec"]["nodeName"], node["c"])
        make("pred-affinity", tolerate=True, affinity_zones=["a", "nowhere"])
        self.assertEqual(self.wait_bound("pred-affinity")["spec"]["nodeName"], node["a"])
        make("pred-notol-1")
        self.assertEqual(self.wait_bound("pred-notol-1")["spec"]["nodeName"], node["d"],
                         "without the toleration only D is left (A tainted, B cordoned, C full)")
        make("pred-notol-2")
        msg = self.wait_failed("pred-notol-2", nodes=nodes)
        self.assert_unschedulable("pred-notol-2", msg)
        self.assertIn("taint", msg, "A has a free GPU, but a taint the pod does not tolerate")
        self.assertIn("unschedulable", msg, "B has a free GPU, but is cordoned")
        make("pred-tol", tolerate=True)
        self.assertEqual(self.wait_bound("pred-tol")["spec"]["nodeName"], node["a"])
        for name in ("pred-selector", "pred-affinity", "pred-notol-1", "pred-tol"):
            self.check_whole_allocation(self.kube.get("pods", name))
        log(f"node predicates: 6 pods decided in {time.monotonic() - t0:.2f}s")

        # Bound at creation (spec.nodeName, on the cordoned node): gpusched's scheduler must not touch it.
        prebound = self.pod("pred-prebound", {}, pool)
        prebound["spec"]["nodeName"] = node["b"]
        self.kube.create("pods", prebound)
        # A pod decided after it shows the scheduler has seen it; then nothing may have been written about it.
        make("pred-after", selector={ZONE_LABEL: "a"}, tolerate=True)
        msg = self.wait_failed("pred-after", nodes=nodes)  # A's two GPUs are taken
        self.assert_unschedulable("pred-after", msg)
        pod = self.kube.get("pods", "pred-prebound")
        self.assertEqual(pod["spec"]["nodeName"], node["b"])
        self.assertEqual([(e.get("reason"), e.get("message")) for e in self.events("pred-prebound")], [])
        self.assertNotIn(ALLOCATION_ANNOTATION, pod["metadata"].get("annotations") or {})
        self.audit(pool)

    @dump_logs_on_failure
    def test_4_inter_pod_constraints(self):
        """Two nodes in zones a and b. Replicas with required podAntiAffinity on the zone: the first two bind in
        different zones, the third stays pending ("didn't match pod anti-affinity rules") until one replica is
        deleted, then binds in its zone. A pod with required podAffinity to a cache waits ("didn't match pod
        affinity rules") until a cache pod is bound in zone b, then joins zone b. Four pods with a DoNotSchedule
        topology spread constraint (maxSkew 1 on the zone) end two in each zone, where binpack alone would stack
        them on one node."""
        pool = "inter"
        node = {z: f"{pool}-node-{z}" for z in "ab"}
        for z in "ab":
            self.kube.create_gpu_node(node[z], gpus=4, labels={POOL_LABEL: pool, ZONE_LABEL: z})
        nodes = len(self.kube.list("nodes"))

        def make(name, app, affinity=None, spread=None, selector=None):
            p = self.pod(name, SHARE, pool, node_selector=selector)
            p["metadata"]["labels"]["app"] = app
            if affinity:
                p["spec"]["affinity"] = affinity
            if spread:
                p["spec"]["topologySpreadConstraints"] = spread
            self.kube.create("pods", p)
            return name

        def term(app):
            return [{"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": ZONE_LABEL}]

        anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": term("inter-web")}}
        for i in range(2):
            make(f"inter-web-{i}", "inter-web", affinity=anti)
        zones = {self.wait_bound(f"inter-web-{i}")["spec"]["nodeName"] for i in range(2)}
        self.assertEqual(zones, set(node.values()), "one replica per zone")
        make("inter-web-2", "inter-web", affinity=anti)
        msg = self.wait_failed("inter-web-2", nodes=nodes)
        self.assert_unschedulable("inter-web-2", msg)
        self.assertIn("node(s) didn't match pod anti-affinity rules", msg)
        type(self).must_stay_pending.remove("inter-web-2")
        freed = self.kube.get("pods", "inter-web-0")["spec"]["nodeName"]
        self.kube.delete("pods", "inter-web-0", grace=0)
        self.assertEqual(self.wait_bound("inter-web-2")["spec"]["nodeName"], freed)

        make("inter-aff", "inter-aff",
             affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": term("inter-cache")}})
        msg = self.wait_failed("inter-aff", nodes=nodes)
        self.assert_unschedulable("inter-aff", msg)
        self.assertIn("node(s) didn't match pod affinity rules", msg)
        type(self).must_stay_pending.remove("inter-aff")
        make("inter-cache", "inter-cache", selector={ZONE_LABEL: "b"})
        self.assertEqual(self.wait_bound("inter-cache")["spec"]["nodeName"], node["b"])
        self.assertEqual(self.wait_bound("inter-aff")["spec"]["nodeName"], node["b"])

        spread = [{"maxSkew": 1, "topologyKey": ZONE_LABEL, "whenUnsatisfiable": "DoNotSchedule",
                   "labelSelector": {"matchLabels": {"app": "inter-spread"}}}]
        for i in range(4):
            make(f"inter-spread-{i}", "inter-spread", spread=spread)
        per_node = {}
        for i in range(4):
            bound = self.wait_bound(f"inter-spread-{i}")
            self.check_share_allocation(bound, SHARE)
            per_node[bound["spec"]["nodeName"]] = per_node.get(bound["spec"]["nodeName"], 0) + 1
            scheduled = self.events(f"inter-spread-{i}", reason="Scheduled")
            self.assertTrue(scheduled and scheduled[-1].get("type") == "Normal", scheduled)
        self.assertEqual(per_node, {node["a"]: 2, node["b"]: 2})
        log(f"inter-pod constraints: spread {per_node}")

        # A term that selects namespaces by label: app=inter-db pods of namespaces labelled team=a keep the pod out
        # of their zone; the same app in a namespace without the label does not.
        placed = {}
        for ns, labels, zone in (("inter-team-a", {"team": "a"}, "a"), ("inter-team-c", {"team": "c"}, "b")):
            self.kube.ensure_namespace(ns, labels)
            self.kube.ensure_service_account("default", ns)
            p = self.pod(f"inter-db-{zone}", SHARE, pool, node_selector={ZONE_LABEL: zone})
            p["metadata"]["labels"]["app"] = "inter-db"
            self.kube.create("pods", p, namespace=ns)
            placed[ns] = Kube.wait_for(
                lambda ns=ns, zone=zone: (self.kube.get("pods", f"inter-db-{zone}", namespace=ns) or {})
                .get("spec", {}).get("nodeName"), BIND_TIMEOUT, what=f"pod {ns}/inter-db-{zone} to be bound",
                on_poll=self.alive)
        self.assertEqual(placed, {"inter-team-a": node["a"], "inter-team-c": node["b"]})
        make("inter-ns", "inter-ns", affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "inter-db"}}, "topologyKey": ZONE_LABEL,
             "namespaceSelector": {"matchLabels": {"team": "a"}}}]}})
        self.assertEqual(self.wait_bound("inter-ns")["spec"]["nodeName"], node["b"])
        for ns, zone in (("inter-team-a", "a"), ("inter-team-c", "b")):
            self.kube.delete("pods", f"inter-db-{zone}", namespace=ns)
        log("inter-pod constraints: namespaceSelector honoured")
        self.audit(pool)

    @dump_logs_on_failure
    def test_5_freed_by_deletion(self):
        """One GPU: pod A holds it, pod B fails; A is deleted (grace 0): B is bound within 1 s of the DELETE."""
        pool = "free"
        self.make_pool(pool, nodes=1, gpus=1)
        self.create_pod("free-a", WHOLE, pool)
        self.check_whole_allocation(self.wait_bound("free-a"))
        self.create_pod("free-b", WHOLE, pool)
        msg = self.wait_failed("free-b")
        self.assert_unschedulable("free-b", msg)
        type(self).must_stay_pending.remove("free-b")

        self.kube.delete("pods", "free-a", grace=0)
        t0 = time.monotonic()
        deadline = t0 + BIND_TIMEOUT
        polls = 0
        while True:
            pod = self.kube.get("pods", "free-b")
            polls += 1
            if pod["spec"].get("nodeName"):
                freed_s = time.monotonic() - t0
                break
            if time.monotonic() >= deadline:
                self.fail(f"free-b was not bound within {BIND_TIMEOUT}s of free-a's deletion; its events: "
                          f"{[(e.get('reason'), e.get('message')) for e in self.events('free-b')]}")
            self.alive()
            time.sleep(0.02)
        log(f"RESULT freed_to_bound_s={freed_s:.3f} ({polls} polls)")
        self.assertIsNone(self.kube.get("pods", "free-a"), "free-a still exists after its deletion")
        self.check_whole_allocation(pod)
        self.assertLess(freed_s, 1.0, "the pending pod should get the freed GPU within 1 s of the deletion")
        self.audit(pool)

    @dump_logs_on_failure
    def test_6_leader_failover(self):
        """Two replicas on one Lease: both are ready (/readyz 200: a standby with warm caches is what a rolling
        update or a drain needs), exactly one leads (body "ok: leader", gpusched_scheduler_leader 1, the Lease's
        holder), the other stands by ("ok: standby", 0). The leader binds two pods; kill -9 of the leader; four more pods
        are created at once and the standby binds them within lease + 10 s. No GPU over capacity; each pod bound by
        exactly one Binding."""
        self.stop_main()
        pool = "ha"
        self.make_pool(pool, nodes=1, gpus=2)
        replicas = [self.new_scheduler("scheduler-ha-a"), self.new_scheduler("scheduler-ha-b")]
        for r in replicas:
            self.addCleanup(r.stop)
        t0 = time.monotonic()
        for r in replicas:
            r.start(ready=False)

        def roles():
            answers = [r.readyz() for r in replicas]
            holder = self.lease_holder()
            if not holder or any(status != 200 for status, _ in answers):
                return None
            bodies = [body.strip() for _, body in answers]
            if sorted(b.split(" (")[0] for b in bodies) != ["ok: leader", "ok: standby"]:
                return None
            lead = 0 if bodies[0] == "ok: leader" else 1
            return holder, replicas[lead], replicas[1 - lead]
        holder, leader, standby = wait_until(roles, LEASE_S + 30, interval=0.1,
                                             what="both replicas ready, one leading and one standing by",
                                             alive=[r.proc for r in replicas])
        log(f"{leader.name} leads as {holder!r} after {time.monotonic() - t0:.1f}s; {standby.name} stands by "
            f"(identity in the leader's log: {holder in leader.log_text()}, in the standby's: "
            f"{holder in standby.log_text()})")
        for r, value in ((leader, 1.0), (standby, 0.0)):
            got = [v for n, _, v in r.metrics() if n == "gpusched_scheduler_leader"]
            self.assertEqual(got, [value], f"{r.name}: gpusched_scheduler_leader")

        names = [f"ha-{i}" for i in range(6)]
        for name in names[:2]:
            self.create_pod(name, SHARE, pool)
        for name in names[:2]:
            self.check_share_allocation(self.wait_bound(name), SHARE)

        transitions = (self.lease()["spec"].get("leaseTransitions") or 0)
        leader.kill()
        t_kill = time.monotonic()
        for name in names[2:]:
            self.create_pod(name, SHARE, pool)
        deadline = LEASE_S + 10
        for name in names[2:]:
            left = max(0.1, deadline - (time.monotonic() - t_kill))
            self.check_share_allocation(self.wait_bound(name, timeout=left), SHARE)
        failover_s = time.monotonic() - t_kill
        standby.wait_readyz(200, timeout=5)
        spec = self.lease()["spec"]
        log(f"RESULT failover_to_bound_s={failover_s:.2f} (kill -9 of the leader to 4 new pods bound; lease "
            f"{LEASE_S}s); lease now {spec}")
        self.assertLess(failover_s, LEASE_S + 10)
        self.assertNotEqual(spec.get("holderIdentity"), holder)
        self.assertGreaterEqual(spec.get("leaseTransitions") or 0, transitions + 1, spec)
        self.audit(pool)
        self.assert_bound_once(names)

    @dump_logs_on_failure
    def test_7_kill_mid_stream(self):
        """40 pods of 20% / 8000 MiB, created at once on 2 nodes x 4 GPUs (exactly 8 x 1000 milli): the scheduler is
        SIGKILLed as soon as 5 are bound (a watch tells), started again, and all 40 end bound, no GPU over capacity,
        the pods bound before the kill unchanged, each pod bound by exactly one Binding. (40, not fewer: a release
        build binds 20 pods in under 100 ms, before the kill lands.)"""
        self.stop_main()
        pool = "burst"
        self.make_pool(pool, nodes=2, gpus=4)
        small = {"gpusched.io/gpu": 1, "gpusched.io/gpu-memory": 8000, "gpusched.io/gpu-core": 20}
        s = self.new_scheduler("scheduler-burst")
        self.addCleanup(s.stop)
        s.start(timeout=LEASE_S + 30)
        names = [f"burst-{i:02d}" for i in range(40)]

        def kill_now():
            try:
                os.killpg(s.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        watcher = BindWatcher(self.kube, pool, threshold=5, fire=kill_now)
        try:
            t0 = time.monotonic()
            for name in names:
                self.create_pod(name, small, pool)
            created_s = time.monotonic() - t0
            # The watcher notes the moment before it kills: a death before that is a crash.
            Kube.wait_for(lambda: watcher.fired_at or watcher.error, BIND_TIMEOUT,
                          what="5 pods of the burst to be bound", on_poll=lambda: watcher.fired_at or s.check_alive())
        finally:
            watcher.close()
        self.assertIsNone(watcher.error, f"the watch failed: {watcher.error}")
        s.kill()
        before = {p["metadata"]["name"]: (p["spec"]["nodeName"],
                                          p["metadata"].get("annotations", {}).get(ALLOCATION_ANNOTATION))
                  for p in self.kube.list("pods", labelSelector=f"{POOL_LABEL}={pool}") if p["spec"].get("nodeName")}
        log(f"burst: {len(names)} pods created in {created_s:.2f}s; kill -9 {watcher.fired_at[0] - t0:.2f}s after the "
            f"first create, when {watcher.fired_at[1]} were bound; {len(before)} bound once it was dead")
        self.assertLess(len(before), len(names), "every pod was bound before the kill: nothing was mid-stream")

        t1 = time.monotonic()
        s.start(ready=False)
        for name in names:
            left = max(0.1, LEASE_S + 30 - (time.monotonic() - t1))
            self.check_share_allocation(self.wait_bound(name, timeout=left), small)
        log(f"RESULT restart_to_all_bound_s={time.monotonic() - t1:.2f} ({len(names) - len(before)} pods after the "
            f"restart; lease {LEASE_S}s)")
        for name, (node, alloc) in before.items():
            pod = self.kube.get("pods", name)
            now = (pod["spec"]["nodeName"], pod["metadata"].get("annotations", {}).get(ALLOCATION_ANNOTATION))
            self.assertEqual(now, (node, alloc), f"{name} changed after the restart")
        usage = self.audit(pool)
        self.assertEqual(len(usage), 8, usage)
        self.assertEqual(sorted(u[0] for u in usage.values()), [1000] * 8, usage)
        self.assert_bound_once(names)

    @dump_logs_on_failure
    def test_8_share_preemption_with_budget(self):
        """One GPU shared by two pods of low priority (50% each); a PodDisruptionBudget (minAvailable 1) protects
        one of them. A pod of high priority needing 50% preempts the other: its status.nominatedNodeName names the
        node, the victim is evicted through the Eviction API (it gets a Preempted event and a deletionTimestamp;
        the test then finishes its termination, as the kubelet would), the protected one is untouched, and the
        preemptor binds to the room held for it. A second pod of high priority that only the protected pod could
        make room for is refused by the budget (429 from the Eviction API: FailedPreemption) and evicts nothing."""
        pool = "preempt"
        classes = self.priority_classes()
        node = list(self.make_pool(pool, nodes=1, gpus=1))[0]
        half = {"gpusched.io/gpu": 1, "gpusched.io/gpu-memory": 20000, "gpusched.io/gpu-core": 50}
        for name, app in (("pre-protected", "db"), ("pre-free", "batch")):
            pod = self.pod(name, half, pool, priority_class=classes["low"][0])
            pod["metadata"]["labels"]["app"] = app
            # A grace period, so that an eviction leaves the pod terminating (as on a real node) until the test,
            # standing in for the kubelet, finishes it.
            pod["spec"]["terminationGracePeriodSeconds"] = 30
            self.create_admitted(pod)
            self.check_share_allocation(self.wait_bound(name), half)
            # Running and Ready, as its kubelet would report it (the Eviction API ignores budgets for Pending pods,
            # and lets an unready pod go while its budget's healthy count holds).
            self.kube.patch("pods", name, {"status": {"phase": "Running", "conditions": [
                {"type": "Ready", "status": "True"}]}}, sub="status", patch_type="strategic")
        # policy/v1 from Kubernetes 1.21; the suite's 1.20 serves policy/v1beta1. No controller-manager runs here:
        # the test writes the budget's status as the disruption controller would (1 healthy of 1 wanted: no
        # disruption allowed).
        status, _ = self.kube.raw("GET", "/apis/policy/v1")
        version = "policy/v1" if status == 200 else "policy/v1beta1"
        path = f"/apis/{version}/namespaces/default/poddisruptionbudgets"
        pdb = self.kube.call("POST", path, {
            "apiVersion": version, "kind": "PodDisruptionBudget", "metadata": {"name": "pre-db"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db", POOL_LABEL: pool}}}})
        self.addCleanup(lambda: self.kube.raw("DELETE", f"{path}/pre-db"))
        pdb["status"] = {"observedGeneration": pdb["metadata"].get("generation", 1), "disruptionsAllowed": 0,
                         "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}
        self.kube.call("PUT", f"{path}/pre-db/status", pdb)

        def budgets_known():
            return any(n == "gpusched_scheduler_disruption_budgets" and v >= 1 for n, _, v in self.main.metrics())
        wait_until(budgets_known, 10, interval=0.1, what="the scheduler to see the PodDisruptionBudget")

        t0 = time.monotonic()
        self.create_admitted(self.pod("pre-high", half, pool, priority_class=classes["high"][0]))

        def nominated():
            pod = self.kube.get("pods", "pre-high")
            return pod if (pod.get("status") or {}).get("nominatedNodeName") else None
        pod = Kube.wait_for(nominated, BIND_TIMEOUT, what="pre-high's nominatedNodeName", on_poll=self.alive)
        self.assertEqual(pod["status"]["nominatedNodeName"], node)

        def evicted():
            victim = self.kube.get("pods", "pre-free")
            self.assertIsNotNone(victim, "pre-free vanished at once despite its grace period")
            return victim if victim["metadata"].get("deletionTimestamp") else None
        Kube.wait_for(evicted, BIND_TIMEOUT, what="pre-free to be evicted", on_poll=self.alive)
        evicted_s = time.monotonic() - t0
        self.assertFalse(self.kube.get("pods", "pre-protected")["metadata"].get("deletionTimestamp"),
                         "the pod the budget protects was evicted")
        preempted = self.events("pre-free", reason="Preempted")
        self.assertTrue(preempted, f"no Preempted event on pre-free: {self.events('pre-free')}")
        self.assertIn(f"Preempted by default/pre-high on node {node}", preempted[-1].get("message", ""))
        # The victim terminates: the preemptor waits (the GPU is still full); then the kubelet's part: it is gone.
        time.sleep(0.5)
        self.assertFalse(self.kube.get("pods", "pre-high")["spec"].get("nodeName"))
        self.kube.delete("pods", "pre-free", grace=0)
        t1 = time.monotonic()
        high = self.wait_bound("pre-high")
        log(f"RESULT preempt_evicted_s={evicted_s:.3f} victim_gone_to_bound_s={time.monotonic() - t1:.3f}")
        self.assertEqual(high["spec"]["nodeName"], node)
        self.check_share_allocation(high, half)
        # A bound pod's PodScheduled condition is True (the Binding set it); the scheduler's earlier
        # PodScheduled=False patch, written asynchronously, must not land after it.
        time.sleep(0.5)
        conditions = {c.get("type"): c.get("status") for c in self.kube.get("pods", "pre-high")["status"].get(
            "conditions") or []}
        self.assertEqual(conditions.get("PodScheduled"), "True", conditions)
        self.audit(pool)

        # Only the protected pod is of lower priority now: the budget refuses its eviction.
        self.create_admitted(self.pod("pre-high-2", half, pool, priority_class=classes["high"][0]))
        self.addCleanup(lambda: self.kube.delete("pods", "pre-high-2", grace=0))

        def refused():
            return [e for e in self.events("pre-high-2", reason="FailedPreemption")] or None
        events = Kube.wait_for(refused, BIND_TIMEOUT, what="pre-high-2's FailedPreemption", on_poll=self.alive)
        self.assertIn("disruption budget", events[-1].get("message", ""), events[-1])
        protected = self.kube.get("pods", "pre-protected")
        self.assertFalse(protected["metadata"].get("deletionTimestamp"), "the budget's pod was evicted")
        self.assertFalse(self.kube.get("pods", "pre-high-2")["spec"].get("nodeName"))
        metrics = {(n, tuple(sorted(lbl.items()))): v for n, lbl, v in self.main.metrics()}
        self.assertGreaterEqual(metrics.get(("gpusched_scheduler_preemptions_total", (("result", "ok"),)), 0), 1)
        self.assertGreaterEqual(metrics.get(("gpusched_scheduler_preemptions_total", (("result", "failed"),)), 0), 1)
        self.audit(pool)

    @dump_logs_on_failure
    def test_9_host_ports_and_extended_resources(self):
        """One node that advertises one example.com/fpga: a pod binding host port 8080 fits, a second one on the
        same port does not ("didn't have free ports"); a pod asking for the FPGA fits, a second one does not
        ("Insufficient example.com/fpga"); nothing is left unevaluated (the Scheduled events are Normal)."""
        pool = "ports"
        node = list(self.make_pool(pool, nodes=1, gpus=2))[0]
        extra = {"cpu": "32", "memory": "128Gi", "pods": "110", "nvidia.com/gpu": "2", "example.com/fpga": "1"}
        self.kube.patch("nodes", node, {"status": {"capacity": extra, "allocatable": extra}}, sub="status",
                        patch_type="strategic")
        nodes = len(self.kube.list("nodes"))
        for name in ("port-a", "port-b"):
            p = self.pod(name, {}, pool)
            p["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
            self.kube.create("pods", p)
        for name in ("fpga-a", "fpga-b"):
            self.create_pod(name, {"gpusched.io/gpu": 1, "gpusched.io/gpu-memory": 1000, "gpusched.io/gpu-core": 10,
                                   "example.com/fpga": 1}, pool)
        placed = {}
        for first, second, why in (("port-a", "port-b", "didn't have free ports for the requested pod ports"),
                                   ("fpga-a", "fpga-b", "Insufficient example.com/fpga")):
            # Either of the two may come first: one binds, the other fails with the reason.
            def decided(a=first, b=second):
                pods = {n: self.kube.get("pods", n) for n in (a, b)}
                bound = [n for n, p in pods.items() if p["spec"].get("nodeName")]
                return bound if len(bound) == 1 else None
            bound = Kube.wait_for(decided, BIND_TIMEOUT, what=f"{first} or {second} to be bound", on_poll=self.alive)
            waiting = second if bound[0] == first else first
            msg = self.wait_failed(waiting, nodes=nodes)
            self.assert_unschedulable(waiting, msg)
            self.assertIn(why, msg)
            placed[bound[0]] = waiting
            scheduled = self.events(bound[0], reason="Scheduled")
            self.assertTrue(scheduled and scheduled[-1].get("type") == "Normal", scheduled)
        log(f"host ports and extended resources: bound {sorted(placed)}, pending {sorted(placed.values())}")
        self.audit(pool)


    @dump_logs_on_failure
    def test_10_gangs_never_deadlock(self):
        """Two nodes of 4 GPUs; two pod groups of 3 members x 2 GPUs (min-available 3), created interleaved: each
        fits alone, not both. Exactly one group is bound whole; the other holds nothing, its members wait with the
        group's reason; when the first group is deleted, the second is bound whole."""
        pool = "gang"
        self.make_pool(pool, nodes=2, gpus=4)
        groups = {"gang-a": [], "gang-b": []}
        for i in range(3):
            for group, members in groups.items():
                name = f"{group}-{i}"
                p = self.pod(name, {"nvidia.com/gpu": 2}, pool)
                p["metadata"]["annotations"] = {"gpusched.io/pod-group": group, "gpusched.io/min-available": "3"}
                self.kube.create("pods", p)
                members.append(name)

        def bound_of(group):
            return [n for n in groups[group] if (self.kube.get("pods", n) or {}).get("spec", {}).get("nodeName")]

        first = Kube.wait_for(lambda: next((g for g in groups if len(bound_of(g)) == 3), None), BIND_TIMEOUT,
                              what="one group bound whole", on_poll=self.alive)
        second = "gang-b" if first == "gang-a" else "gang-a"
        for name in groups[second]:
            msg = self.wait_failed(name)
            self.assertIn(f"pod group default/{second} (min-available 3)", msg)
        time.sleep(1)  # room for a wrong bind to show
        self.assertEqual(bound_of(second), [], f"{second} must hold nothing while {first} runs")
        for name in groups[first]:
            self.check_whole_allocation(self.kube.get("pods", name), count=2)
        self.audit(pool)

        for name in groups[first]:
            self.kube.delete("pods", name, grace=0)
        Kube.wait_for(lambda: len(bound_of(second)) == 3 or None, BIND_TIMEOUT, what=f"{second} bound whole",
                      on_poll=self.alive)
        log(f"gangs: {first} ran first; {second} ran whole after its deletion")
        self.audit(pool)

    @dump_logs_on_failure
    def test_12_pod_group_object_and_gang_preemption(self):
        """Two nodes of 2 GPUs, each held by a pod of low priority (2 GPUs). A PodGroup (minMember 2) and two pods of
        high priority naming it by the coscheduling label only (no gpusched.io/min-available), 2 GPUs each: the first
        alone waits for its group; with both, the group preempts for both members at once (each victim evicted through
        the Eviction API, both members nominated), binds nothing while the victims terminate, and binds both when
        they are gone."""
        pool = "gangpre"
        classes = self.priority_classes()
        self.make_pool(pool, nodes=2, gpus=2)
        two = {"nvidia.com/gpu": 2}
        victims = ["gp-low-0", "gp-low-1"]
        for name in victims:
            pod = self.pod(name, two, pool, priority_class=classes["low"][0])
            pod["spec"]["terminationGracePeriodSeconds"] = 30  # terminating until the test, as the kubelet, ends it
            self.create_admitted(pod)
            self.wait_bound(name)
        self.kube.call("POST", PODGROUPS, {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                                           "metadata": {"name": "gp"}, "spec": {"minMember": 2}})
        self.addCleanup(lambda: self.kube.raw("DELETE", f"{PODGROUPS}/gp"))
        members = ["gp-0", "gp-1"]

        def member(name):
            pod = self.pod(name, two, pool, priority_class=classes["high"][0])
            pod["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] = "gp"
            return pod
        self.create_admitted(member(members[0]))
        msg = self.wait_failed(members[0])
        self.assertIn("pod group default/gp (min-available 2): 0 placed and 1 pending", msg)
        self.assertFalse(self.kube.get("pods", victims[0])["metadata"].get("deletionTimestamp"))

        t0 = time.monotonic()
        self.create_admitted(member(members[1]))

        def both_evicted():
            pods = [self.kube.get("pods", n) for n in victims]
            return pods if all(p and p["metadata"].get("deletionTimestamp") for p in pods) else None
        Kube.wait_for(both_evicted, BIND_TIMEOUT, what="both victims evicted", on_poll=self.alive)
        evicted_s = time.monotonic() - t0
        for name in victims:
            preempted = self.events(name, reason="Preempted")
            self.assertTrue(preempted, f"no Preempted event on {name}")
            self.assertIn("Preempted by pod group default/gp", preempted[-1].get("message", ""))
        nominated = {n: (self.kube.get("pods", n).get("status") or {}).get("nominatedNodeName") for n in members}
        self.assertEqual(sorted(nominated.values()), [f"{pool}-node-0", f"{pool}-node-1"], nominated)
        time.sleep(0.5)
        for name in members:
            self.assertFalse(self.kube.get("pods", name)["spec"].get("nodeName"), f"{name} bound before the victims left")
        for name in victims:
            self.kube.delete("pods", name, grace=0)
        bound = [self.wait_bound(n) for n in members]
        log(f"RESULT gang_preempt_evicted_s={evicted_s:.3f}")
        self.assertEqual(sorted(p["spec"]["nodeName"] for p in bound), [f"{pool}-node-0", f"{pool}-node-1"])
        for pod in bound:
            self.check_whole_allocation(pod, count=2)
        self.audit(pool)

    @dump_logs_on_failure
    def test_11_queues_reclaim_and_report(self):
        """GpuQueues qa and qb (2 guaranteed GPUs each, children of qteam, which lists the default namespace), and
        qbad whose guarantee (3) exceeds its limit (2). A pod labelled with qother (another team's namespace) is
        refused with the reason and charged nowhere. The API
        server refuses a negative amount by the CRD's schema; the scheduler leaves qbad out and says so in its
        status (Valid=False, the reason). qb's pods borrow all 4 GPUs of a node; a pod of qa, within qa's
        guarantee, reclaims one GPU from qb (one of qb's pods evicted, a Preempted event) and binds; a second
        does the same; a third, beyond qa's guarantee, waits and evicts nothing (qb is within its own now). The
        queues' status tells what each holds."""
        pool = "queues"
        node = list(self.make_pool(pool, nodes=1, gpus=4))[0]

        def queue(name, guaranteed, limit=None, parent=None, namespaces=None):
            spec = {"guaranteed": {"gpus": guaranteed}}
            if limit is not None:
                spec["limit"] = {"gpus": limit}
            if parent is not None:
                spec["parent"] = parent
            if namespaces is not None:
                spec["namespaces"] = namespaces
            return {"apiVersion": "gpusched.io/v1alpha1", "kind": "GpuQueue", "metadata": {"name": name},
                    "spec": spec}
        status, body = self.kube.raw("POST", QUEUES, queue("q-negative", -1))
        self.assertEqual(status, 422, f"a negative guarantee must be refused by the schema: {body}")
        self.assertIn("spec.guaranteed.gpus", json.dumps(body))
        # The default namespace's pods may join qa or qb (their parent lists it), never qother (another team's).
        # qteam's guarantee covers whatever the earlier tests left running in the default namespace too (such pods
        # count in the queue serving it), so that qa stays within its guarantee and may reclaim.
        for q in (queue("qteam", 256, namespaces=["default"]), queue("qa", 2, parent="qteam"),
                  queue("qb", 2, parent="qteam"), queue("qbad", 3, 2),
                  queue("qother", 4, namespaces=["gpusched-e2e-other-team"])):
            self.kube.call("POST", QUEUES, q)
            self.addCleanup(lambda n=q["metadata"]["name"]: self.kube.raw("DELETE", f"{QUEUES}/{n}"))

        def condition(name):
            obj = self.kube.call("GET", f"{QUEUES}/{name}")
            return {c["type"]: c for c in (obj.get("status") or {}).get("conditions") or []}.get("Valid")
        bad = Kube.wait_for(lambda: condition("qbad"), 15, what="qbad's status", on_poll=self.alive)
        self.assertEqual(bad["status"], "False", bad)
        self.assertIn("guaranteed gpus 3 exceeds its limit 2", bad["message"])
        self.assertEqual(Kube.wait_for(lambda: condition("qa"), 15, what="qa's status")["status"], "True")

        def held(name):
            obj = self.kube.call("GET", f"{QUEUES}/{name}")
            return ((obj.get("status") or {}).get("allocated") or {}).get("gpus")

        def in_queue(name, q):
            p = self.pod(name, {"nvidia.com/gpu": 1}, pool)
            p["metadata"]["labels"]["gpusched.io/queue"] = q
            p["spec"]["terminationGracePeriodSeconds"] = 30  # evicted pods stay terminating, as on a real node
            return p
        # A pod labelled with another team's queue is refused, names the reason, and is charged nowhere.
        self.kube.create("pods", in_queue("jumper", "qother"))
        self.addCleanup(lambda: self.kube.delete("pods", "jumper", grace=0))
        jumped = self.wait_failed("jumper")
        self.assertIn("pods of namespace default may not join queue qother: it admits namespaces "
                      "gpusched-e2e-other-team only", jumped)
        self.assertFalse(self.kube.get("pods", "jumper")["spec"].get("nodeName"))
        self.assertFalse(held("qother"), "nothing may be charged to qother")
        self.kube.delete("pods", "jumper", grace=0)
        borrowers = [f"qb-{i}" for i in range(4)]
        for name in borrowers:
            self.kube.create("pods", in_queue(name, "qb"))
        for name in borrowers:
            self.wait_bound(name)

        Kube.wait_for(lambda: held("qb") == 4 or None, 15, what="qb's status to show 4 GPUs", on_poll=self.alive)

        evicted = []
        for i in range(2):
            name = f"qa-{i}"
            self.kube.create("pods", in_queue(name, "qa"))

            def victim():
                for b in borrowers:
                    pod = self.kube.get("pods", b)
                    if b not in evicted and pod and pod["metadata"].get("deletionTimestamp"):
                        return b
                return None
            gone = Kube.wait_for(victim, BIND_TIMEOUT, what=f"a pod of qb evicted for {name}", on_poll=self.alive)
            evicted.append(gone)
            preempted = self.events(gone, reason="Preempted")
            self.assertTrue(preempted, f"no Preempted event on {gone}")
            self.assertIn(f"Preempted by default/{name} on node {node}", preempted[-1].get("message", ""))
            failed = self.events(name, reason="FailedScheduling")
            self.assertTrue(any("reclaimed for queue qa's guarantee" in e.get("message", "") for e in failed),
                            [e.get("message") for e in failed])
            self.kube.delete("pods", gone, grace=0)  # the kubelet's part
            self.wait_bound(name)
        # qa holds its guarantee, qb is down to its own: a third pod of qa waits and evicts nothing.
        self.kube.create("pods", in_queue("qa-2", "qa"))
        self.addCleanup(lambda: self.kube.delete("pods", "qa-2", grace=0))
        self.wait_failed("qa-2")
        time.sleep(1)  # room for a wrong eviction to show
        for b in borrowers:
            if b not in evicted:
                self.assertFalse(self.kube.get("pods", b)["metadata"].get("deletionTimestamp"),
                                 f"{b} was evicted although qb is within its guarantee")
        self.assertFalse(self.kube.get("pods", "qa-2")["spec"].get("nodeName"))
        Kube.wait_for(lambda: (held("qa"), held("qb")) == (2, 2) or None, 15, what="the queues' status (2 and 2)",
                      on_poll=self.alive)
        obj = self.kube.call("GET", f"{QUEUES}/qb")
        self.assertEqual(obj["status"]["reclaimedPods"], 2, obj["status"])
        metrics = {(n, tuple(sorted(lbl.items()))): v for n, lbl, v in self.main.metrics()}
        self.assertEqual(metrics.get(("gpusched_queue_reclaimed_pods_total", (("queue", "qb"),))), 2)
        log(f"queues: qa reclaimed {evicted} from qb; qa-2 waits beyond qa's guarantee")
        for name in ["qa-0", "qa-1"] + [b for b in borrowers if b not in evicted]:
            self.kube.delete("pods", name, grace=0)
        self.audit(pool)


    @dump_logs_on_failure
    def test_13_seed_forms(self):
        """The request forms of the systems gpusched replaces, as they mean them, on a real API server.
        Priority labels: the API server sets spec.priority 0 on a pod that names no PriorityClass, yet the pod
        labelled genius/priority 100 binds before the one labelled 1 when a one-GPU node appears.
        KETI: three verbatim seed pods (keti.com/mpsgpu 1, cpu 250m, memory 6400Mi, hostIPC, /tmp/nvidia-mps) on
        a node of one GPU all bind to that GPU as MPS shares, none exclusive."""
        pool = "seeds"
        for name, value in (("glabel-low", "1"), ("glabel-high", "100")):
            pod = self.pod(name, WHOLE, pool)
            pod["metadata"]["labels"]["genius/priority"] = value
            created = self.kube.create("pods", pod)
            self.assertEqual(created["spec"].get("priority"), 0, "the Priority admission plugin's default")
            self.wait_failed(name)
        self.make_pool(pool, nodes=1, gpus=1)
        self.check_whole_allocation(self.wait_bound("glabel-high"))
        self.assertFalse(self.kube.get("pods", "glabel-low")["spec"].get("nodeName"), "the low label waits")
        self.kube.delete("pods", "glabel-low", grace=0)
        self.kube.delete("pods", "glabel-high", grace=0)
        Kube.wait_for(lambda: self.kube.get("pods", "glabel-high") is None or None, 30,
                      what="glabel-high to be gone")

        keti = ["keti-nbody-0", "keti-nbody-1", "keti-nbody-2"]
        for name in keti:
            pod = keti_seed_pod(name, labels={POOL_LABEL: pool}, node_selector={POOL_LABEL: pool})
            pod["spec"]["schedulerName"] = SCHEDULER_NAME
            self.kube.create("pods", pod)
        uuids = set()
        for name in keti:
            alloc = self.allocation(self.wait_bound(name))
            gpus = [g for c in alloc["containers"] for g in c.get("gpus") or []]
            self.assertEqual(len(gpus), 1, alloc)
            self.assertFalse(gpus[0].get("exclusive"), f"keti.com/mpsgpu is an MPS share: {alloc}")
            self.assertEqual(gpus[0].get("milli"), 100, f"an equal share of 10 %: {alloc}")
            uuids.add(gpus[0]["uuid"])
        self.assertEqual(len(uuids), 1, "all three on the node's one GPU")
        log(f"seeds: genius/priority 100 before 1 with spec.priority 0; 3 KETI pods share {uuids.pop()}")
        for name in keti:
            self.kube.delete("pods", name, grace=0)
        self.audit(pool)

    @dump_logs_on_failure
    def test_14_interference_aware(self):
        """A second `gpusched scheduler` (its own schedulerName, policy interference-aware, the model trained from
        ../shared's co-location measurements) on two 1-GPU P100 nodes: the first two pods take empty GPUs, a
        Transformer joins the Recommendation model (its measured best partner) rather than the ResNet-50, and a second
        ResNet-50, which does not fit in memory next to the first, waits with the model's reason."""
        data = os.path.join(REPO_ROOT, "..", "shared", "data", "interference")
        if not os.path.isdir(data):
            self.skipTest(f"no co-location data at {data} to train the model")
        model = os.path.join(self.cp.dir, "interference-model.json")
        t0 = time.monotonic()
        subprocess.run([lab_binary(), "interference", "train", "--data", data, "--out", model],
                       check=True, stdout=subprocess.DEVNULL, timeout=300)
        log(f"interference model trained in {time.monotonic() - t0:.1f}s")
        name = "gpusched-colo"
        colo = self.new_scheduler("colo-scheduler", leader_election=False)
        with open(colo.config) as f:
            text = f.read()
        text = text.replace(f"schedulerNames: [{SCHEDULER_NAME}]", f"schedulerNames: [{name}]", 1)
        text = text.replace("policy: binpack", "policy: interference-aware", 1)
        with open(colo.config, "w") as f:
            f.write(text + "interference: {enabled: true}\n")
        colo.extra_args = ["--interference-model", model]
        colo.start()
        pool = "colo"
        for i in range(2):
            self.kube.create_gpu_node(f"{pool}-node-{i}", gpus=1, labels={POOL_LABEL: pool},
                                      model="Tesla-P100-PCIE-16GB", gpu_memory_mib=16384)
        half = {"gpusched.io/gpu": 1, "gpusched.io/gpu-memory": 4000, "gpusched.io/gpu-core": 50}

        def create(pod_name, app):
            pod = gpu_pod(pod_name, half, labels={POOL_LABEL: pool}, node_selector={POOL_LABEL: pool},
                          annotations={"gpusched.io/app": app})
            pod["spec"]["schedulerName"] = name
            self.kube.create("pods", pod)

        msg = self.colocation_scenario(create, lambda name: self.wait_bound(name)["spec"]["nodeName"],
                                       self.wait_failed)
        log(f"interference-aware under the scheduler: the Transformer joined the Recommendation model; "
            f"colo-resnet-2 waits: {msg}")
        for pod_name in ("colo-resnet", "colo-rec", "colo-transformer", "colo-resnet-2"):
            self.kube.delete("pods", pod_name, grace=0)
        colo.stop()

if __name__ == "__main__":
    unittest.main(verbosity=2)
