#!/usr/bin/env bash
# RoCEv2 with GSO trains (SOFTRDMA_GSO=1, src/io/io.h "GSO trains") on roce_lo: a SEND
# ping-pong (each reply and the ACK before it leave as one super-packet) and 64 KiB RDMA WRITEs
# (trains of full packets), with the counters printed at close (SOFTRDMA_STATS=1). Both must
# finish, send trains, and drop nothing for a bad ICRC: the receiver accepts the IPv4
# Identification the kernel gives each segment (0, 1, 2, ...), which the sender's ICRC covers;
# and the kernel refuses none (a malformed super-packet would turn GSO off: udp_tx_drop_gso).
# Usage: test_gso.sh BUILD_DIR
set -u
build=${1:?build directory}
perf=$build/sr_perf
[ -x "$perf" ] || { echo "FAIL: $perf not built"; exit 1; }
tmp=$(mktemp -d)
srv=
trap '[ -n "$srv" ] && kill "$srv" 2>/dev/null; rm -rf "$tmp"' EXIT
export SOFTRDMA_UDP_PORT=$((20000 + RANDOM % 12000))
export SOFTRDMA_GSO=1 SOFTRDMA_STATS=1
port=$((20000 + RANDOM % 12000))
fail=0
for t in lat bw; do
	timeout 60 "$perf" -t $t -p $port -n 2000 >"$tmp/srv.$t" 2>&1 &
	srv=$!
	sleep 0.3
	timeout 60 "$perf" -t $t -p $port -n 2000 127.0.0.1 >"$tmp/cli.$t" 2>&1
	rc=$?
	wait "$srv"
	rs=$?
	srv=
	port=$((port + 1))
	if [ $rc -ne 0 ] || [ $rs -ne 0 ]; then
		echo "FAIL: sr_perf -t $t with SOFTRDMA_GSO=1 (client $rc, server $rs)"
		tail -5 "$tmp/cli.$t" "$tmp/srv.$t"
		fail=1
		continue
	fi
	# Which side sends trains: lat, both (reply + ACK); bw, the writer.
	trains=$(grep -ho 'udp_tx_gso_trains=[0-9]*' "$tmp/cli.$t" | cut -d= -f2 | sort -n | tail -1)
	if [ -z "$trains" ] || [ "$trains" -eq 0 ]; then
		if grep -q 'udp_tx_drop_gso=' "$tmp/cli.$t"; then
			echo "SKIP: the kernel refused UDP GSO on lo"
			exit 77
		fi
		echo "FAIL: $t: the client sent no GSO trains"
		grep -h "context:" "$tmp/cli.$t"
		fail=1
	fi
	if grep -ho "udp_tx_drop_gso=[0-9]*" "$tmp/cli.$t" "$tmp/srv.$t"; then
		echo "FAIL: $t: the kernel refused a train that it takes otherwise"
		fail=1
	fi
	if grep -h "rx_bad_icrc=" "$tmp/cli.$t" "$tmp/srv.$t"; then
		echo "FAIL: $t: packets of trains failed the ICRC check"
		fail=1
	fi
	echo "ok $t: $trains trains from the client; $(grep -h '^lat\|^bw\|Gbit' "$tmp/cli.$t" | head -1)"
done
exit $fail
