#!/usr/bin/env python3
"""Probe starvation: can one client's idle connections lock the kubelet's probes out of a daemon?

Starts a real daemon on loopback (the agent with fake GPUs, the webhook over TLS, or the extender without an API
server), then, for each count N: an attacker opens N connections from 127.0.0.2 (or spread over --peers addresses
127.0.0.2, 127.0.0.3, ...) and leaves them open, in one of three states:
  keepalive  one GET /healthz answered, then idle on the kept-alive connection (default)
  silent     connected, nothing sent (TLS: no handshake)
  slowhead   the start of a request head, never finished
and PROBES fresh probes from 127.0.0.1 follow, one at a time, as the kubelet sends them: a new connection, GET
/healthz, Connection: close, answered (connect, TLS handshake and response) within --timeout seconds in all (the
kubelet's default timeoutSeconds is 1).
A fresh daemon per count and run. Prints a line per run and, per count, the median over the runs:
  RESULT daemon=agent mode=keepalive peers=1 idle=64 probes_ok=40/40 probe_p50_ms=... probe_max_ms=...
         held=... refused_per_peer=... evicted_idle=... evicted_head=... refused=...
(held: the attacker's connections still open when the probes start; the counters from the daemon's /metrics.)

Usage: probe_starvation.py GPUSCHED_BINARY [--daemon agent|webhook|extender] [--idle 64,256,1024] [--peers 1]
       [--mode keepalive|silent|slowhead] [--probes 40] [--timeout 1.0] [--repeats 3]
Python 3 standard library and the openssl command (for the webhook's certificate).
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import resource
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Daemon:
    def __init__(self, binary: str, kind: str, work: str):
        self.kind = kind
        self.tls = kind == "webhook"
        # One client context for every connection, without the system CA store (the certificate is self-signed and
        # not verified): a context per connection made the client itself the bottleneck, and freeing a thousand of
        # them stalled the first probe after the attack by seconds.
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        self.ctx.check_hostname = False
        self.ctx.verify_mode = ssl.CERT_NONE
        self.port = free_port()
        listen = f"127.0.0.1:{self.port}"
        if kind == "agent":
            args = [binary, "agent", "--standalone", "--fake-gpus", "8xA100-80GB", "--listen", listen,
                    "--interval", "5"]
        elif kind == "webhook":
            cert, key = os.path.join(work, "tls.crt"), os.path.join(work, "tls.key")
            if not os.path.exists(cert):
                subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
                                "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out",
                                cert], check=True, capture_output=True)
            args = [binary, "webhook", "--listen", listen, "--tls-cert", cert, "--tls-key", key]
        elif kind == "extender":
            kubeconfig = os.path.join(work, "kubeconfig")
            with open(kubeconfig, "w") as f:
                f.write("apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: c\n  cluster:\n"
                        "    server: http://127.0.0.1:1\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\n"
                        "users:\n- name: u\n  user: {}\n")
            config = os.path.join(work, "extender.yaml")
            with open(config, "w") as f:
                f.write(f'listen: "{listen}"\n')
            args = [binary, "extender", "--config", config, "--kubeconfig", kubeconfig]
        else:
            raise SystemExit(f"unknown daemon {kind!r}")
        self.log_path = os.path.join(work, f"{kind}.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.proc.poll() is not None:
                break
            if probe(self, 1.0)[0]:
                return
            time.sleep(0.1)
        self.stop()
        raise SystemExit(f"the {kind} did not start:\n" + open(self.log_path).read())

    def wrap(self, s: socket.socket) -> socket.socket:
        return self.ctx.wrap_socket(s) if self.tls else s

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def connect(d: Daemon, source: str, timeout: float) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.bind((source, 0))
    s.connect(("127.0.0.1", d.port))
    return s


def read_response(s: socket.socket) -> bytes:
    """One response (Content-Length framing, as the daemons send), or what came before the peer closed."""
    out = b""
    while True:
        head_end = out.find(b"\r\n\r\n")
        if head_end >= 0:
            m = re.search(rb"(?i)content-length:\s*(\d+)", out[:head_end])
            if len(out) >= head_end + 4 + (int(m.group(1)) if m else 0):
                return out
        chunk = s.recv(65536)
        if not chunk:
            return out
        out += chunk


def request(d: Daemon, source: str, path: str, timeout: float) -> tuple[int, bytes]:
    s = connect(d, source, timeout)
    try:
        s = d.wrap(s)
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        out = read_response(s)
    finally:
        s.close()
    m = re.match(rb"HTTP/1\.[01] (\d{3})", out)
    body = out.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in out else b""
    return (int(m.group(1)) if m else 0), body


def probe(d: Daemon, timeout: float) -> tuple[bool, float]:
    start = time.perf_counter()
    try:
        status, _ = request(d, "127.0.0.1", "/healthz", timeout)
    except (OSError, ssl.SSLError):
        status = 0
    ms = (time.perf_counter() - start) * 1000
    return status == 200 and ms <= timeout * 1000, ms  # the kubelet's timeout is for the whole probe


def attack(d: Daemon, n: int, peers: int, mode: str) -> list[socket.socket]:
    """Opens n connections from 127.0.0.2.. in `mode`; returns the ones the daemon kept open."""
    held = []
    for i in range(n):
        source = f"127.0.0.{2 + i % peers}"
        try:
            s = connect(d, source, 2.0)
        except OSError:
            continue
        try:
            if mode == "keepalive":
                s = d.wrap(s)
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                if not read_response(s).startswith(b"HTTP/1.1 200"):
                    s.close()
                    continue
            elif mode == "slowhead":
                s = d.wrap(s)
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            held.append(s)
        except (OSError, ssl.SSLError):
            s.close()
    # The daemon closes the ones it refused (silent ones at once): count only those still open.
    time.sleep(0.2)
    alive = []
    for s in held:
        s.setblocking(False)
        try:
            # A TLS socket cannot peek; what it reads is not needed again.
            gone = (s.recv(1) if isinstance(s, ssl.SSLSocket) else s.recv(1, socket.MSG_PEEK)) == b""
        except (BlockingIOError, ssl.SSLWantReadError):
            gone = False
        except (OSError, ssl.SSLError):
            gone = True
        if gone:
            s.close()
        else:
            alive.append(s)
    return alive


def counters(d: Daemon) -> dict[str, int]:
    try:
        _, body = request(d, "127.0.0.1", "/metrics", 5.0)
    except (OSError, ssl.SSLError):
        return {}
    text = body.decode(errors="replace")
    out = {}
    for key, pattern in [("refused_per_peer", r'_http_connections_total\{result="refused_per_peer"\} (\d+)'),
                         ("refused", r'_http_connections_total\{result="refused"\} (\d+)'),
                         ("evicted_idle", r'_http_evictions_total\{state="idle"\} (\d+)'),
                         ("evicted_head", r'_http_evictions_total\{state="reading_head"\} (\d+)')]:
        m = re.search(pattern, text)
        out[key] = int(m.group(1)) if m else -1  # -1: the daemon does not report it
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--daemon", default="agent", choices=["agent", "webhook", "extender"])
    ap.add_argument("--idle", default="64,256,1024")
    ap.add_argument("--peers", type=int, default=1)
    ap.add_argument("--mode", default="keepalive", choices=["keepalive", "silent", "slowhead"])
    ap.add_argument("--probes", type=int, default=40)
    ap.add_argument("--timeout", type=float, default=1.0)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    counts = [int(x) for x in args.idle.split(",") if x]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = max(counts) + 256
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard) if hard != resource.RLIM_INFINITY else want, hard))
    work = tempfile.mkdtemp(prefix="gpusched-probe-starvation-")
    try:
        for n in counts:
            runs = []
            for r in range(args.repeats):
                d = Daemon(args.binary, args.daemon, work)
                try:
                    held = attack(d, n, args.peers, args.mode)
                    gc.collect()  # the attacker's garbage is freed now, not during a probe
                    results = [probe(d, args.timeout) for _ in range(args.probes)]
                    c = counters(d)
                    for s in held:
                        s.close()
                finally:
                    d.stop()
                ok = sum(1 for good, _ in results if good)
                times = sorted(ms for _, ms in results)
                run = {"ok": ok, "p50": statistics.median(times), "max": times[-1], "held": len(held), **c}
                runs.append(run)
                print(f"run {r + 1} {args.daemon} mode={args.mode} peers={args.peers} idle={n}: probes ok {ok}/"
                      f"{args.probes}, p50 {run['p50']:.1f} ms, max {run['max']:.1f} ms, attacker holds "
                      f"{len(held)}; {c}", flush=True)
            med = {k: statistics.median(run.get(k, -1) for run in runs) for k in runs[0]}
            print(f"RESULT daemon={args.daemon} mode={args.mode} peers={args.peers} idle={n} "
                  f"probes_ok={med['ok']:g}/{args.probes} probe_p50_ms={med['p50']:.1f} "
                  f"probe_max_ms={med['max']:.1f} held={med['held']:g} "
                  + " ".join(f"{k}={med[k]:g}" for k in ("refused_per_peer", "evicted_idle", "evicted_head",
                                                          "refused") if k in med), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
