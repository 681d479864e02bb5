#!/usr/bin/env bash
# XRC on the wire: capture Debian's ibv_xsrq_pingpong on roce_lo (the drop-in library, UDP 4791
# on lo) and check it with tshark. Every packet must decode as InfiniBand with an XRC opcode
# (IBA 9.2: the RC opcode + 0xA0; tshark names them "Extended Reliable Connection (XRC)"),
# SENDs split at the 1024-byte MTU (XRC SEND FIRST 160 / LAST 162) and acknowledged (XRC
# ACKNOWLEDGE 177), nothing malformed. tshark 4.0 names the opcodes but does not dissect the
# XRCETH: it shows the bytes after the BTH as "vendor" data, whose first four bytes must be the
# XRCETH of every request (8 reserved bits, then the peer's SRQ number as the program printed
# it) and the AETH of every ACK (an ACK, or an RNR NAK when a receive came late). Skips (77)
# without tshark, the program, or capture rights.
set -u
# Every packet alone: on lo a capture sees a GSO train as one super-packet (src/io/io.h).
export SOFTRDMA_GSO=0
build=${1:?build directory}
command -v tshark >/dev/null || { echo "SKIP: tshark not installed"; exit 77; }
command -v ibv_xsrq_pingpong >/dev/null || { echo "SKIP: ibv_xsrq_pingpong not installed"; exit 77; }
run=("$build/softrdma" run --)
if grep -q "SOFTRDMA_SANITIZE:BOOL=ON" "$build/CMakeCache.txt" 2>/dev/null; then
	# The library runs under ASan (preloaded into the program, not into tshark).
	run=(env "LD_PRELOAD=$(gcc -print-file-name=libasan.so)" ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 "${run[@]}")
fi
dir=$(mktemp -d)
srv=
trap 'rm -rf "$dir"; [ -n "${cap:-}" ] && kill "$cap" 2>/dev/null; [ -n "$srv" ] && kill "$srv" 2>/dev/null' EXIT
tshark -i lo -f "udp port 4791" -w "$dir/cap.pcap" -q >"$dir/tshark.log" 2>&1 &
cap=$!
for _ in $(seq 50); do grep -q "Capturing on" "$dir/tshark.log" && break; sleep 0.1; done
if ! grep -q "Capturing on" "$dir/tshark.log"; then
	echo "SKIP: cannot capture on lo:"; cat "$dir/tshark.log"; exit 77
fi
sleep 0.3 # "Capturing on" comes before dumpcap has the interface
port=$((20000 + RANDOM % 12000))
args=(ibv_xsrq_pingpong -d roce_lo -g 0 -n 5 -s 2000 -m 1024 -p "$port")
timeout 60 "${run[@]}" "${args[@]}" >"$dir/srv.log" 2>&1 &
srv=$!
sleep 0.3
timeout 60 "${run[@]}" "${args[@]}" 127.0.0.1 >"$dir/cli.log" 2>&1
rc=$?
wait "$srv"; rs=$?
srv=
sleep 0.5
kill -INT "$cap"; wait "$cap" 2>/dev/null; cap=
[ $rc -eq 0 ] && [ $rs -eq 0 ] || { echo "FAIL: ibv_xsrq_pingpong failed ($rc, $rs)"; cat "$dir"/*.log; exit 1; }
fail=0
# SRQ numbers as each side printed its own ("local: ... SRQN 000001").
srqn_srv=$(awk '/^ *local:/ { for (i = 1; i < NF; i++) if ($i == "SRQN") { sub(",", "", $(i+1)); print $(i+1) } }' "$dir/srv.log")
srqn_cli=$(awk '/^ *local:/ { for (i = 1; i < NF; i++) if ($i == "SRQN") { sub(",", "", $(i+1)); print $(i+1) } }' "$dir/cli.log")
qp_srv=$(awk '/^ *local:/ { for (i = 1; i < NF; i++) if ($i == "RECV") print $(i+1) }' "$dir/srv.log")
echo "server: XRC_RECV QP $qp_srv, SRQ $srqn_srv; client SRQ $srqn_cli"
# DestQP 0: softrdma's steering probes between local sockets (io/io.h), not XRC.
tshark -r "$dir/cap.pcap" -Y "infiniband.bth.destqp != 0" -T fields -e infiniband.bth.opcode \
	-e infiniband.bth.destqp -e infiniband.vendor -E occurrence=f >"$dir/pkts" 2>/dev/null
total=$(wc -l <"$dir/pkts")
malformed=$(tshark -r "$dir/cap.pcap" -Y "_ws.malformed || _ws.expert.severity >= 8388608" 2>/dev/null | wc -l)
names=$(tshark -r "$dir/cap.pcap" -Y "infiniband.bth.destqp != 0" -V 2>/dev/null | grep -c "Opcode: Extended Reliable Connection (XRC)")
echo "captured $total XRC-addressed packets, $names named XRC by tshark, $malformed malformed"
awk '{print $1}' "$dir/pkts" | sort -n | uniq -c
[ "$total" -ge 20 ] || { echo "FAIL: too few packets"; fail=1; }
[ "$names" -eq "$total" ] || { echo "FAIL: not every packet decodes as XRC"; fail=1; }
[ "$malformed" -eq 0 ] || { echo "FAIL: tshark flags packets"; fail=1; }
for op in 160 162 177; do
	awk '{print $1}' "$dir/pkts" | grep -qx "$op" || { echo "FAIL: opcode $op not seen"; fail=1; }
done
# Requests (160..176, but for the responses 173..178) carry the XRCETH: 00 + the SRQ number of
# the side they go to (the server's XRC_RECV QP takes the client's sends to the server's SRQ).
bad=$(awk -v qs="0x$qp_srv" -v ss="$srqn_srv" -v sc="$srqn_cli" '
	function hex(s) { gsub(":", "", s); return tolower(s) }
	{
		op = $1 + 0; x = hex(substr($3, 1, 11))
		if (op >= 173 && op <= 178) {
			# An ACK (syndrome 0x1f: unlimited credits), or an RNR NAK (0x60-0x7f: the
			# program had not posted its SRQ receive yet, which a loaded machine does).
			s = substr(x, 1, 2)
			if (op == 177 && s != "1f" && s !~ /^[67]/) { print "ACK with syndrome " s ": " $0; n++ }
			next
		}
		want = "00" (tolower($2) == tolower(qs) ? ss : sc)
		if (x != want) { print "XRCETH " x ", want " want ": " $0; n++ }
	}
	END { exit n + 0 }' "$dir/pkts") || { echo "FAIL: XRCETH / AETH bytes:"; echo "$bad" | head; fail=1; }
exit $fail
