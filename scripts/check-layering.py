#!/usr/bin/env python3
"""Checks the include rules of ARCHITECTURE.md section 2 ("Layers and the dependency rule").

Scans every .h and .cc under src/gpusched/ and, for each `#include "gpusched/<folder>/..."`, checks that the
including file's folder may depend on <folder>. A folder may always include itself. Further rules:
  * nothing outside cli/ includes "gpusched/cli/...";
  * no adapter includes another adapter;
  * common/ and core/ include no third-party header: their <...> includes must be C or C++ standard headers
    (test frameworks are allowed in *_test.cc, Google Benchmark in *_benchmark.cc), and their "..." includes must
    be gpusched headers;
  * test files (*_test.cc, *_benchmark.cc) may also include "gpusched/testing/...";
  * libcurl (<curl/...>) is included by net/ only: every adapter talks HTTP through net/http_client.h.
A folder that is not in the table below is itself a violation: add new layers here and to ARCHITECTURE.md together.

Usage: scripts/check-layering.py [--root DIR]     (DIR defaults to the repository root)
Prints `path:line: <folder> may not include <header> (allowed: ...)` per violation and exits 1, or
`layering: N files OK` and exits 0.
"""

from __future__ import annotations

import argparse
import fnmatch
import re
import sys
from pathlib import Path

# folder -> folders it may include (besides itself). Patterns use fnmatch syntax: "adapters/*" is every adapter.
# "*" means anything. Keep this table identical to ARCHITECTURE.md section 2.
ALLOWED: dict[str, tuple[str, ...]] = {
    "common": (),
    "core": ("common",),
    "policy": ("core", "common"),
    "ports": ("core", "common"),
    "kube": ("core", "common"),
    "sched": ("policy", "ports", "core", "common"),
    "daemon": ("policy", "kube", "core", "common"),
    "net": ("common",),
    "proc": ("common",),
    "adapters/*": ("net", "proc", "kube", "ports", "core", "common"),
    "extender": ("daemon", "sched", "policy", "net", "proc", "kube", "ports", "core", "common"),
    "interference": ("ports", "core", "common"),
    "plot": ("common",),
    "sim": ("sched", "policy", "ports", "plot", "core", "common"),
    "doctor": ("adapters/*", "kube", "common"),
    "monitor": ("adapters/*", "proc", "kube", "ports", "plot", "core", "common"),
    "agent": ("adapters/*", "daemon", "net", "proc", "kube", "ports", "plot", "core", "common"),
    "webhook": ("adapters/*", "daemon", "net", "proc", "kube", "ports", "core", "common"),
    "scheduler": ("adapters/*", "daemon", "sched", "policy", "net", "proc", "kube", "ports", "core", "common"),
    "cli": ("*",),
    "testing": ("kube", "ports", "core", "common"),
}

# Folders whose files may include no third-party header.
STD_ONLY_FOLDERS = {"common", "core"}

TEST_SUFFIXES = ("_test.cc", "_benchmark.cc")
TESTING_FOLDER = "testing"
CLI_FOLDER = "cli"
NET_FOLDER = "net"

# ISO C++20 library headers (as shipped by libstdc++ 12) and the C headers in both spellings.
STD_HEADERS = frozenset(
    """
    algorithm any array atomic barrier bit bitset charconv chrono codecvt compare complex concepts
    condition_variable coroutine deque exception execution filesystem format forward_list fstream functional
    future initializer_list iomanip ios iosfwd iostream istream iterator latch limits list locale map
    memory memory_resource mutex new numbers numeric optional ostream queue random ranges ratio regex
    scoped_allocator semaphore set shared_mutex source_location span sstream stack stdexcept stop_token
    streambuf string string_view syncstream system_error thread tuple type_traits typeindex typeinfo
    unordered_map unordered_set utility valarray variant vector version
    cassert cctype cerrno cfenv cfloat cinttypes climits clocale cmath csetjmp csignal cstdarg cstddef
    cstdint cstdio cstdlib cstring ctime cuchar cwchar cwctype
    assert.h ctype.h errno.h fenv.h float.h inttypes.h limits.h locale.h math.h setjmp.h signal.h stdarg.h
    stddef.h stdint.h stdio.h stdlib.h string.h time.h uchar.h wchar.h wctype.h
    """.split()
)

# Third-party headers allowed in common/ and core/ only in files with the given suffix.
TEST_ONLY_PATTERNS: tuple[tuple[str, str], ...] = (
    ("gtest/*", "_test.cc"),
    ("gmock/*", "_test.cc"),
    ("rapidcheck.h", "_test.cc"),
    ("rapidcheck/*", "_test.cc"),
    ("benchmark/*", "_benchmark.cc"),
)

INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def folder_of(parts: tuple[str, ...]) -> str:
    """Layer folder for path components relative to src/gpusched/ (or to the include's "gpusched/")."""
    if len(parts) < 2:  # a file directly in src/gpusched/
        return ""
    if parts[0] == "adapters":
        return "adapters/" + parts[1] if len(parts) >= 3 else "adapters"
    return parts[0]


def rule_for(folder: str) -> tuple[str, ...] | None:
    if folder in ALLOWED:
        return ALLOWED[folder]
    for key, allowed in ALLOWED.items():
        if "*" in key and fnmatch.fnmatchcase(folder, key):
            return allowed
    return None


def include_lines(text: str):
    """Yields (line number, '<' or '"', header) for each #include outside block comments."""
    in_block = False
    for lineno, line in enumerate(text.splitlines(), start=1):
        if in_block:
            end = line.find("*/")
            if end < 0:
                continue
            line = line[end + 2 :]
            in_block = False
        match = INCLUDE_RE.match(line)
        if match:
            yield lineno, match.group(1), match.group(2).strip()
            continue
        # Track /* ... */ spans that start on this line and do not close on it.
        code = line.split("//", 1)[0]
        start = code.rfind("/*")
        if start >= 0 and code.find("*/", start + 2) < 0:
            in_block = True


def check_file(path: Path, rel: str, folder: str) -> list[str]:
    errors: list[str] = []
    name = path.name
    is_test = name.endswith(TEST_SUFFIXES)
    allowed = rule_for(folder)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return [f"{rel}:0: cannot read: {exc}"]

    if allowed is None:
        shown = folder or "(src/gpusched/ itself)"
        return [f"{rel}:1: {shown} is not a layer in ARCHITECTURE.md section 2 (known: {', '.join(ALLOWED)})"]

    allowed_shown = list(allowed)
    if is_test and folder != TESTING_FOLDER and "*" not in allowed:
        allowed = allowed + (TESTING_FOLDER,)
        allowed_shown.append(TESTING_FOLDER + " (in tests)")
    if not allowed_shown:
        allowed_shown = ["std only"] if folder in STD_ONLY_FOLDERS else ["nothing"]

    for lineno, delim, header in include_lines(text):
        where = f"{rel}:{lineno}"
        if delim == '"' and header.startswith("gpusched/"):
            target = folder_of(tuple(header.split("/")[1:]))
            if target == folder:
                continue
            if target == CLI_FOLDER:
                errors.append(f'{where}: {folder} may not include "{header}" (allowed: nothing includes cli)')
                continue
            if folder.startswith("adapters/") and target.startswith("adapters"):
                errors.append(
                    f'{where}: {folder} may not include "{header}" (allowed: {", ".join(allowed_shown)}; '
                    "no adapter includes another adapter)"
                )
                continue
            if not target or not any(fnmatch.fnmatchcase(target, pat) for pat in allowed):
                errors.append(f'{where}: {folder} may not include "{header}" (allowed: {", ".join(allowed_shown)})')
            continue

        if delim == "<" and header.startswith("curl/") and folder != NET_FOLDER:
            errors.append(f"{where}: {folder} may not include <{header}> (allowed: net/ only; use net/http_client.h)")
            continue
        if folder not in STD_ONLY_FOLDERS:
            continue  # other layers may use third-party headers; the link graph decides which
        if delim == '"':
            errors.append(
                f'{where}: {folder} may not include "{header}" (allowed: "gpusched/..." headers of '
                f'{", ".join([folder, *allowed])}, C/C++ standard headers)'
            )
            continue
        if header in STD_HEADERS:
            continue
        needed = next((suffix for pat, suffix in TEST_ONLY_PATTERNS if fnmatch.fnmatchcase(header, pat)), None)
        if needed is not None and name.endswith(needed):
            continue
        hint = f"; <{header}> only in *{needed}" if needed else ""
        errors.append(f"{where}: {folder} may not include <{header}> (allowed: C/C++ standard headers{hint})")
    return errors


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--root",
        type=Path,
        default=Path(__file__).resolve().parent.parent,
        help="repository root (default: the parent of scripts/)",
    )
    args = parser.parse_args(argv)
    src = args.root / "src" / "gpusched"
    if not src.is_dir():
        print(f"layering: {src} is not a directory", file=sys.stderr)
        return 2

    files = sorted(p for p in src.rglob("*") if p.is_file() and p.suffix in (".h", ".cc"))
    violations: list[str] = []
    for path in files:
        rel_parts = path.relative_to(src).parts
        rel = path.relative_to(args.root).as_posix()
        violations.extend(check_file(path, rel, folder_of(rel_parts)))

    for line in violations:
        print(line)
    if violations:
        print(f"layering: {len(violations)} violation(s) in {len(files)} files", file=sys.stderr)
        return 1
    print(f"layering: {len(files)} files OK")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
