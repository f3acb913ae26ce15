"""A real Kubernetes control plane on loopback for end-to-end tests: etcd, kube-apiserver and kube-scheduler.
With kube_scheduler=False, etcd and kube-apiserver only (for gpusched's own scheduler, test_scheduler.py).

No kubelet and no controller-manager: nodes are Node objects made through the API (see kube.py). Facts behind
every flag: ../../../shared/design/real-kubernetes.md (front-proxy flags, node taints, default ServiceAccount,
v1beta1 scheduler config for 1.20).

Binaries: kube-apiserver and kube-scheduler from $GPUSCHED_K8S_BIN, else from the directory that
`scripts/build-k8s.sh --check` prints; etcd from $GPUSCHED_ETCD, else `etcd` on PATH (Debian's etcd-server).

Usage:
    with ControlPlane(extender_url="http://127.0.0.1:PORT/scheduler") as cp:
    # or over TLS: extender_url="https://...", extender_tls=lambda pki: {"certFile": ..., "keyFile": ..., "caFile": ...}
    # or without kube-scheduler: ControlPlane(kube_scheduler=False)
        kube = cp.kube()        # admin client (O=system:masters)
        cp.kubeconfig           # path of a kubeconfig for that client

Every process logs to a file in the temporary directory; `cp.log_tails()` returns their last lines. Processes run
in their own process group with a parent-death signal, and are stopped in reverse order (SIGTERM, then SIGKILL),
also when start-up fails half way.
"""

import atexit
import base64
import ctypes
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import http.client

from kube import Kube

REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

# Processes still running, stopped at interpreter exit if a test forgot them (or was interrupted).
_LIVE = set()


def _kill_leftovers():
    for proc in list(_LIVE):
        proc.stop()


atexit.register(_kill_leftovers)


class ControlPlaneError(RuntimeError):
    pass


def find_k8s_bin():
    """Returns (directory, None) with kube-apiserver and kube-scheduler, or (None, why)."""
    env = os.environ.get("GPUSCHED_K8S_BIN")
    if env:
        for name in ("kube-apiserver", "kube-scheduler"):
            if not os.access(os.path.join(env, name), os.X_OK):
                return None, f"GPUSCHED_K8S_BIN={env} has no executable {name}"
        return env, None
    script = os.path.join(REPO_ROOT, "scripts", "build-k8s.sh")
    if not os.path.exists(script):
        return None, f"{script} is missing and GPUSCHED_K8S_BIN is unset"
    res = subprocess.run(["bash", script, "--check"], capture_output=True, text=True)
    if res.returncode != 0:
        return None, ("no Kubernetes binaries: GPUSCHED_K8S_BIN is unset and scripts/build-k8s.sh --check says: "
                      + res.stderr.strip() + " (run scripts/e2e.sh or scripts/build-k8s.sh to build them)")
    lines = res.stdout.strip().splitlines()
    return (lines[-1], None) if lines else (None, "scripts/build-k8s.sh --check printed nothing")


def find_etcd():
    path = os.environ.get("GPUSCHED_ETCD") or shutil.which("etcd") or "/usr/bin/etcd"
    if not os.access(path, os.X_OK):
        return None, "no etcd (install Debian's etcd-server or set GPUSCHED_ETCD)"
    return path, None


LAB_SUBCOMMANDS = ("simulate", "monitor", "interference")


def lab_binary():
    """gpusched-lab (simulate, monitor, interference): $GPUSCHED_LAB_BIN, else beside $GPUSCHED_BIN."""
    lab = os.environ.get("GPUSCHED_LAB_BIN")
    if lab:
        return lab
    return os.path.join(os.path.dirname(os.environ.get("GPUSCHED_BIN", "")), "gpusched-lab")


