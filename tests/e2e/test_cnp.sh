#!/usr/bin/env bash
# DCQCN on roce_lo. The notification point: with SOFTRDMA_ECN=1 every RoCEv2 packet is
# ECN-capable, and the fault stage's `ce` key marks half of them Congestion Experienced on the
# way out, as a congested switch would. Each side must then count the marks it receives
# (rx_ecn_ce), answer them with CNPs (cnp_tx: at most one per 4 us per QP, so no more than the
# marks), and the peer must take every one of those CNPs (cnp_rx: their ICRC checked). On the
# wire (a capture on lo, GSO off) every CNP is BTH opcode 0x81 with BECN set and PSN 0, to the
# peer's QP, at DSCP 48 and not ECN-capable. Without SOFTRDMA_ECN the fault stage marks
# nothing (a switch marks ECN-capable packets only) and no CNP goes out. UD too: perftest's
# ib_send_bw -c UD through the drop-in library, the receiver's CNPs taken by the sending QP.
# Usage: test_cnp.sh BUILD_DIR
set -u
build=${1:?build directory}
perf=$build/sr_perf
[ -x "$perf" ] || { echo "FAIL: $perf not built"; exit 1; }
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null; done; [ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
export SOFTRDMA_UDP_PORT=$((20000 + RANDOM % 12000))
export SOFTRDMA_GSO=0 SOFTRDMA_STATS=1
port=$((20000 + RANDOM % 12000))
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# run LABEL: a 300-round-trip SEND ping-pong with the environment as it is; the counters of
# the server's and the client's context in $tmp/LABEL.srv, .cli.
run() {
	timeout 60 "$perf" -t lat -p $port -n 300 >"$tmp/$1.srv" 2>&1 &
	local s=$!
	pids+=("$s")
	sleep 0.3
	timeout 60 "$perf" -t lat -p $port -n 300 127.0.0.1 >"$tmp/$1.cli" 2>&1
	local rc=$?
	wait "$s"
	local rs=$?
	port=$((port + 1))
	if [ $rc -ne 0 ] || [ $rs -ne 0 ]; then
		bad "$1: client exit $rc, server exit $rs"
		tail -3 "$tmp/$1.cli" "$tmp/$1.srv"
		return 1
	fi
}
# count FILE NAME: the largest NAME=N in the context lines of FILE (0 if none).
count() {
	grep "context:" "$1" | grep -o "\b$2=[0-9]*" | cut -d= -f2 | sort -n | tail -n 1 | grep . ||
		echo 0
}

cap=
if command -v tshark >/dev/null && command -v dumpcap >/dev/null; then
	cap=$tmp/cnp.pcap
	dumpcap -q -i lo -f "udp port $SOFTRDMA_UDP_PORT" -w "$cap" >"$tmp/tshark.log" 2>&1 &
	tpid=$!
	pids+=("$tpid")
	for _ in $(seq 100); do
		grep -q "Capturing on" "$tmp/tshark.log" 2>/dev/null && break
		sleep 0.1
	done
	grep -q "Capturing on" "$tmp/tshark.log" || { echo "note: no capture on lo"; cap=; }
fi

SOFTRDMA_ECN=1 SOFTRDMA_FAULT=ce=0.5,seed=11 run marked || exit 1
total_tx=0
for side in srv cli; do
	other=$([ $side = srv ] && echo cli || echo srv)
	ce=$(count "$tmp/marked.$side" rx_ecn_ce)
	tx=$(count "$tmp/marked.$side" cnp_tx)
	rx=$(count "$tmp/marked.$other" cnp_rx)
	marked=$(count "$tmp/marked.$other" fault_ce_marked)
	total_tx=$((total_tx + tx))
	[ "$ce" -gt 50 ] || bad "$side: $ce CE-marked packets received (the peer marked $marked)"
	[ "$ce" -eq "$marked" ] || bad "$side: received $ce CE marks, the peer's fault stage made $marked"
	[ "$tx" -gt 0 ] && [ "$tx" -le "$ce" ] || bad "$side: $tx CNPs for $ce marks"
	[ "$rx" -eq "$tx" ] || bad "$side sent $tx CNPs, its peer took $rx"
	echo "ok   $side: $ce CE marks received, $tx CNPs sent, $rx taken by the peer"
done

if [ -n "$cap" ]; then
	sleep 1.5 # the kernel hands the capture its frames in blocks
	kill -TERM "$tpid" 2>/dev/null
	wait "$tpid" 2>/dev/null
	tshark -r "$cap" -d "udp.port==$SOFTRDMA_UDP_PORT,infiniband" -Y "infiniband.bth.opcode == 0x81" \
		-T fields -e ip.dsfield.dscp -e ip.dsfield.ecn -e infiniband.bth.psn \
		-e infiniband.bth.destqp -e _ws.expert.severity -e udp.payload \
		2>/dev/null >"$tmp/cnp.fields"
	n=$(wc -l <"$tmp/cnp.fields")
	[ "$n" -eq "$total_tx" ] || bad "captured $n CNPs, the counters say $total_tx"
	# The BTH bytes (this tshark names no BECN field): opcode 0x81, flags 0, P_Key 0xFFFF,
	# BECN (0x40), the QP, PSN 0; then 16 zero bytes and the ICRC.
	odd=$( (awk -F'\t' '$1 != 48 || $2 != 0 || $3 != 0 || $4 == "" || $4 == "0x000000" ||
		$5 != "" {print}' "$tmp/cnp.fields"
		cut -f6 "$tmp/cnp.fields" | grep -E -v '^8100ffff40[0-9a-f]{6}0{8}0{32}[0-9a-f]{8}$') |
		sort | uniq -c)
	[ -z "$odd" ] || bad "CNPs not as RoCE NICs send them (dscp ecn psn destqp expert bytes):
$odd"
	[ -n "$odd" ] || [ "$n" -eq 0 ] || echo "ok   $n CNPs on the wire: opcode 0x81, BECN, PSN 0, DSCP 48, ECN 0"
fi

# The reaction point: 64 KiB RDMA WRITEs with a tenth of the writer's packets marked. The
# target answers with CNPs; the writer's QP takes them (cc_cnps), cuts its rate (cc_cuts) and
# holds requests for the paced rate (cc_held), and the transfer completes. (How fast is a
# benchmark's business, not a test's.)
bw() {
	timeout 60 "$perf" -p $port >"$tmp/bw.srv" 2>&1 &
	local s=$!
	pids+=("$s")
	sleep 0.3
	timeout 60 "$perf" -t bw -n 1000 -p $port 127.0.0.1 >"$tmp/bw.cli" 2>&1
	local rc=$?
	wait "$s"
	local rs=$?
	port=$((port + 1))
	[ $rc -eq 0 ] && [ $rs -eq 0 ] || { bad "bw: client exit $rc, server exit $rs"; tail -3 "$tmp/bw.cli"; }
}
SOFTRDMA_ECN=1 SOFTRDMA_FAULT=ce=0.1,seed=3 bw
qp=$(grep "QP 0x" "$tmp/bw.cli" | grep "cc_cnps=" | head -n 1)
v() { echo "$qp" | grep -o "\b$1=[0-9]*" | cut -d= -f2 | grep . || echo 0; }
cnps=$(v cc_cnps) cuts=$(v cc_cuts) held=$(v cc_held) sent=$(count "$tmp/bw.srv" cnp_tx)
[ "$cnps" -gt 0 ] && [ "$cnps" -eq "$sent" ] || bad "bw: the target sent $sent CNPs, the writer's QP took $cnps"
[ "$cuts" -gt 0 ] && [ "$cuts" -le "$cnps" ] || bad "bw: $cuts rate cuts for $cnps CNPs"
[ "$held" -gt 0 ] || bad "bw: no request waited for the paced rate"
# The gauge: the rate the QP was at when it closed, at most the line rate (lo: 25 Gbit/s).
rate=$(v cc_rate_kbps)
[ "$rate" -gt 0 ] && [ "$rate" -le 25000000 ] || bad "bw: cc_rate_kbps=$rate"
echo "ok   bw: $cnps CNPs taken, $cuts rate cuts, $held requests held for the rate, ${rate} kbit/s at the end"

# UD (ib_send_bw -c UD through the drop-in library): the receiving UD QP answers marked
# datagrams with CNPs to the QP that sent them (the DETH's source QP, at the address and port
# they came from), and the sending UD QP takes them and cuts its rate, as a connected QP does.
if command -v ib_send_bw >/dev/null; then
	run_pt=("$build/softrdma" run --)
	if grep -q "SOFTRDMA_SANITIZE:BOOL=ON" "$build/CMakeCache.txt" 2>/dev/null; then
		export LD_PRELOAD="$(gcc -print-file-name=libasan.so)"
		export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
	fi
	ud() {
		SOFTRDMA_ECN=1 SOFTRDMA_FAULT=ce=0.1,seed=5 timeout 60 "${run_pt[@]}" ib_send_bw \
			-d roce_lo -x 0 -c UD -n 2000 -p $port >"$tmp/ud.srv" 2>&1 &
		local s=$!
		pids+=("$s")
		sleep 0.5
		SOFTRDMA_ECN=1 SOFTRDMA_FAULT=ce=0.1,seed=6 timeout 60 "${run_pt[@]}" ib_send_bw \
			-d roce_lo -x 0 -c UD -n 2000 -p $port 127.0.0.1 >"$tmp/ud.cli" 2>&1
		local rc=$?
		wait "$s"
		local rs=$?
		port=$((port + 1))
		[ $rc -eq 0 ] && [ $rs -eq 0 ] && return 0
		echo "ud: client exit $rc, server exit $rs"
		tail -3 "$tmp/ud.cli" "$tmp/ud.srv"
		return 1
	}
	ud || ud || bad "ud: ib_send_bw -c UD failed twice"
	ce=$(count "$tmp/ud.srv" rx_ecn_ce) sent=$(count "$tmp/ud.srv" cnp_tx)
	took=$(count "$tmp/ud.cli" cnp_rx)
	qp=$(grep "QP 0x" "$tmp/ud.cli" | grep "cc_cnps=" | head -n 1)
	cnps=$(v cc_cnps) cuts=$(v cc_cuts)
	[ "$ce" -gt 20 ] || bad "ud: the receiver saw $ce CE marks"
	[ "$sent" -gt 0 ] && [ "$sent" -le "$ce" ] || bad "ud: $sent CNPs for $ce marks"
	[ "$took" -eq "$sent" ] && [ "$cnps" -eq "$sent" ] ||
		bad "ud: the receiver sent $sent CNPs, the sender's context took $took, its QP $cnps"
	[ "$cuts" -gt 0 ] && [ "$cuts" -le "$cnps" ] || bad "ud: $cuts rate cuts for $cnps CNPs"
	echo "ok   ud: $ce CE marks, $sent CNPs sent, $cnps taken by the sending UD QP, $cuts rate cuts"
	unset LD_PRELOAD ASAN_OPTIONS
else
	echo "note: ib_send_bw (perftest) not installed: UD not checked"
fi

# Not ECN-capable: the fault stage marks nothing, nobody sends a CNP.
SOFTRDMA_FAULT=ce=0.5,seed=11 run plain || exit 1
for side in srv cli; do
	for k in rx_ecn_ce cnp_tx cnp_rx fault_ce_marked; do
		v=$(count "$tmp/plain.$side" $k)
		[ "$v" -eq 0 ] || bad "without SOFTRDMA_ECN: $side $k=$v"
	done
	! grep -q "cc_cnps=" "$tmp/plain.$side" || bad "without SOFTRDMA_ECN: $side QP took CNPs"
done
echo "ok   without SOFTRDMA_ECN: no CE marks, no CNPs"
exit $fail
