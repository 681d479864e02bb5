#!/usr/bin/env bash
# Builds softrdma twice (release, and ASan+UBSan) and runs the whole test suite on both.
# Usage: scripts/test.sh [--quick]   (--quick: release build only)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
	sed -n '2,3p' "$0" | sed 's/^# //'
	exit 0
fi
scripts/install-deps.sh
jobs=$(nproc)
build() { # dir, extra cmake args...
	local dir=$1; shift
	cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSOFTRDMA_WERROR=ON "$@" >/dev/null
	cmake --build "$dir" -j "$jobs" >/dev/null
}
build build
echo "== release build: tests"
(cd build && ctest --output-on-failure -j "$jobs" --timeout 300)
if [ "${1:-}" != "--quick" ]; then
	build build-asan -DSOFTRDMA_SANITIZE=ON
	echo "== ASan+UBSan build: tests"
	# The lint tests (formatting, the fuzz smoke run, which builds its own sanitized
	# binaries) ran above already.
	(cd build-asan && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
		ctest --output-on-failure -j "$jobs" --timeout 600 -LE lint)
fi
