#!/usr/bin/env bash
# The example program between two processes over roce_lo, at sizes around the path MTU and
# 1 MiB, with and without injected faults, and over iwarp_lo (auto-connect: the example
# connects its QPs with ibv_modify_qp only) with CRC32c on and off up to 16 MiB. Both sides
# must verify every byte.
set -u
build=${1:?build directory}
fail=0
run_pair() { # size, fault spec [device [iWARP CRC policy]]
	local size=$1 fault=$2 dev=${3:-roce_lo} crc=${4:-peer} port=$((20000 + RANDOM % 12000))
	# The iWARP rendezvous port too is random, so that parallel runs never meet.
	local rdv=$((20000 + RANDOM % 12000))
	SOFTRDMA_IW_PORT=$rdv SOFTRDMA_IW_CRC=$crc SOFTRDMA_FAULT="$fault" \
		timeout 60 "$build/rdma_example" -d "$dev" -p "$port" -s "$size" >/tmp/ex_srv.$$ 2>&1 &
	local srv=$!
	SOFTRDMA_IW_PORT=$rdv SOFTRDMA_IW_CRC=$crc SOFTRDMA_FAULT="$fault" \
		timeout 60 "$build/rdma_example" -d "$dev" -p "$port" -s "$size" 127.0.0.1 >/tmp/ex_cli.$$ 2>&1
	local rc=$?
	wait "$srv"
	local rs=$?
	if [ $rc -ne 0 ] || [ $rs -ne 0 ]; then
		echo "FAIL $dev size=$size fault='$fault' crc=$crc (client $rc, server $rs)"
		sed 's/^/  client: /' /tmp/ex_cli.$$
		sed 's/^/  server: /' /tmp/ex_srv.$$
		fail=$((fail + 1))
	else
		grep -q "all checks passed" /tmp/ex_cli.$$ && grep -q "all checks passed" /tmp/ex_srv.$$ ||
			{ echo "FAIL size=$size: no verdict"; fail=$((fail + 1)); }
		echo "ok   $dev size=$size fault='$fault' crc=$crc"
	fi
	rm -f /tmp/ex_srv.$$ /tmp/ex_cli.$$
}
for size in 8 4095 4096 4097 1048576; do
	run_pair "$size" ""
done
run_pair 1048576 "loss=1%,dup=0.5%,reorder=1%,seed=11"
run_pair 65536 "loss=5%,corrupt=1%,delay=200us,jitter=100us,seed=12"
for size in 8 4096 1048576 16777216; do
	run_pair "$size" "" iwarp_lo peer
	run_pair "$size" "" iwarp_lo on
done
[ $fail -eq 0 ] && echo "example: all runs passed" || echo "example: $fail runs failed"
exit $fail
