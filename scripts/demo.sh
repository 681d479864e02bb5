#!/usr/bin/env bash
# Builds softrdma and runs its main job on loopback: lists the devices, runs the example
# program (SEND, RDMA WRITE, RDMA READ, both atomics, every byte verified) between two
# processes over roce_lo and over iwarp_lo, then Debian's own ibv_rc_pingpong, unmodified, over
# both (softrdma run).
# Usage: scripts/demo.sh [--size BYTES]
set -euo pipefail
cd "$(dirname "$0")/.."
size=1048576
while [ $# -gt 0 ]; do
	case "$1" in
	--size) size=$2; shift 2 ;;
	-h|--help) sed -n '2,6p' "$0" | sed 's/^# //'; exit 0 ;;
	*) echo "demo.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
	esac
done
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" >/dev/null
echo "== softrdma devices"
build/softrdma devices
server=
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; true' EXIT
for dev in roce_lo iwarp_lo; do
	port=$((20000 + RANDOM % 20000))
	echo "== rdma_example: server and client on $dev, $size-byte messages"
	build/rdma_example -d "$dev" -p "$port" -s "$size" &
	server=$!
	sleep 0.2
	build/rdma_example -d "$dev" -p "$port" -s "$size" 127.0.0.1
	wait "$server"
	server=
done
for dev in roce_lo iwarp_lo; do
	port=$((20000 + RANDOM % 20000))
	echo "== ibv_rc_pingpong (Debian's, unmodified) on $dev via softrdma run"
	build/softrdma run -- ibv_rc_pingpong -d "$dev" -g 0 -p "$port" -n 1000 >/dev/null &
	server=$!
	sleep 0.3
	build/softrdma run -- ibv_rc_pingpong -d "$dev" -g 0 -p "$port" -n 1000 127.0.0.1
	wait "$server"
	server=
done
echo "== done: every byte verified on both sides"
