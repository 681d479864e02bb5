#!/usr/bin/env bash
# UCX (Debian 12's 1.13: ucx-utils, libucx0) on softrdma, unmodified: ucx_perftest tag_lat and
# tag_bw, server and client on loopback under `softrdma run` (which gives UCX the device view
# it needs: /dev/infiniband/uverbs<n>, GID types in sysfs), over RC (UCX_TLS=rc_verbs with
# ud_verbs as UCX's auxiliary wire-up transport, as UCX's own "rc" alias) and over UD
# (UCX_TLS=ud_verbs). Only the device is chosen (UCX_NET_DEVICES=roce_lo:1): no other UCX
# setting, in particular UD's destination-GID check stays on (softrdma reports the L3 type of a
# UD datagram in wc.sl, as ConnectX: src/engine/resp.c). Each run must exit 0 and print
# perftest's "Final:" line with the iterations asked for and sane figures (latency above 0 and
# below 10 ms, bandwidth above 0); the figures are printed. Exit 77 without ucx_perftest or
# where the view cannot be made; every process runs under a timeout.
set -u
build=$(cd "${1:?build directory}" && pwd)
command -v ucx_perftest >/dev/null || { echo "SKIP: ucx_perftest not installed (ucx-utils; scripts/install-deps.sh)"; exit 77; }
R=$build/softrdma
if grep -q "SOFTRDMA_SANITIZE:BOOL=ON" "$build/CMakeCache.txt" 2>/dev/null; then
	export LD_PRELOAD="$(gcc -print-file-name=libasan.so)"
	export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
fi
unset SOFTRDMA_VIEW
# Nothing from the caller's environment: the device is the only setting.
for v in $(env | sed -n 's/^\(UCX_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done
export UCX_NET_DEVICES=roce_lo:1
if ! timeout 30 "$R" run -- test -c /dev/infiniband/uverbs0 2>/dev/null; then
	echo "SKIP: no device view here (user namespaces disabled?): UCX cannot see softrdma's devices"
	exit 77
fi
dir=$(mktemp -d)
srv=
trap '[ -n "$srv" ] && kill "$srv" 2>/dev/null; rm -rf "$dir"' EXIT
fail=0

# One server/client pair. $1: label, $2: UCX_TLS, $3: iterations, rest: client options.
# Prints the client's Final line; returns 0 if both ends were fine and the figures sane.
attempt() {
	local label=$1 tls=$2 n=$3
	shift 3
	local port=$((20000 + RANDOM % 12000))
	UCX_TLS=$tls timeout 40 "$R" run -- ucx_perftest -p "$port" >"$dir/srv" 2>&1 &
	srv=$!
	# Until it listens (its "Waiting for connection" sits in a stdio buffer).
	for _ in $(seq 100); do
		ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && break
		kill -0 "$srv" 2>/dev/null || break
		sleep 0.1
	done
	UCX_TLS=$tls timeout 40 "$R" run -- ucx_perftest 127.0.0.1 -p "$port" -n "$n" "$@" >"$dir/cli" 2>&1
	local rc=$?
	wait "$srv"
	local rs=$?
	srv=
	# Final: iterations p50 avg overall [latency us] bw-avg bw-overall [MB/s] rate-avg rate-overall
	local final
	final=$(grep '^Final:' "$dir/cli" | tail -1)
	if [ $rc -ne 0 ] || [ $rs -ne 0 ] || [ -z "$final" ] ||
		! echo "$final" | awk -v n="$n" '{ exit !($2 == n && $4 > 0 && $4 < 10000 && $6 > 0) }'; then
		echo "  $label: client exit $rc, server exit $rs"
		sed 's/^/    client: /' "$dir/cli" | grep -vE '^    client: [|+]' | tail -8
		sed 's/^/    server: /' "$dir/srv" | grep -vE '^    server: [|+]' | tail -8
		return 1
	fi
	echo "$final" | awk -v l="$label" '{ printf "  %-22s latency p50 %8.3f us  avg %8.3f us   bandwidth %9.2f MB/s   %9.0f msg/s\n", l, $3, $4, $6, $8 }'
}

pair() {
	attempt "$@" && return 0
	echo "  $1: once more"
	attempt "$@" && return 0
	echo "FAIL: $1"
	fail=$((fail + 1))
}

echo "ucx_perftest over softrdma (roce_lo), UCX $(ucx_info -v 2>/dev/null | sed -n 's/^# Version //p' | head -1)"
# Warm-up: 10 % (perftest's default, 10000, would double a run).
pair "rc tag_lat 8 B" rc_verbs,ud_verbs:aux 10000 -w 1000 -t tag_lat
pair "rc tag_bw 64 KiB" rc_verbs,ud_verbs:aux 2000 -w 200 -t tag_bw -s 65536
pair "ud tag_lat 8 B" ud_verbs 10000 -w 1000 -t tag_lat
pair "ud tag_bw 64 KiB" ud_verbs 2000 -w 200 -t tag_bw -s 65536

[ $fail -eq 0 ] && echo "PASS" || echo "$fail failure(s)"
[ $fail -eq 0 ]