def suite_skip_reason(subcommand=None):
    """Why an e2e suite cannot run here, or None: the Kubernetes binaries, etcd, $GPUSCHED_BIN and, when given, its
    `subcommand` (a lab subcommand on gpusched-lab: lab_binary())."""
    for _, why in (find_k8s_bin(), find_etcd()):
        if why:
            return why
    binary = os.environ.get("GPUSCHED_BIN")
    if not binary or not os.access(binary, os.X_OK):
        return "GPUSCHED_BIN is unset or not executable (ctest sets it to the gpusched target)"
    if subcommand in LAB_SUBCOMMANDS:
        binary = lab_binary()
        if not os.access(binary, os.X_OK):
            return f"{binary} (gpusched-lab, for `{subcommand}`) is not executable; set GPUSCHED_LAB_BIN"
    if subcommand:
        res = subprocess.run([binary, subcommand, "--help"], capture_output=True, text=True, timeout=30)
        if not re.search(rf"(?m)^Usage: \S+ {subcommand}\b", res.stdout + res.stderr):
            return f"{binary} has no `{subcommand}` subcommand"
    return None


def binary_version(path):
    """(major, minor) from `<binary> --version` ("Kubernetes v1.20.2")."""
    out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
    m = re.search(r"v(\d+)\.(\d+)", out)
    if not m:
        raise ControlPlaneError(f"cannot read the version of {path}: {out!r}")
    return int(m.group(1)), int(m.group(2))


def scheduler_config_api(version):
    """The KubeSchedulerConfiguration apiVersion a kube-scheduler of that (major, minor) reads."""
    if version < (1, 22):
        return "kubescheduler.config.k8s.io/v1beta1"
    if version < (1, 25):
        return "kubescheduler.config.k8s.io/v1beta2"
    return "kubescheduler.config.k8s.io/v1"


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _set_pdeathsig():
    # Runs in the child between fork and exec: die with the test process, even when it is SIGKILLed (ctest timeout).
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


