#!/usr/bin/env bash
# The example program between two processes over roce_lo, at sizes around the path MTU and
# 1 MiB, with and without injected faults. Both sides must verify every byte.
set -u
build=${1:?build directory}
fail=0
run_pair() { # size, fault spec
	local size=$1 fault=$2 port=$((20000 + RANDOM % 20000))
	SOFTRDMA_FAULT="$fault" timeout 60 "$build/rdma_example" -d roce_lo -p "$port" -s "$size" >/tmp/ex_srv.$$ 2>&1 &
	local srv=$!
	SOFTRDMA_FAULT="$fault" timeout 60 "$build/rdma_example" -d roce_lo -p "$port" -s "$size" 127.0.0.1 >/tmp/ex_cli.$$ 2>&1
	local rc=$?
	wait "$srv"
	local rs=$?
	if [ $rc -ne 0 ] || [ $rs -ne 0 ]; then
		echo "FAIL size=$size fault='$fault' (client $rc, server $rs)"
		sed 's/^/  client: /' /tmp/ex_cli.$$
		sed 's/^/  server: /' /tmp/ex_srv.$$
		fail=$((fail + 1))
	else
		grep -q "all checks passed" /tmp/ex_cli.$$ && grep -q "all checks passed" /tmp/ex_srv.$$ ||
			{ echo "FAIL size=$size: no verdict"; fail=$((fail + 1)); }
		echo "ok   size=$size fault='$fault'"
	fi
	rm -f /tmp/ex_srv.$$ /tmp/ex_cli.$$
}
for size in 8 4095 4096 4097 1048576; do
	run_pair "$size" ""
done
run_pair 1048576 "loss=1%,dup=0.5%,reorder=1%,seed=11"
run_pair 65536 "loss=5%,corrupt=1%,delay=200us,jitter=100us,seed=12"
[ $fail -eq 0 ] && echo "example: all runs passed" || echo "example: $fail runs failed"
exit $fail
