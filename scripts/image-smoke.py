#!/usr/bin/env python3
"""Builds gpusched's daemon image without a registry or a container engine, and runs it.

1. A Debian bookworm root filesystem (debootstrap --variant=minbase; the base is cached as a tarball under
   ~/.cache/gpusched), with exactly the runtime packages of the Dockerfile's last stage (apt-get in a chroot),
   and the `daemons` component of BUILD_DIR installed into /usr/local (cmake --install --strip).
2. An OCI image layout of that tree (scripts/oci-layout.py), unpacked again with umoci: what runs below is the
   image's own rootfs, not the directory it was made from.
3. In the unpacked rootfs (a chroot in a private mount namespace with /proc and /dev bound, as user 65532 like the
   Dockerfile's USER): `gpusched --version`, then each daemon of deploy/base with its manifest's arguments, its
   ConfigMaps written where the manifest mounts them, and an in-cluster service account whose API server does not
   answer. A daemon passes when it gets as far as the API server (its log names it) or is still running after
   --seconds; it fails when the loader misses a library, an argument is refused, or a file it reads is missing.
   The agent's manifest loads NVML, which the NVIDIA container runtime mounts into GPU pods and the image does not
   carry: its run passes when it stops at exactly that, and it runs a second time with --fake-gpus.
A sanitized build (the CI preset) also gets the sanitizer runtimes its binary names (libasan8, libubsan1): they
are added to the rootfs for this run only and listed as such.

Usage: scripts/image-smoke.py BUILD_DIR [--out DIR] [--seconds N]    (as root: debootstrap, chroot, mounts)
Prints one line per step and `image-smoke: N of N daemons started` at the end; exit 0 when every step passed.
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "scripts"))
from importlib import import_module  # noqa: E402

image_deps = import_module("check-image-deps")

MIRROR = "http://deb.debian.org/debian"
CACHE = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "gpusched")
SANITIZER_PACKAGES = {"libasan.so.8": "libasan8", "libubsan.so.1": "libubsan1", "libtsan.so.2": "libtsan2"}
USER = "65532:65532"


def log(msg):
    print(f"image-smoke: {msg}", flush=True)


def run(argv, **kw):
    return subprocess.run(argv, check=True, **kw)


def base_rootfs(root):
    """debootstrap's minbase, from the cached tarball when there is one."""
    tarball = os.path.join(CACHE, "bookworm-minbase.tar")
    os.makedirs(CACHE, exist_ok=True)
    if os.path.isfile(tarball):
        os.makedirs(root)
        run(["tar", "-xf", tarball, "-C", root])
        log(f"base: bookworm minbase from {tarball}")
        return
    t0 = time.monotonic()
    run(["debootstrap", "--variant=minbase", "bookworm", root, MIRROR], stdout=subprocess.DEVNULL)
    run(["tar", "-cf", tarball + ".part", "-C", root, "."])
    os.replace(tarball + ".part", tarball)
    log(f"base: debootstrap --variant=minbase bookworm in {time.monotonic() - t0:.0f} s (cached in {tarball})")


