#!/usr/bin/env bash
# Open MPI (Debian 12's 4.1: openmpi-bin, libopenmpi-dev) over UCX over softrdma: the ping-pong of
# tests/mpi/mpi_pingpong.c (built with mpicc), 2 ranks on this host, run unmodified under
# `softrdma run -- mpirun` with UCX's PML (--mca pml ucx: no fallback to another PML) on RC
# (UCX_TLS=rc_verbs, with ud_verbs for UCX's wire-up; no shared memory, so every message goes
# through softrdma's roce_lo). pml_ucx_devices=any: Open MPI's default accepts only devices
# whose sysfs driver is mlx*. Every byte of every message is checked by the program; it must
# print "pingpong: OK" and a latency / bandwidth line per size (printed here). As root,
# mpirun needs --allow-run-as-root. Exit 77 without Open MPI or UCX, or without the device view.
set -u
build=$(cd "${1:?build directory}" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
for p in mpicc mpirun ucx_info; do
	command -v "$p" >/dev/null || { echo "SKIP: $p not installed (openmpi-bin, libopenmpi-dev, ucx-utils; scripts/install-deps.sh)"; exit 77; }
done
ompi_info 2>/dev/null | grep -q "MCA pml: ucx" || { echo "SKIP: this Open MPI has no UCX PML"; exit 77; }
R=$build/softrdma
if grep -q "SOFTRDMA_SANITIZE:BOOL=ON" "$build/CMakeCache.txt" 2>/dev/null; then
	export LD_PRELOAD="$(gcc -print-file-name=libasan.so)"
	export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
fi
unset SOFTRDMA_VIEW
for v in $(env | sed -n 's/^\(UCX_[A-Za-z0-9_]*\)=.*/\1/p;s/^\(OMPI_MCA_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
if ! timeout 30 "$R" run -- test -c /dev/infiniband/uverbs0 2>/dev/null; then
	echo "SKIP: no device view here (user namespaces disabled?): UCX cannot see softrdma's devices"
	exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
chmod 755 "$dir"
mpicc -O2 -o "$dir/mpi_pingpong" "$src/tests/mpi/mpi_pingpong.c" || { echo "FAIL: mpicc"; exit 1; }
root=()
[ "$(id -u)" -eq 0 ] && root=(--allow-run-as-root)

attempt() {
	timeout 60 "$R" run -- mpirun -np 2 "${root[@]}" --oversubscribe --bind-to none \
		--mca pml ucx --mca pml_ucx_devices any --mca btl '^openib' \
		-x UCX_NET_DEVICES=roce_lo:1 -x UCX_TLS=rc_verbs,ud_verbs:aux \
		"$dir/mpi_pingpong" 200 >"$dir/out" 2>&1
	local rc=$?
	sed 's/^/  /' "$dir/out"
	# bytes iters latency bandwidth, every size from 8 B to 2 MiB, figures above 0.
	local lines
	lines=$(awk '$1 ~ /^[0-9]+$/ && NF == 4 && $3 > 0 && $4 > 0' "$dir/out" | wc -l)
	[ $rc -eq 0 ] && grep -q "^pingpong: OK" "$dir/out" && [ "$lines" -eq 10 ] && return 0
	echo "  (mpirun exit $rc, $lines figure lines)"
	return 1
}

echo "Open MPI $(ompi_info 2>/dev/null | sed -n 's/^ *Open MPI: //p' | head -1) / UCX over softrdma (roce_lo, RC)"
if attempt; then
	echo "PASS"
	exit 0
fi
echo "once more"
attempt && { echo "PASS"; exit 0; }
echo "FAIL: the ping-pong over Open MPI / UCX / softrdma"
exit 1
