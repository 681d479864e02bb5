#!/usr/bin/env bash
# The bench scripts parse (bash -n) and answer --help and a bad option without running
# anything (no valgrind run, no build). $1: the build directory (unused).
set -u
cd "$(dirname "$0")/../.."
[ -d bench ] || { echo "SKIP: no bench directory"; exit 77; }
bad=0
for f in bench/*.sh; do
	if ! bash -n "$f"; then
		echo "syntax error: $f"
		bad=$((bad + 1))
		continue
	fi
	out=$(timeout 10 bash "$f" --help 2>&1) && echo "$out" | grep -q "Usage:" ||
		{ echo "$f --help failed or printed no Usage:"; bad=$((bad + 1)); }
	timeout 10 bash "$f" --no-such-option >/dev/null 2>&1
	[ $? -eq 2 ] || { echo "$f: a bad option does not exit 2"; bad=$((bad + 1)); }
done
echo "$bad bench script problems"
[ $bad -eq 0 ]
