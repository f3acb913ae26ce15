#!/usr/bin/env python3
"""Attacks a running `gpusched extender` over loopback the way an attacker inside the cluster would, and measures
the process's memory under each: a gzip bomb, a huge declared body, a chunked body past the limit, a header flood,
slowloris, a connection flood, truncated bodies, and an unauthenticated /bind without a PodUID.

For each attack it prints the answer, the process's RSS after it and its peak RSS so far (VmHWM of
/proc/<pid>/status), and checks that the extender still answers /healthz and that the peak stays under a bound:
baseline + 4 x maxBodyBytes + 64 MiB (the whole allowance of a handful of requests being read at once, plus
allocator slack; more under sanitizers). Without the bound the gzip bomb alone took an earlier extender from 30 to 1085 MiB.

Usage: http_attacks.py GPUSCHED_BINARY [--max-body-mib N] [--slack-mib N]
Exit 0 when every attack was refused and memory stayed bounded; 1 otherwise. Python 3 standard library only.
The extender runs with a kubeconfig pointing at a closed port: its HTTP layer serves without an API server.
"""

from __future__ import annotations

import argparse
import http.client
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import zlib

MIB = 1024 * 1024


def rss(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) in KiB."""
    text = open(f"/proc/{pid}/status").read()
    cur = int(re.search(r"VmRSS:\s+(\d+)", text).group(1))
    peak = int(re.search(r"VmHWM:\s+(\d+)", text).group(1))
    return cur, peak


def send_raw(port: int, data: bytes, read: bool = True, timeout: float = 10.0) -> bytes:
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        try:
            s.sendall(data)
        except (BrokenPipeError, ConnectionResetError):
            pass
        if not read:
            return b""
        out = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                out += chunk
        except (socket.timeout, ConnectionResetError):
            pass
        return out
    finally:
        s.close()


def status_of(response: bytes) -> str:
    line = response.split(b"\r\n", 1)[0].decode(errors="replace")
    return line[9:12] if line.startswith("HTTP/1.1 ") else ("closed" if not response else line[:20])


def tenant_connect(port: int, source: str, timeout: float) -> socket.socket:
    """A connection from `source`, a 127.0.0.0/8 address: to the server, another peer than the probes' 127.0.0.1
    (as a tenant pod's IP is another than the kubelet's)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.settimeout(timeout)
        s.bind((source, 0))
        s.connect(("127.0.0.1", port))
    except OSError:
        s.close()
        raise
    return s


