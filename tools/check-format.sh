#!/usr/bin/env bash
# The tracked C++ files (*.h *.hpp *.cpp *.cc) against .clang-format, with
# clang-format --dry-run --Werror: exit 0 when none would change, 1 naming those
# that would, 2 on a usage error or when clang-format is missing.
#   tools/check-format.sh          # check (ctest: format_test, label pure)
#   tools/check-format.sh --fix    # rewrite the files that differ, in place
#   tools/check-format.sh -v       # also show what clang-format would change
# CLANG_FORMAT names another binary (default: clang-format on PATH). The style was
# written for clang-format 14 (Debian 12, the CI host); another major version may
# format some lines differently.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

FIX=0 VERBOSE=0
for arg in "$@"; do
  case "$arg" in
    --fix) FIX=1 ;;
    -v|--verbose) VERBOSE=1 ;;
    *) echo "usage: $0 [--fix] [-v]" >&2; exit 2 ;;
  esac
done

CF="${CLANG_FORMAT:-clang-format}"
if ! command -v "$CF" >/dev/null 2>&1; then
  echo "check-format: $CF not found: install it (Debian: apt-get install clang-format;" \
       "deploy/local/install-deps.sh does) or set CLANG_FORMAT" >&2
  exit 2
fi
[ -f .clang-format ] || { echo "check-format: no .clang-format in $(pwd)" >&2; exit 2; }

# The tracked files; outside a git checkout (a source tarball), those on disk.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files -- '*.h' '*.hpp' '*.cpp' '*.cc')
else
  mapfile -t files < <(find . -path ./.git -prune -o -path './build*' -prune -o -type f \
                         \( -name '*.h' -o -name '*.hpp' -o -name '*.cpp' -o -name '*.cc' \) -print | sed 's|^\./||' | sort)
fi
[ ${#files[@]} -gt 0 ] || { echo "check-format: no C++ files found" >&2; exit 2; }

version=$("$CF" --version)
differ=()
for f in "${files[@]}"; do
  if ! "$CF" --style=file --dry-run --Werror "$f" >/dev/null 2>&1; then
    differ+=("$f")
  fi
done

if [ ${#differ[@]} -eq 0 ]; then
  echo "check-format: all ${#files[@]} C++ files match .clang-format ($version)"
  exit 0
fi

if [ "$FIX" = 1 ]; then
  "$CF" --style=file -i "${differ[@]}"
  printf '  %s\n' "${differ[@]}"
  echo "check-format: reformatted ${#differ[@]} of ${#files[@]} C++ files ($version)"
  exit 0
fi

lines=0
for f in "${differ[@]}"; do
  n=$("$CF" --style=file "$f" | diff "$f" - | grep -c '^<' || true)
  lines=$((lines + n))
  echo "  $f: $n lines"
  if [ "$VERBOSE" = 1 ]; then "$CF" --style=file "$f" | diff -u "$f" - | sed 's/^/    /' || true; fi
done
echo "check-format: ${#differ[@]} of ${#files[@]} C++ files differ from .clang-format ($lines lines; $version);" \
     "tools/check-format.sh --fix rewrites them" >&2
exit 1
