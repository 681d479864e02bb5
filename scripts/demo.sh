#!/usr/bin/env bash
# Builds softrdma and runs its main job on loopback: lists the devices, then runs the example
# program (SEND, RDMA WRITE, RDMA READ, both atomics, every byte verified) between two
# processes over roce_lo.
# Usage: scripts/demo.sh [--size BYTES]
set -euo pipefail
cd "$(dirname "$0")/.."
size=1048576
while [ $# -gt 0 ]; do
	case "$1" in
	--size) size=$2; shift 2 ;;
	-h|--help) sed -n '2,5p' "$0" | sed 's/^# //'; exit 0 ;;
	*) echo "demo.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
	esac
done
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" >/dev/null
echo "== softrdma devices"
build/softrdma devices
port=$((20000 + RANDOM % 20000))
echo "== rdma_example: server and client on roce_lo, $size-byte messages"
build/rdma_example -d roce_lo -p "$port" -s "$size" &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT
build/rdma_example -d roce_lo -p "$port" -s "$size" 127.0.0.1
wait "$server"
trap - EXIT
echo "== done: both sides verified every byte"