def healthy(port: int) -> bool:
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        c.request("GET", "/healthz")
        return c.getresponse().status == 200
    except OSError:
        return False


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--max-body-mib", type=int, default=8)
    ap.add_argument("--slack-mib", type=int, default=64,
                    help="allowance over 4 x maxBodyBytes for allocator and sanitizer overhead (ASan's quarantine "
                         "keeps freed buffers: give it 192)")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="gpusched-attacks-")
    kubeconfig = os.path.join(work, "kubeconfig")
    with open(kubeconfig, "w") as f:
        f.write("apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters:\n- name: c\n  cluster:\n"
                "    server: http://127.0.0.1:1\ncontexts:\n- name: c\n  context: {cluster: c, user: u}\n"
                "users:\n- name: u\n  user: {}\n")
    config = os.path.join(work, "extender.yaml")
    with open(config, "w") as f:
        f.write(f'listen: "127.0.0.1:0"\nmaxBodyBytes: {args.max_body_mib * MIB}\nreadTimeoutSeconds: 2\n')
    log_path = os.path.join(work, "extender.log")
    log = open(log_path, "w")
    proc = subprocess.Popen([args.binary, "extender", "--config", config, "--kubeconfig", kubeconfig],
                            stdout=log, stderr=subprocess.STDOUT)
    port = 0
    deadline = time.time() + 30
    while time.time() < deadline and port == 0:
        m = re.search(r"serving on 127\.0\.0\.1:(\d+)", open(log_path).read())
        if m:
            port = int(m.group(1))
        elif proc.poll() is not None:
            break
        time.sleep(0.1)
    if port == 0:
        print("http_attacks: the extender did not start:\n" + open(log_path).read())
        return 1

    failures: list[str] = []
    time.sleep(0.5)
    base_cur, base_peak = rss(proc.pid)
    limit_kib = base_peak + (4 * args.max_body_mib * MIB + args.slack_mib * MIB) // 1024
    rows = [("baseline", "-", base_cur, base_peak)]

    def record(name: str, answer: str, want: set[str]):
        cur, peak = rss(proc.pid)
        rows.append((name, answer, cur, peak))
        if answer not in want:
            failures.append(f"{name}: answered {answer}, want one of {sorted(want)}")
        if peak > limit_kib:
            failures.append(f"{name}: peak RSS {peak // 1024} MiB over the bound {limit_kib // 1024} MiB")
        if not healthy(port):
            failures.append(f"{name}: /healthz does not answer afterwards")

    # 1. A gzip bomb: half a megabyte that inflates to 1 GiB.
    z = zlib.compressobj(9, zlib.DEFLATED, 31)  # gzip framing
    zeros = b"\0" * MIB
    bomb = b"".join(z.compress(zeros) for _ in range(1024)) + z.flush()
    head = (f"POST /scheduler/filter HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\n"
            f"Content-Length: {len(bomb)}\r\n\r\n").encode()
    record(f"gzip bomb ({len(bomb) // 1024} KiB -> 1 GiB)", status_of(send_raw(port, head + bomb)), {"415"})

    # 2. A declared body of 1 GiB, then nothing.
    r = send_raw(port, b"POST /scheduler/filter HTTP/1.1\r\nHost: x\r\nContent-Length: 1073741824\r\n\r\n")
    record("Content-Length 1 GiB", status_of(r), {"413"})

    # 3. A chunked body that never ends: 1 MiB chunks until the server stops reading (limit + 2 MiB sent).
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"POST /scheduler/filter HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
    chunk = b"100000\r\n" + b"a" * MIB + b"\r\n"
    try:
        for _ in range(args.max_body_mib + 2):
            s.sendall(chunk)
    except (BrokenPipeError, ConnectionResetError):
        pass
    try:
        answer = status_of(s.recv(65536))
    except (socket.timeout, ConnectionResetError):
        answer = "closed"
    s.close()
    record(f"chunked body > {args.max_body_mib} MiB", answer, {"413", "closed"})

    # 4. 100 000 header fields (and, separately, one 1 MiB header).
    flood = b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(100000)) + b"\r\n"
    record("100k header fields", status_of(send_raw(port, flood)), {"431"})
    big = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * MIB + b"\r\n\r\n"
    record("1 MiB header", status_of(send_raw(port, big)), {"431"})

    # 5. Slowloris: 200 connections from one tenant address each trickling a head, one byte every 0.5 s, for 4 s;
    #    the server must close them (over maxConnectionsPerPeer at once, the rest at the header timeout =
    #    readTimeoutSeconds = 2 s) and answer probes from another address meanwhile.
    slow = []
    for _ in range(200):
        try:
            c = tenant_connect(port, "127.0.0.2", 1)
            c.sendall(b"GET /healthz HTTP/1.1\r\n")
            slow.append(c)
        except OSError:
            break
    responsive = healthy(port)
    closed = 0
    for _ in range(8):
        time.sleep(0.5)
        for c in list(slow):
            try:
                c.sendall(b"X")
            except OSError:
                closed += 1
                slow.remove(c)
    for c in slow:
        try:
            c.setblocking(False)
            if c.recv(1) == b"":
                closed += 1
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
        c.close()
    record(f"slowloris x200 ({closed} cut off)", "cut off" if closed >= 190 and responsive else f"{closed} cut off",
           {"cut off"})

    # 6. A connection flood: 2000 idle connections from four tenant addresses; those over maxConnectionsPerPeer (64)
    #    per address are closed at once, and the 256 left (maxConnections) give way to probes from another address
    #    while the flood holds them.
    conns = []
    for i in range(2000):
        try:
            conns.append(tenant_connect(port, f"127.0.0.{2 + i % 4}", 1))
        except OSError:
            break
    time.sleep(0.5)
    flood_probes = sum(1 for _ in range(20) if healthy(port))
    open_count = 0
    for c in conns:
        try:
            c.setblocking(False)
            if c.recv(1) != b"":
                open_count += 1
        except BlockingIOError:
            open_count += 1
        except OSError:
            pass
    for c in conns:
        c.close()
    time.sleep(0.5)
    record(f"2000 connections ({open_count} kept open)", "limited" if open_count <= 256 else f"{open_count} open",
           {"limited"})
    record(f"probes during the flood ({flood_probes}/20)", "answered" if flood_probes == 20 else
           f"{flood_probes}/20", {"answered"})

    # 7. Truncated bodies: 100 requests promising 1 MiB and sending 1 KiB, then closing.
    for _ in range(100):
        send_raw(port, b"POST /scheduler/bind HTTP/1.1\r\nHost: x\r\nContent-Length: 1048576\r\n\r\n" + b"{" * 1024,
                 read=False)
    record("100 truncated bodies", "dropped", {"dropped"})

    # 8. An unauthenticated /bind without PodUID (the original exploit): refused by the extender itself.
    body = b'{"PodName":"web-0","PodNamespace":"team-b","Node":"cp-1"}'
    r = send_raw(port, b"POST /scheduler/bind HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: %d\r\n\r\n"
                 % len(body) + body)
    text = r.decode(errors="replace")
    refused = status_of(r) != "200" or '"Error":""' not in text
    record("bind without PodUID", status_of(r) + (" refused" if refused else " ACCEPTED"),
           {status_of(r) + " refused"})

    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        failures.append("the extender did not stop on SIGTERM")

    print(f"gpusched extender under attack (maxBodyBytes {args.max_body_mib} MiB, bound on peak RSS "
          f"{limit_kib // 1024} MiB)")
    print(f"| {'attack':<34} | {'answer':<12} | {'RSS after (MiB)':>15} | {'peak RSS (MiB)':>14} |")
    print(f"|{'-' * 36}|{'-' * 14}|{'-' * 17}|{'-' * 16}|")
    for name, answer, cur, peak in rows:
        print(f"| {name:<34} | {answer:<12} | {cur / 1024:>15.1f} | {peak / 1024:>14.1f} |")
    print(f"RESULT baseline_rss_mib={base_peak / 1024:.1f} peak_rss_mib={max(r[3] for r in rows) / 1024:.1f} "
          f"bound_mib={limit_kib / 1024:.0f} failures={len(failures)}")
    for f in failures:
        print("FAIL " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