class Process:
    """One child process with its log file; stop() is idempotent."""

    def __init__(self, name, argv, log_path, env=None):
        self.name = name
        self.argv = argv
        self.log_path = log_path
        self._log = open(log_path, "ab")
        self._log.write(("$ " + " ".join(argv) + "\n").encode())
        self._log.flush()
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
                                     env=env, start_new_session=True, preexec_fn=_set_pdeathsig)
        self.pid = self.proc.pid
        _LIVE.add(self)

    def alive(self):
        return self.proc.poll() is None

    def check_alive(self):
        if not self.alive():
            raise ControlPlaneError(f"{self.name} exited with status {self.proc.returncode}:\n{self.tail(40)}")

    def stop(self, grace=5.0, sig=signal.SIGTERM):
        """Signals the process (its whole group), waits `grace` seconds, then SIGKILLs it."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.pid, sig)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait()
        else:
            # The leader is gone; make sure nothing it started lingers in its group.
            try:
                os.killpg(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        _LIVE.discard(self)
        if not self._log.closed:
            self._log.close()

    def kill(self):
        self.stop(grace=5.0, sig=signal.SIGKILL)

    def tail(self, lines=30, pattern=None):
        """The last `lines` lines of the log (of those matching `pattern`, a compiled regex, when given)."""
        try:
            with open(self.log_path, "rb") as f:
                data = f.read()
        except OSError as e:
            return f"(cannot read {self.log_path}: {e})"
        text = data.decode(errors="replace").splitlines()
        if pattern is not None:
            text = [l for l in text if pattern.search(l)]
        return "\n".join(text[-lines:])


def wait_until(predicate, timeout, interval=0.1, what="condition", alive=()):
    """Polls predicate() until it returns something truthy; raises TimeoutError after `timeout` seconds.

    `alive` lists Process objects that must keep running meanwhile (fails fast when one dies)."""
    deadline = time.monotonic() + timeout
    last_exc = None
    while True:
        for p in alive:
            p.check_alive()
        try:
            value = predicate()
            if value:
                return value
        except (OSError, http.client.HTTPException, ssl.SSLError) as e:
            last_exc = e
        if time.monotonic() >= deadline:
            extra = f" (last error: {last_exc})" if last_exc else ""
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}{extra}")
        time.sleep(interval)


def _openssl(*args, cwd):
    res = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if res.returncode != 0:
        raise ControlPlaneError(f"openssl {' '.join(args)} failed: {res.stderr}")


class Pki:
    """The certificates kube-apiserver needs, made with the openssl CLI in `dir`."""

    def __init__(self, dir):
        self.dir = dir
        os.makedirs(dir, exist_ok=True)
        j = lambda n: os.path.join(dir, n)
        self.ca_crt, self.ca_key = j("ca.crt"), j("ca.key")
        self.front_proxy_ca_crt, self.front_proxy_ca_key = j("front-proxy-ca.crt"), j("front-proxy-ca.key")
        self._ca("ca", "gpusched-e2e-ca")
        self._ca("front-proxy-ca", "gpusched-e2e-front-proxy-ca")
        self.apiserver_crt, self.apiserver_key = self._leaf(
            "apiserver", "/CN=kube-apiserver", "ca", "serverAuth",
            "subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,"
            "DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local")
        self.admin_crt, self.admin_key = self._leaf("admin", "/O=system:masters/CN=gpusched-e2e-admin", "ca",
                                                    "clientAuth")
        self.front_proxy_client_crt, self.front_proxy_client_key = self._leaf(
            "front-proxy-client", "/CN=front-proxy-client", "front-proxy-ca", "clientAuth")
        self.sa_key, self.sa_pub = j("sa.key"), j("sa.pub")
        _openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", "sa.key", cwd=dir)
        _openssl("pkey", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=dir)

    def _ca(self, name, cn):
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.crt",
                 "-days", "3", "-subj", f"/CN={cn}",
                 "-addext", "basicConstraints=critical,CA:TRUE",
                 "-addext", "keyUsage=critical,keyCertSign,cRLSign,digitalSignature", cwd=self.dir)

    def client_cert(self, name, subject):
        """(cert, key) of a client certificate signed by the cluster CA, e.g. subject "/CN=system:serviceaccount:
        kube-system:gpusched-extender" to act as that ServiceAccount (RBAC matches it by user name)."""
        return self._leaf(name, subject, "ca", "clientAuth")

    def server_cert(self, name, ips=(), dns=()):
        """(cert, key) of a serving certificate signed by the cluster CA for these IP and DNS subjectAltNames (what
        kube-apiserver checks when it calls a webhook's URL with the CA as caBundle)."""
        san = ",".join([f"IP:{ip}" for ip in ips] + [f"DNS:{d}" for d in dns])
        return self._leaf(name, f"/CN={name}", "ca", "serverAuth", f"subjectAltName={san}")

    def _leaf(self, name, subj, ca, usage, san=None):
        ext = os.path.join(self.dir, f"{name}.ext")
        with open(ext, "w") as f:
            f.write("basicConstraints=CA:FALSE\n")
            f.write("keyUsage=critical,digitalSignature,keyEncipherment\n")
            f.write(f"extendedKeyUsage={usage}\n")
            if san:
                f.write(san + "\n")
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
                 "-subj", subj, cwd=self.dir)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
                 "-CAcreateserial", "-days", "3", "-sha256", "-extfile", ext, "-out", f"{name}.crt", cwd=self.dir)
        return os.path.join(self.dir, f"{name}.crt"), os.path.join(self.dir, f"{name}.key")


def write_kubeconfig(path, server, ca_crt, client_crt, client_key, inline=True):
    """A kubeconfig for one client-certificate user; inline=True embeds the PEMs as *-data (as kubeadm does)."""
    def b64(p):
        with open(p, "rb") as f:
            return base64.b64encode(f.read()).decode()
    if inline:
        cluster = f"    certificate-authority-data: {b64(ca_crt)}\n"
        user = f"    client-certificate-data: {b64(client_crt)}\n    client-key-data: {b64(client_key)}\n"
    else:
        cluster = f"    certificate-authority: {ca_crt}\n"
        user = f"    client-certificate: {client_crt}\n    client-key: {client_key}\n"
    with open(path, "w") as f:
        f.write("apiVersion: v1\nkind: Config\n"
                "clusters:\n- name: e2e\n  cluster:\n" + f"    server: {server}\n" + cluster +
                "users:\n- name: admin\n  user:\n" + user +
                "contexts:\n- name: e2e\n  context:\n    cluster: e2e\n    user: admin\n    namespace: default\n"
                "current-context: e2e\n")
    return path


