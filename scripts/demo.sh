#!/usr/bin/env bash
# Builds softrdma and runs its main job on loopback: `softrdma compare`, which measures RoCEv2
# against iWARP against raw UDP and TCP sockets in one run (latency and jitter, bandwidth and
# message rate 8 B..4 MiB, CPU per message, connection set-up, goodput under 0-1 % packet loss)
# and writes results/softrdma-compare.json and results/softrdma-compare.html (open it in a
# browser). About two minutes; --quick: about half a minute. With --examples it first runs the
# example program and Debian's unmodified ibv_rc_pingpong over roce_lo and iwarp_lo.
# Usage: scripts/demo.sh [--quick] [--examples] [-- MORE COMPARE OPTIONS]
set -euo pipefail
cd "$(dirname "$0")/.."
quick=() examples=0 more=()
while [ $# -gt 0 ]; do
	case "$1" in
	--quick) quick=(--quick); shift ;;
	--examples) examples=1; shift ;;
	--) shift; more=("$@"); break ;;
	-h|--help) sed -n '2,8p' "$0" | sed 's/^# //'; exit 0 ;;
	*) echo "demo.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
	esac
done
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" >/dev/null
echo "== softrdma devices"
build/softrdma devices
if [ $examples -eq 1 ]; then
	server=
	trap '[ -n "$server" ] && kill "$server" 2>/dev/null; true' EXIT
	for dev in roce_lo iwarp_lo; do
		port=$((20000 + RANDOM % 20000))
		echo "== rdma_example: server and client on $dev, 1 MiB messages"
		build/rdma_example -d "$dev" -p "$port" -s 1048576 &
		server=$!
		sleep 0.2
		build/rdma_example -d "$dev" -p "$port" -s 1048576 127.0.0.1
		wait "$server"
		server=
		port=$((20000 + RANDOM % 20000))
		echo "== ibv_rc_pingpong (Debian's, unmodified) on $dev via softrdma run"
		build/softrdma run -- ibv_rc_pingpong -d "$dev" -g 0 -p "$port" -n 1000 >/dev/null &
		server=$!
		sleep 0.3
		build/softrdma run -- ibv_rc_pingpong -d "$dev" -g 0 -p "$port" -n 1000 127.0.0.1
		wait "$server"
		server=
	done
fi
mkdir -p results
echo "== softrdma compare: RoCEv2 vs iWARP vs raw UDP/TCP on loopback"
build/softrdma compare "${quick[@]}" --json results/softrdma-compare.json \
	--html results/softrdma-compare.html "${more[@]}"
