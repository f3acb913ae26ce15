#!/usr/bin/env bash
# Checks that every C++ source (*.h, *.cc) under src/, tests/ and bench/ is clang-format clean (.clang-format).
# Files come from git (tracked plus untracked-but-not-ignored) when the repo has commits, else from find.
#
# Usage: scripts/check-format.sh          exit 1 and list the files that need formatting
#        scripts/check-format.sh --fix    reformat them in place (what scripts/format.sh runs)
#        scripts/check-format.sh --list   print the file set and exit
# CLANG_FORMAT overrides the binary (default: clang-format).
set -euo pipefail

cd "$(dirname "$0")/.."
clang_format="${CLANG_FORMAT:-clang-format}"
dirs=(src tests bench)

mode=check
case "${1:-}" in
  "") ;;
  --fix) mode=fix ;;
  --list) mode=list ;;
  *) echo "usage: $0 [--fix|--list]" >&2; exit 2 ;;
esac

list_sources() {
  if git rev-parse --verify --quiet HEAD >/dev/null 2>&1; then
    git ls-files --cached --others --exclude-standard -- "${dirs[@]}" | grep -E '\.(h|cc)$' || true
  else
    local existing=()
    local d
    for d in "${dirs[@]}"; do
      [[ -d $d ]] && existing+=("$d")
    done
    ((${#existing[@]} == 0)) && return 0
    find "${existing[@]}" -type f \( -name '*.h' -o -name '*.cc' \) | sort
  fi
}

files=()
while IFS= read -r f; do
  [[ -f $f ]] && files+=("$f")  # skip tracked files deleted in the working tree
done < <(list_sources | sort -u)

if [[ $mode == list ]]; then
  ((${#files[@]} == 0)) || printf '%s\n' "${files[@]}"
  exit 0
fi
if ((${#files[@]} == 0)); then
  echo "check-format: no C++ files under ${dirs[*]}"
  exit 0
fi
command -v "$clang_format" >/dev/null 2>&1 || {
  echo "check-format: $clang_format not found (scripts/install-deps.sh installs clang-format)" >&2
  exit 2
}

if [[ $mode == fix ]]; then
  "$clang_format" -i -- "${files[@]}"
  echo "format: formatted ${#files[@]} files"
  exit 0
fi

bad=()
for f in "${files[@]}"; do
  if ! "$clang_format" --dry-run --Werror -- "$f" >/dev/null 2>&1; then
    bad+=("$f")
  fi
done
if ((${#bad[@]} > 0)); then
  echo "check-format: ${#bad[@]} of ${#files[@]} files need clang-format (run scripts/format.sh or make format):"
  printf '  %s\n' "${bad[@]}"
  exit 1
fi
echo "check-format: ${#files[@]} files OK"