class ControlPlane:
    """etcd + kube-apiserver + kube-scheduler on 127.0.0.1 in a temporary directory (kube_scheduler=False: no
    kube-scheduler; pods then wait for another scheduler)."""

    def __init__(self, extender_url=None, k8s_bin=None, etcd=None, keep_dir=None, log=print, extender_tls=None,
                 kube_scheduler=True):
        if extender_url and not kube_scheduler:
            raise ValueError("an extender URL needs kube-scheduler (kube_scheduler=True)")
        self.extender_url = extender_url
        self.kube_scheduler = kube_scheduler
        # kube-scheduler's tlsConfig for the extender (ExtenderTLSConfig: certFile, keyFile, caFile, serverName, ...):
        # a dict, or a function of the Pki returning one (certificates are made once the Pki exists).
        self.extender_tls = extender_tls
        self.k8s_bin = k8s_bin
        self.etcd_bin = etcd
        self.log = log
        self.keep_dir = keep_dir if keep_dir is not None else bool(os.environ.get("GPUSCHED_E2E_KEEP"))
        self.dir = None
        self.processes = []  # in start order
        self.timings = {}

    # -- lifecycle --------------------------------------------------------------------------------------------

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def start(self):
        t0 = time.monotonic()
        if self.k8s_bin is None:
            self.k8s_bin, why = find_k8s_bin()
            if why:
                raise ControlPlaneError(why)
        if self.etcd_bin is None:
            self.etcd_bin, why = find_etcd()
            if why:
                raise ControlPlaneError(why)
        self.apiserver_bin = os.path.join(self.k8s_bin, "kube-apiserver")
        self.scheduler_bin = os.path.join(self.k8s_bin, "kube-scheduler")
        # Both binaries come from one release; without kube-scheduler, ask kube-apiserver.
        self.version = binary_version(self.scheduler_bin if self.kube_scheduler else self.apiserver_bin)
        base = os.environ.get("GPUSCHED_E2E_TMPDIR")  # default: $TMPDIR or /tmp; /dev/shm is faster for etcd
        self.dir = tempfile.mkdtemp(prefix="gpusched-e2e-", dir=base)
        self.pki = Pki(os.path.join(self.dir, "pki"))
        self.timings["pki_s"] = time.monotonic() - t0
        self._start_etcd()
        self._start_apiserver()
        self.timings["apiserver_ready_s"] = time.monotonic() - t0
        if self.kube_scheduler:
            self._start_scheduler()
        self.timings["startup_s"] = time.monotonic() - t0
        self.log(f"control plane v{self.version[0]}.{self.version[1]} up in {self.timings['startup_s']:.1f}s "
                 f"(apiserver {self.server}, {'' if self.kube_scheduler else 'no kube-scheduler, '}dir {self.dir})")

    def stop(self):
        for p in reversed(self.processes):
            p.stop()
        self.processes = []
        if self.dir and not self.keep_dir:
            shutil.rmtree(self.dir, ignore_errors=True)
        elif self.dir:
            self.log(f"kept {self.dir} (logs, certificates, configs, kubeconfigs)")
        self.dir = None

    def _spawn(self, name, argv, env=None):
        p = Process(name, argv, os.path.join(self.dir, f"{name}.log"), env=env)
        self.processes.append(p)
        return p

    def process(self, name):
        for p in self.processes:
            if p.name == name:
                return p
        return None

    # Log lines worth showing when a test fails: errors and warnings of etcd and kube-apiserver, and everything
    # of kube-scheduler except its start-up chatter about informers and certificates.
    _INTERESTING = {
        "etcd": re.compile(r'"level":"(error|fatal|panic)"|^\$ '),
        "kube-apiserver": re.compile(r"^[EF]\d{4} |^panic|^\$ "),
        "kube-scheduler": re.compile(r"^(\$ |panic|goroutine |[WEF]\d{4} |I\d{4} [\d:.]+ +\d+ (?!(reflector|tlsconfig|"
                                     r"named_certificates|shared_informer|configmap_cafile_content|"
                                     r"requestheader_controller|dynamic_serving_content|secure_serving|registry|"
                                     r"flags)\.go))"),
    }

    def log_tails(self, lines=40):
        """The last interesting lines of every process's log, for failure reports."""
        out = []
        for p in self.processes:
            pattern = self._INTERESTING.get(p.name)
            out.append(f"----- {p.name} ({p.log_path}), last {lines} relevant lines -----\n"
                       f"{p.tail(lines, pattern)}")
        return "\n".join(out)

    # -- etcd -------------------------------------------------------------------------------------------------

    def _start_etcd(self):
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client}"
        # etcd refuses ETCD_* variables that duplicate flags ("conflicting environment variable").
        env = {k: v for k, v in os.environ.items() if not k.startswith("ETCD")}
        etcd = self._spawn("etcd", [
            self.etcd_bin, "--name", "e2e", "--data-dir", os.path.join(self.dir, "etcd"),
            "--listen-client-urls", self.etcd_url, "--advertise-client-urls", self.etcd_url,
            "--listen-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-cluster", f"e2e=http://127.0.0.1:{peer}",
            "--initial-cluster-state", "new", "--logger", "zap", "--log-level", "warn"], env=env)

        def healthy():
            conn = http.client.HTTPConnection("127.0.0.1", client, timeout=2)
            try:
                conn.request("GET", "/health")
                r = conn.getresponse()
                return r.status == 200 and b"true" in r.read()
            finally:
                conn.close()
        wait_until(healthy, 30, what="etcd /health", alive=[etcd])

    # -- kube-apiserver ---------------------------------------------------------------------------------------

    def _start_apiserver(self):
        port = free_port()
        self.port = port
        self.server = f"https://127.0.0.1:{port}"
        pki = self.pki
        argv = [
            self.apiserver_bin,
            f"--etcd-servers={self.etcd_url}",
            f"--secure-port={port}", "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            f"--cert-dir={os.path.join(self.dir, 'apiserver-certs')}",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--authorization-mode=Node,RBAC",
            f"--client-ca-file={pki.ca_crt}",
            f"--tls-cert-file={pki.apiserver_crt}", f"--tls-private-key-file={pki.apiserver_key}",
            f"--service-account-key-file={pki.sa_pub}", f"--service-account-signing-key-file={pki.sa_key}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--requestheader-client-ca-file={pki.front_proxy_ca_crt}",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-username-headers=X-Remote-User",
            f"--proxy-client-cert-file={pki.front_proxy_client_crt}",
            f"--proxy-client-key-file={pki.front_proxy_client_key}",
            "--allow-privileged=true", "--profiling=false", "--v=1",
        ]
        # Audit log: who asked for what and what the answer was, for every request (level Metadata: no bodies).
        # rbac_audit.py derives from it the verbs each gpusched component uses. Blocking mode writes each event
        # before the request completes; a large size limit keeps it one file (rbac_audit reads rotated ones too).
        self.audit_log = os.path.join(self.dir, "audit.log")
        audit_policy = os.path.join(self.dir, "audit-policy.yaml")
        with open(audit_policy, "w") as f:
            f.write("apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n")
        argv += [f"--audit-policy-file={audit_policy}", f"--audit-log-path={self.audit_log}",
                 "--audit-log-format=json", "--audit-log-mode=blocking", "--audit-log-maxsize=2000"]
        if self.version < (1, 24):
            argv.append("--insecure-port=0")  # the flag is gone in 1.24; 0 is already the default in 1.20
        apiserver = self._spawn("kube-apiserver", argv)
        self.kubeconfig = write_kubeconfig(os.path.join(self.dir, "admin.kubeconfig"), self.server, pki.ca_crt,
                                           pki.admin_crt, pki.admin_key, inline=True)
        self.kubeconfig_files = write_kubeconfig(os.path.join(self.dir, "admin-files.kubeconfig"), self.server,
                                                 pki.ca_crt, pki.admin_crt, pki.admin_key, inline=False)
        kube = self.kube()

        def ready():
            status, _ = kube.raw("GET", "/readyz")
            return status == 200
        wait_until(ready, 90, interval=0.25, what="kube-apiserver /readyz", alive=[apiserver])
        # The API server creates its system namespaces (default, kube-system, ...) just after it is ready; a test's
        # first object in "default" must not race that.
        for ns in ("default", "kube-system"):
            wait_until(lambda ns=ns: kube.raw("GET", f"/api/v1/namespaces/{ns}")[0] == 200, 30, interval=0.1,
                       what=f"namespace {ns}", alive=[apiserver])

    def kube(self):
        return Kube("127.0.0.1", self.port, self.pki.ca_crt, self.pki.admin_crt, self.pki.admin_key)

    # -- kube-scheduler ---------------------------------------------------------------------------------------

    def scheduler_config_text(self):
        """The KubeSchedulerConfiguration for this kube-scheduler's version. With an extender URL, it is the user's
        file from deploy/extender (so the tests check what users deploy), with the URL, kubeconfig and leader election
        replaced; without one, a bare config."""
        api = scheduler_config_api(self.version)
        if self.extender_url:
            name = "kube-scheduler-config.yaml" if api.endswith("/v1") else "kube-scheduler-config-v1beta1.yaml"
            with open(os.path.join(REPO_ROOT, "deploy", "extender", name)) as f:
                text = f.read()
            subs = [(r"(?m)^apiVersion: .*$", f"apiVersion: {api}"),
                    (r"(?m)^(\s+kubeconfig:) .*$", rf"\g<1> {self.kubeconfig}"),
                    (r"(?m)^(\s+leaderElect:) .*$", r"\g<1> false"),
                    # The suites' pods leave schedulerName unset: this kube-scheduler is the only one.
                    (r"(?m)^(- schedulerName:) .*$", r"\g<1> default-scheduler"),
                    (r"(?m)^(- urlPrefix:) .*$", rf"\g<1> {self.extender_url}")]
            tls = self.extender_tls(self.pki) if callable(self.extender_tls) else self.extender_tls
            if tls:
                # HTTPS with kube-scheduler's client certificate, verifying the extender's certificate with caFile.
                fields = "".join(f"\n\\g<1>  {k}: {v}" for k, v in tls.items())
                subs.append((r"(?m)^([ \t]+)enableHTTPS: .*$",
                             r"\g<1>enableHTTPS: true\n\g<1>tlsConfig:" + fields))
            for pattern, repl in subs:
                text, n = re.subn(pattern, repl, text)
                if n != 1:
                    raise ControlPlaneError(f"deploy/extender/{name}: expected one match of {pattern!r}, found {n}")
        else:
            text = (f"apiVersion: {api}\nkind: KubeSchedulerConfiguration\n"
                    f"clientConnection:\n  kubeconfig: {self.kubeconfig}\n"
                    "leaderElection:\n  leaderElect: false\n")
        if api.endswith("v1beta1"):
            # With --config, 1.20 ignores --port and serves healthz and metrics insecurely on 0.0.0.0:10251 unless
            # the config says otherwise: a fixed port that would clash between two runs. Neither "" (means the
            # default) nor port 0 (rejected by validation) turns it off, so give it a free loopback port.
            port = free_port()
            text += f"healthzBindAddress: 127.0.0.1:{port}\nmetricsBindAddress: 127.0.0.1:{port}\n"
        return text

    def _start_scheduler(self):
        cfg = os.path.join(self.dir, "scheduler-config.yaml")
        with open(cfg, "w") as f:
            f.write(self.scheduler_config_text())
        port = free_port()
        argv = [self.scheduler_bin, f"--config={cfg}", f"--secure-port={port}", "--bind-address=127.0.0.1",
                f"--cert-dir={os.path.join(self.dir, 'scheduler-certs')}",
                f"--authentication-kubeconfig={self.kubeconfig}", f"--authorization-kubeconfig={self.kubeconfig}",
                "--v=2"]
        if self.version < (1, 23):
            argv.append("--port=0")  # no insecure healthz port (removed in 1.23)
        sched = self._spawn("kube-scheduler", argv)
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE

        def healthy():
            conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=2, context=ctx)
            try:
                conn.request("GET", "/healthz")
                r = conn.getresponse()
                r.read()
                return r.status == 200
            finally:
                conn.close()
        wait_until(healthy, 60, interval=0.25, what="kube-scheduler /healthz", alive=[sched])
