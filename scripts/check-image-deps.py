#!/usr/bin/env python3
"""Checks the Dockerfile's runtime package list against what a gpusched binary really links.

Every shared library `ldd` reports is mapped to the Debian package that ships it (dpkg -S). The packages of the
libraries the binary names itself (DT_NEEDED) must be exactly the runtime stage's `apt-get install` list, apart
from the base image's own (libc6, libgcc-s1, libstdc++6) and the non-library packages named below with their
reason; every other library ldd reports must come with those packages (their Depends, recursively). A sanitizer
runtime (the CI build links ASan/UBSan or TSan) is reported and skipped, and such a build's extra direct libraries
count as present when a listed package depends on theirs: the image's binary is a release build.

Usage: scripts/check-image-deps.py BINARY [--dockerfile Dockerfile]
Exit status: 0 when the list is exact, 1 when it misses or carries a package (each one named), 2 for bad input.
"""
import argparse
import os
import re
import subprocess
import sys

BASE_IMAGE = {"libc6", "libgcc-s1", "libstdc++6"}  # in debian:bookworm-slim (apt itself needs them)
NOT_LIBRARIES = {
    "ca-certificates": "HTTPS to Prometheus, InfluxDB and API servers outside the cluster",
    "fonts-dejavu-core": "text in the plots of simulate and monitor",
}
SANITIZER_RUNTIMES = re.compile(r"^lib(asan|ubsan|tsan|lsan)\.so")


def run(argv):
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def needed(binary):
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", run(["readelf", "-d", binary]))


def ldd(binary):
    """soname -> path of every library the loader would map."""
    out = {}
    for line in run(["ldd", binary]).splitlines():
        m = re.match(r"\s*(\S+) => (/\S+)", line)
        if m:
            out[m.group(1)] = m.group(2)
        elif "not found" in line:
            sys.exit(f"check-image-deps: {line.strip()}: the binary cannot run on this machine")
    return out


def package_of(path):
    candidates = [path, os.path.realpath(path)]
    for p in list(candidates):  # bookworm is merged-/usr: dpkg knows a file under one of the two names
        candidates.append(p[4:] if p.startswith("/usr/") else "/usr" + p)
    for p in candidates:
        r = subprocess.run(["dpkg", "-S", p], capture_output=True, text=True)
        if r.returncode == 0:
            return r.stdout.split(":", 1)[0].strip()
    return None


def depends_closure(packages):
    seen, todo = set(), list(packages)
    while todo:
        pkg = todo.pop()
        if pkg in seen:
            continue
        seen.add(pkg)
        r = subprocess.run(["dpkg-query", "-W", "-f=${Depends},${Pre-Depends}", pkg], capture_output=True, text=True)
        if r.returncode != 0:
            continue
        for clause in r.stdout.split(","):
            for alternative in clause.split("|"):  # any installed alternative will do
                name = alternative.strip().split(" ")[0].split(":")[0]
                if name:
                    todo.append(name)
    return seen


def dockerfile_runtime_packages(path):
    text = open(path, encoding="utf-8").read().replace("\\\n", " ")
    stages = re.split(r"(?m)^FROM\s", text)
    last = stages[-1]
    packages = []
    for m in re.finditer(r"apt-get install ([^&\n]*)", last):
        packages += [w for w in m.group(1).split() if not w.startswith("-")]
    if not packages:
        sys.exit(f"check-image-deps: {path}: the last stage installs no package (apt-get install ...)")
    return packages


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("binary")
    parser.add_argument("--dockerfile", default=os.path.join(os.path.dirname(__file__), "..", "Dockerfile"))
    args = parser.parse_args()
    if not os.access(args.binary, os.X_OK):
        print(f"check-image-deps: {args.binary}: not an executable", file=sys.stderr)
        return 2
    listed = dockerfile_runtime_packages(args.dockerfile)
    paths = ldd(args.binary)
    # The package of every library ldd reports, looked up once (dpkg -S); None: no package ships it.
    package = {soname: package_of(path) for soname, path in paths.items() if not SANITIZER_RUNTIMES.match(soname)}
    direct_libs, problems, sanitized = {}, [], False  # direct_libs: package -> the libraries the binary names
    for soname in needed(args.binary):
        if SANITIZER_RUNTIMES.match(soname):
            print(f"check-image-deps: {soname}: a sanitizer runtime (this is not a release build): skipped")
            sanitized = True
            continue
        pkg = package[soname] if soname in package else package_of(soname)
        if pkg is None:
            problems.append(f"{soname} ({paths.get(soname, 'not found')}) belongs to no Debian package")
        else:
            direct_libs.setdefault(pkg, []).append(soname)
    direct = set(direct_libs)
    wanted = direct - BASE_IMAGE
    closure = depends_closure(set(listed) | BASE_IMAGE)
    if sanitized:
        # An instrumented build names more libraries itself than the release build does (the linker keeps what
        # the instrumentation touches): a package the listed ones bring anyway is not missing.
        wanted -= closure - set(listed)
    for pkg in sorted(wanted - set(listed)):
        problems.append(f"the Dockerfile misses {pkg} (for {', '.join(direct_libs[pkg])})")
    for pkg in sorted(set(listed) - wanted - set(NOT_LIBRARIES)):
        problems.append(f"the Dockerfile carries {pkg}, which ships no library the binary links")
    for soname, pkg in sorted(package.items()):
        if pkg is not None and pkg not in closure:
            problems.append(f"{soname} comes from {pkg}, which no listed package depends on")
    for p in problems:
        print(f"check-image-deps: {p}", file=sys.stderr)
    if problems:
        return 1
    print(f"check-image-deps: {len(paths)} libraries from {len(direct)} direct packages; the Dockerfile's "
          f"{len(listed)} runtime packages are exact ({', '.join(sorted(set(listed) & set(NOT_LIBRARIES)))} "
          f"for non-library needs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
