#!/usr/bin/env bash
# tshark decodes what softrdma sends as RoCEv2: capture the example program's traffic on lo
# (UDP 4791), then check that every packet is dissected as InfiniBand (RRoCE), that the
# expected opcodes are there, and that tshark flags nothing as malformed.
# Needs tshark and the right to capture on lo (root); otherwise it says why and skips (77).
set -u
# Every packet alone: on lo a capture sees a GSO train as one super-packet (src/io/io.h).
export SOFTRDMA_GSO=0
build=${1:?build directory}
command -v tshark >/dev/null || { echo "SKIP: tshark not installed"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"; [ -n "${cap:-}" ] && kill "$cap" 2>/dev/null' EXIT
# One capture of one example run. The capture may start late on a loaded machine ("Capturing
# on" comes before dumpcap has the interface): a run whose capture holds nothing is done once
# more.
capture_run() {
	rm -f "$dir/cap.pcap" "$dir/tshark.log"
	tshark -i lo -f "udp port 4791" -w "$dir/cap.pcap" -q >"$dir/tshark.log" 2>&1 &
	cap=$!
	# Wait until the capture is running.
	for _ in $(seq 50); do grep -q "Capturing on" "$dir/tshark.log" && break; sleep 0.1; done
	if ! grep -q "Capturing on" "$dir/tshark.log"; then
		echo "SKIP: cannot capture on lo:"; cat "$dir/tshark.log"; exit 77
	fi
	sleep 0.3
	port=$((20000 + RANDOM % 12000))
	# Traffic class 0x48 (DSCP 18, ECN 0) must reach the IP header, as must hop limit 64.
	timeout 60 "$build/rdma_example" -d roce_lo -p "$port" -s 10000 -c 0x48 >"$dir/srv.log" 2>&1 &
	srv=$!
	timeout 60 "$build/rdma_example" -d roce_lo -p "$port" -s 10000 -c 0x48 127.0.0.1 >"$dir/cli.log" 2>&1
	rc=$?
	wait "$srv"; rs=$?
	sleep 0.5
	kill -INT "$cap"; wait "$cap" 2>/dev/null; cap=
}
capture_run
if [ "$(tshark -r "$dir/cap.pcap" 2>/dev/null | wc -l)" -le 15 ]; then
	echo "note: the capture missed the run; once more"
	capture_run
fi
fail=0
[ $rc -eq 0 ] && [ $rs -eq 0 ] || { echo "FAIL: example failed"; cat "$dir"/*.log; exit 1; }
total=$(tshark -r "$dir/cap.pcap" 2>/dev/null | wc -l)
roce=$(tshark -r "$dir/cap.pcap" -Y infiniband 2>/dev/null | wc -l)
malformed=$(tshark -r "$dir/cap.pcap" -Y "_ws.malformed || _ws.expert.severity >= 8388608" 2>/dev/null | wc -l)
echo "captured $total packets, $roce decoded as RoCEv2, $malformed malformed or errors"
[ "$total" -gt 15 ] || { echo "FAIL: too few packets captured"; fail=1; }
[ "$roce" -eq "$total" ] || { echo "FAIL: not every packet decodes as InfiniBand"; fail=1; }
[ "$malformed" -eq 0 ] || { echo "FAIL: tshark flags packets:"; tshark -r "$dir/cap.pcap" -Y "_ws.malformed || _ws.expert.severity >= 8388608" | head; fail=1; }
# Every opcode the example uses must appear (tshark's opcode numbers).
ops=$(tshark -r "$dir/cap.pcap" -Y "infiniband.bth.destqp != 0" -T fields -e infiniband.bth.opcode 2>/dev/null | sort -n | uniq -c)
echo "$ops"
for op in 0 1 2 6 7 8 12 13 14 15 17 18 19 20; do
	echo "$ops" | awk '{print $2}' | grep -qx "$op" || { echo "FAIL: opcode $op not seen"; fail=1; }
done
# Header checks: destination port 4791, DF set, IPv4 ID 0, source port in rxe's range,
# TOS and TTL from the address vector. (DestQP 0 packets are softrdma's steering probes
# between local sockets: io/io.h.)
bad=$(tshark -r "$dir/cap.pcap" -Y "infiniband.bth.destqp != 0" -T fields -e udp.dstport -e ip.flags.df -e ip.id -e udp.srcport -e ip.dsfield -e ip.ttl 2>/dev/null |
	awk '$1 != 4791 || $2 != 1 || $3 != "0x0000" || $4 < 49152 || $5 != "0x48" || $6 != 64' | wc -l)
[ "$bad" -eq 0 ] || { echo "FAIL: $bad packets with unexpected IP/UDP header fields"; fail=1; }
exit $fail