def chroot_apt(root, packages):
    shutil.copy("/etc/resolv.conf", os.path.join(root, "etc", "resolv.conf"))
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    run(["chroot", root, "apt-get", "update", "-qq"], env=env, stdout=subprocess.DEVNULL)
    run(["chroot", root, "apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages], env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run(["chroot", root, "apt-get", "clean"])
    shutil.rmtree(os.path.join(root, "var", "lib", "apt", "lists"), ignore_errors=True)
    os.makedirs(os.path.join(root, "var", "lib", "apt", "lists", "partial"), exist_ok=True)


def inside(root, path):
    """`path` of the chroot as a host path, following the rootfs's own symlinks inside it (Debian's /var/run ->
    /run is absolute: followed on the host it would leave the rootfs)."""
    here = root
    for part in [p for p in path.split("/") if p]:
        nxt = os.path.join(here, part)
        for _ in range(40):
            if not os.path.islink(nxt):
                break
            target = os.readlink(nxt)
            nxt = os.path.join(root, target.lstrip("/")) if target.startswith("/") else os.path.join(here, target)
        here = nxt
    return here


def workloads():
    """(name, args, configmap volumes {mountPath: data}, emptyDir mountPaths) of every gpusched container in
    deploy/base and deploy/extender."""
    docs, generated = [], {}
    for d in ("base/scheduler", "base/webhook", "base/agent", "extender"):
        folder = os.path.join(REPO, "deploy", d)
        with open(os.path.join(folder, "kustomization.yaml")) as f:
            kustomization = yaml.safe_load(f) or {}
        # configMapGenerator: each file is a key (KEY=FILE names the key).
        for gen in kustomization.get("configMapGenerator", []):
            data = {}
            for entry in gen.get("files", []):
                key, _, path = entry.rpartition("=") if "=" in entry else (os.path.basename(entry), "", entry)
                with open(os.path.join(folder, path)) as f:
                    data[key] = f.read()
            generated[gen["name"]] = data
        for name in kustomization.get("resources", []):
            if name.endswith(".yaml") and os.path.isfile(os.path.join(folder, name)):
                with open(os.path.join(folder, name)) as f:
                    docs += [x for x in yaml.safe_load_all(f) if x]
    configmaps = {x["metadata"]["name"]: x.get("data", {}) for x in docs if x.get("kind") == "ConfigMap"}
    configmaps.update(generated)
    out = []
    for x in docs:
        if x.get("kind") not in ("Deployment", "DaemonSet"):
            continue
        spec = x["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for c in spec["containers"]:
            if c.get("image", "").split(":")[0].split("/")[-1] != "gpusched":
                continue
            files, dirs = {}, []
            for m in c.get("volumeMounts", []):
                v = volumes.get(m["name"], {})
                if "configMap" in v:
                    files[m["mountPath"]] = configmaps[v["configMap"]["name"]]
                elif "emptyDir" in v or "hostPath" in v:
                    dirs.append(m["mountPath"])
            out.append((c["args"][0], c["args"], files, dirs))
    return out


def start(root, name, args, files, dirs, port, seconds, env):
    """Runs one daemon in the rootfs; returns (passed, why, output tail)."""
    for path, data in files.items():
        d = inside(root, path)
        os.makedirs(d, exist_ok=True)
        for key, text in data.items():
            with open(os.path.join(d, key), "w") as f:
                f.write(text)
    for path in dirs:
        if path.startswith("/proc") or path.startswith("/host/proc") or path.startswith("/var/run/nvidia"):
            continue
        os.makedirs(inside(root, path), exist_ok=True)
        os.chmod(inside(root, path), 0o777)
    # A private mount namespace: /proc and /dev bound for the run, gone with it.
    script = (f"mount --bind /proc {root}/proc && mount --bind /dev {root}/dev && "
              f"exec chroot --userspec={USER} {root} /usr/local/bin/gpusched \"$@\"")
    argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", *args]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                         start_new_session=True)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.2)
    running = p.poll() is None
    if running:
        os.killpg(p.pid, signal.SIGTERM)
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    output = p.stdout.read()
    tail = "\n".join(output.strip().splitlines()[-3:])
    last = output.strip().splitlines()[-1] if output.strip() else ""
    if "error while loading shared libraries" in output or p.returncode == 127:
        return False, "the loader misses a library", tail
    if re.search(r"No such file|cannot open|cannot read|not found", output) and "API server" not in output \
            and "libnvidia-ml" not in last:
        return False, "a file it reads is missing", tail
    if not running and p.returncode == 2:
        return False, "its arguments were refused (exit 2)", tail
    if f"127.0.0.1:{port}" in output or "API server" in output:
        return True, "got as far as the API server", tail
    if running:
        return True, f"still running after {seconds} s", tail
    if name == "agent" and "libnvidia-ml" in last:
        return True, "stopped at NVML (mounted into GPU pods by the NVIDIA runtime, not in the image)", tail
    return False, f"exited {p.returncode}", tail


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build_dir")
    parser.add_argument("--out", default=None, help="where the OCI layout goes (default: a temporary directory)")
    parser.add_argument("--seconds", type=float, default=8)
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("image-smoke: needs root (debootstrap, chroot, mount namespaces)", file=sys.stderr)
        return 2
    for tool in ("debootstrap", "umoci", "unshare", "chroot"):
        if not shutil.which(tool):
            print(f"image-smoke: {tool} is missing (scripts/install-deps.sh installs it)", file=sys.stderr)
            return 2
    work = tempfile.mkdtemp(prefix="gpusched-image-")
    try:
        t0 = time.monotonic()
        root = os.path.join(work, "rootfs")
        base_rootfs(root)
        packages = image_deps.dockerfile_runtime_packages(os.path.join(REPO, "Dockerfile"))
        binary = os.path.join(args.build_dir, "src", "gpusched", "cli", "gpusched")
        extra = [SANITIZER_PACKAGES[s] for s in image_deps.needed(binary) if s in SANITIZER_PACKAGES]
        chroot_apt(root, packages + extra)
        log(f"packages: the Dockerfile's {len(packages)} ({' '.join(packages)})"
            + (f", and for this sanitized build only: {' '.join(extra)}" if extra else ""))
        run(["cmake", "--install", args.build_dir, "--prefix", os.path.join(root, "usr", "local"), "--strip",
             "--component", "daemons"], stdout=subprocess.DEVNULL)
        out = args.out or os.path.join(work, "oci")
        version = re.search(r"project\(gpusched VERSION ([0-9.]+)", open(os.path.join(REPO, "CMakeLists.txt")).read())
        tag = version.group(1)
        run([sys.executable, os.path.join(REPO, "scripts", "oci-layout.py"), root, out, "--tag", tag,
             "--entrypoint", "/usr/local/bin/gpusched", "--cmd=--help", "--user", USER])
        shutil.rmtree(root)
        bundle = os.path.join(work, "bundle")
        run(["umoci", "--log", "error", "unpack", "--rootless", "--image", f"{out}:{tag}", bundle],
            stdout=subprocess.DEVNULL)
        image_root = os.path.join(bundle, "rootfs")
        log(f"unpacked {out}:{tag} with umoci into {image_root} ({time.monotonic() - t0:.0f} s so far)")

        # In-cluster identity with an API server that does not answer.
        port = 1  # nothing listens on 127.0.0.1:1
        sa = inside(image_root, "/var/run/secrets/kubernetes.io/serviceaccount")
        os.makedirs(sa, exist_ok=True)
        run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-subj", "/CN=image-smoke-ca", "-days", "1", "-keyout", os.path.join(work, "ca.key"), "-out",
             os.path.join(sa, "ca.crt")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(os.path.join(sa, "token"), "w") as f:
            f.write("image-smoke-token")
        with open(os.path.join(sa, "namespace"), "w") as f:
            f.write("kube-system")
        env = dict(os.environ, KUBERNETES_SERVICE_HOST="127.0.0.1", KUBERNETES_SERVICE_PORT=str(port),
                   NODE_NAME="image-smoke-node", POD_NAMESPACE="kube-system",
                   ASAN_OPTIONS="detect_leaks=0", UBSAN_OPTIONS="print_stacktrace=1")

        failures = 0
        version_out = subprocess.run(["unshare", "--mount", "sh", "-c",
                                      f"mount --bind /proc {image_root}/proc && exec chroot --userspec={USER} "
                                      f"{image_root} /usr/local/bin/gpusched --version"],
                                     capture_output=True, text=True, env=env)
        ok = version_out.returncode == 0 and version_out.stdout.strip() == f"gpusched {tag}"
        log(f"gpusched --version: {version_out.stdout.strip() or version_out.stderr.strip()} "
            f"({'ok' if ok else 'FAILED'})")
        failures += 0 if ok else 1
        runs = workloads()
        agent = next((r for r in runs if r[0] == "agent"), None)
        if agent:
            argv = list(agent[1])
            if "--mps" in argv:  # --mps off: fake GPUs have no MPS daemon
                argv[argv.index("--mps") + 1] = "off"
            runs.append(("agent --fake-gpus", argv + ["--fake-gpus", "1xA100-80GB"], agent[2], agent[3]))
        started = 0
        for name, argv, files, dirs in runs:
            passed, why, tail = start(image_root, name.split()[0], argv, files, dirs, port, args.seconds, env)
            started += 1 if passed else 0
            log(f"{name} ({' '.join(argv[1:])}): {'ok' if passed else 'FAILED'}, {why}")
            if not passed:
                failures += 1
                print(tail, file=sys.stderr)
            else:
                last = tail.splitlines()[-1] if tail else ""
                log(f"  last line: {last[:200]}")
        log(f"{started} of {len(runs)} daemons started in the image; {time.monotonic() - t0:.0f} s in all")
        return 1 if failures else 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
