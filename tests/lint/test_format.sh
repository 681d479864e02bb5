#!/usr/bin/env bash
# Every C source is formatted by the repository's .clang-format (STYLE.md habit 15).
set -u
cd "$(dirname "$0")/../.."
command -v clang-format >/dev/null || { echo "SKIP: clang-format not installed"; exit 77; }
bad=0
while IFS= read -r f; do
	if ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then
		echo "not formatted: $f (run: clang-format -i $f)"
		bad=$((bad + 1))
	fi
done < <(git ls-files '*.c' '*.h' 2>/dev/null || find src tests examples bench -name '*.[ch]')
echo "$bad files not formatted"
[ $bad -eq 0 ]
