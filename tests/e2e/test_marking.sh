#!/usr/bin/env bash
# Marking (src/util/mark.h) between two network namespaces over a veth pair, checked on the
# frames captured on the wire and on the sockets (ss --tos):
#   - RoCEv2 (sr_perf over roce_<veth>): every packet DSCP 26 (the device default), ECN 0;
#     with SOFTRDMA_ECN=1, ECT(0); with SOFTRDMA_DSCP=10, DSCP 10; a QP's own traffic class
#     (perftest's --tclass 184, unmodified ib_send_lat) DSCP 46 on its packets;
#   - iWARP (sr_perf over iwarp_<veth>): the connection's segments DSCP 26 (TCP's ECN bits are
#     the kernel's); rdma_cm's TOS option (ib_send_lat -R --tos 184) DSCP 46;
#   - the sockets' skb priority (ss's class_id) 3, the priority a VLAN's egress map turns into
#     PCP 3; where the kernel has VLANs (8021q), the link is a VLAN with the identity egress
#     map and the captured frames' PCP is checked too.
# Needs root (namespaces), tshark and ss; skips (77) without them. Cleans up its namespaces
# and the processes it started.
# Usage: test_marking.sh BUILD_DIR
set -u
build=${1:?build directory}
perf=$build/sr_perf
[ -x "$perf" ] || { echo "FAIL: $perf not built"; exit 1; }
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (network namespaces)"; exit 77; }
for p in ip tshark dumpcap ss; do
	command -v $p >/dev/null || { echo "SKIP: $p not installed"; exit 77; }
done
has_perftest=1
command -v ib_send_lat >/dev/null || has_perftest=0
# perftest on a sanitizer build's library: the runtime preloaded (as test_dropin.sh).
asan=
if grep -q "SOFTRDMA_SANITIZE:BOOL=ON" "$build/CMakeCache.txt" 2>/dev/null; then
	asan=$(gcc -print-file-name=libasan.so)
	export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
fi
na=srmark$$a nb=srmark$$b
dir=$(mktemp -d)
pids=()
cleanup() {
	local p
	for p in "${pids[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null; done
	ip netns del "$na" 2>/dev/null
	ip netns del "$nb" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT
fail=0
bad() { echo "FAIL: $*"; fail=1; }

ip netns add "$na" && ip netns add "$nb" &&
	ip link add vA netns "$na" type veth peer name vB netns "$nb" ||
	{ echo "SKIP: cannot create namespaces and a veth pair"; exit 77; }
ip -n "$na" link set lo up && ip -n "$nb" link set lo up
ip -n "$na" link set vA up && ip -n "$nb" link set vB up
# A VLAN over the veth where the kernel has them: skb priority p leaves as PCP p.
ifa=vA ifb=vB vlan=0
map="0:0 1:1 2:2 3:3 4:4 5:5 6:6 7:7"
if ip -n "$na" link add link vA name vA.7 type vlan id 7 egress-qos-map $map 2>/dev/null &&
	ip -n "$nb" link add link vB name vB.7 type vlan id 7 egress-qos-map $map 2>/dev/null; then
	ip -n "$na" link set vA.7 up && ip -n "$nb" link set vB.7 up
	ifa=vA.7 ifb=vB.7 vlan=1
fi
ip -n "$na" addr add 10.231.7.1/24 dev $ifa && ip -n "$nb" addr add 10.231.7.2/24 dev $ifb ||
	{ bad "cannot address the link"; exit 1; }
if [ $vlan = 1 ]; then
	echo "link: VLAN 7 over a veth pair (PCP checked on the frames)"
else
	echo "link: a veth pair (this kernel has no VLANs: the priority is checked on the sockets only)"
fi
ina() { ip netns exec "$na" "$@"; }
inb() { ip netns exec "$nb" "$@"; }
export SOFTRDMA_QUIET=1
port=$((20000 + RANDOM % 12000))
export SOFTRDMA_IW_PORT=$((port + 500))

# capture NAME: starts tshark on the veth in namespace a (frames as they leave: tagged when a
# VLAN is on it), until stop_capture.
cap_pid=
capture() {
	cap=$dir/$1.pcap
	# At most 3,000 frames or 40 s (ip netns exec runs dumpcap itself: its PID is ours).
	ina dumpcap -q -i vA -c 3000 -a duration:40 -w "$cap" >"$dir/$1.tshark" 2>&1 &
	cap_pid=$!
	pids+=("$cap_pid")
	for _ in $(seq 100); do
		grep -q "Capturing on" "$dir/$1.tshark" 2>/dev/null && break
		sleep 0.1
	done
	grep -q "Capturing on" "$dir/$1.tshark" ||
		{ echo "SKIP: dumpcap cannot capture in a namespace:"; cat "$dir/$1.tshark"; exit 77; }
}
stop_capture() {
	[ -n "$cap_pid" ] || return 0
	# The kernel hands frames to the capture in blocks, a partly filled one after its
	# timeout (libpcap, TPACKET_V3): a capture stopped sooner loses the last frames.
	sleep 1.5
	kill -TERM "$cap_pid" 2>/dev/null # SIGINT: ignored by a background job
	wait "$cap_pid" 2>/dev/null
	cap_pid=
}

# run_pair LABEL SERVER_CMD... -- CLIENT_CMD...: the server in namespace b, the client (to
# 10.231.7.2) in namespace a, both bounded in time; with PROBE set, `ss --tos` in namespace a
# halfway through the client's run, into $dir/LABEL.ss.
run_pair() {
	local label=$1 srv=() cli=() s rc rs
	shift
	while [ "$1" != -- ]; do srv+=("$1"); shift; done
	shift
	cli=("$@")
	inb timeout 30 "${srv[@]}" >"$dir/$label.srv" 2>&1 &
	s=$!
	pids+=("$s")
	sleep 0.5
	ina timeout 30 "${cli[@]}" >"$dir/$label.cli" 2>&1 &
	local c=$!
	pids+=("$c")
	if [ -n "${PROBE:-}" ]; then
		sleep 0.7
		ina ss -anp --tos >"$dir/$label.ss" 2>&1
	fi
	wait "$c"
	rc=$?
	wait "$s"
	rs=$?
	if [ $rc -ne 0 ] || [ $rs -ne 0 ]; then
		bad "$label: client exit $rc, server exit $rs"
		tail -3 "$dir/$label.cli" "$dir/$label.srv"
		return 1
	fi
}

# fields FILTER: dscp ecn pcp of every captured frame that FILTER selects, counted.
fields() {
	tshark -r "$cap" -Y "$1" -T fields -e ip.dsfield.dscp -e ip.dsfield.ecn -e vlan.priority \
		2>/dev/null | sort | uniq -c
}

# expect LABEL FILTER DSCP ECN: every frame FILTER selects (at least 10) has that DSCP, that
# ECN field (- : any) and, on a VLAN, PCP 3.
expect() {
	local label=$1 filter=$2 dscp=$3 ecn=$4 n
	fields "$filter" >"$dir/$label.fields"
	n=$(awk '{s += $1} END {print s + 0}' "$dir/$label.fields")
	if [ "$n" -lt 10 ]; then
		bad "$label: only $n frames captured ($filter)"
		return
	fi
	if ! awk -v d="$dscp" -v e="$ecn" -v v="$vlan" '
		$2 != d || (e != "-" && $3 != e) || (v == 1 && $4 != 3) { bad = 1 }
		END { exit bad }' "$dir/$label.fields"; then
		bad "$label: frames (count dscp ecn pcp) other than DSCP $dscp ECN $ecn:"
		sed 's/^/    /' "$dir/$label.fields"
		return
	fi
	echo "ok   $label: $n frames, DSCP $dscp, ECN $ecn$([ $vlan = 1 ] && echo ", PCP 3")"
}

# sock_prio LABEL PATTERN TOS: the sockets of `ss --tos` lines matching PATTERN have that TOS
# and class_id (the skb priority) 3.
sock_prio() {
	local label=$1 pat=$2 tos=$3 lines
	lines=$(grep -E "$pat" "$dir/$label.ss" | grep -o "tos:0x[0-9a-f]* .*class_id:0x[0-9a-f]*")
	if [ -z "$lines" ]; then
		bad "$label: no socket matching '$pat' in ss --tos:"
		head -20 "$dir/$label.ss"
		return
	fi
	if echo "$lines" | grep -v -q "^tos:$tos .*class_id:0x3$"; then
		bad "$label: sockets not at TOS $tos priority 3: $(echo "$lines" | sort -u | tr '\n' ';')"
		return
	fi
	echo "ok   $label: sockets at TOS $tos, skb priority 3 ($(echo "$lines" | wc -l) seen)"
}

roce_a=roce_$(echo $ifa | tr . _) roce_b=roce_$(echo $ifb | tr . _)
iw_a=iwarp_$(echo $ifa | tr . _) iw_b=iwarp_$(echo $ifb | tr . _)
if ! ina env LD_LIBRARY_PATH="$build/lib" ibv_devices 2>/dev/null | grep -q "$roce_a"; then
	roce_a=roce_$ifa roce_b=roce_$ifb iw_a=iwarp_$ifa iw_b=iwarp_$ifb
fi
rocev2="udp.port == 4791"

# RoCEv2, the device default: DSCP 26, not ECN-capable; the sockets at priority 3.
capture roce
PROBE=1 run_pair roce "$perf" -d "$roce_b" -p $port -- \
	"$perf" -d "$roce_a" -p $port -t sbw -D 1 10.231.7.2 && {
	stop_capture
	expect "RoCEv2 default" "$rocev2" 26 0
	sock_prio roce "UNCONN.*sr_perf" 0x68
}
stop_capture
port=$((port + 1))

# SOFTRDMA_ECN=1: ECT(0). SOFTRDMA_DSCP=10: the default is 10.
capture ecn
SOFTRDMA_ECN=1 SOFTRDMA_DSCP=10 run_pair ecn "$perf" -d "$roce_b" -p $port -- \
	"$perf" -d "$roce_a" -p $port -t lat -n 50 10.231.7.2 && {
	stop_capture
	# priority 10 >> 3 = 1: no PCP 3 here; the DSCP and ECN are what is checked.
	v=$vlan vlan=0
	expect "RoCEv2 SOFTRDMA_DSCP=10 SOFTRDMA_ECN=1" "$rocev2" 10 2
	vlan=$v
}
stop_capture
port=$((port + 1))

# A QP's own traffic class (the GRH's), from an unmodified perftest: DSCP 46.
if [ $has_perftest = 1 ]; then
	capture tclass
	run_pair tclass env LD_LIBRARY_PATH="$build/lib" LD_PRELOAD="$asan" ib_send_lat -d "$roce_b" -x 0 \
		--tclass=184 -n 50 -p $port -- env LD_LIBRARY_PATH="$build/lib" LD_PRELOAD="$asan" ib_send_lat \
		-d "$roce_a" -x 0 --tclass=184 -n 50 -p $port 10.231.7.2 && {
		stop_capture
		# The QPs' packets (not the connection set-up on QP1 / TCP): BTH DestQP != 1.
		expect "RoCEv2 --tclass 184 (ib_send_lat)" "$rocev2 && infiniband.bth.destqp != 1" 46 0
	}
	stop_capture
	port=$((port + 1))
else
	echo "skip RoCEv2 --tclass: perftest not installed"
fi

# iWARP, the device default on its TCP connection (the rendezvous port), not on sr_perf's own
# side channel (port $port).
capture iwarp
PROBE=1 run_pair iwarp "$perf" -d "$iw_b" -p $port -- \
	"$perf" -d "$iw_a" -p $port -t sbw -D 1 10.231.7.2 && {
	stop_capture
	expect "iWARP default" "tcp.port == $SOFTRDMA_IW_PORT" 26 -
	sock_prio iwarp "ESTAB.*:$SOFTRDMA_IW_PORT\b.*sr_perf" 0x68
}
stop_capture
port=$((port + 1))

# rdma_cm's TOS option (ib_send_lat -R --tos): DSCP 46 on that connection.
if [ $has_perftest = 1 ]; then
	capture cmtos
	cmport=$((port + 700))
	run_pair cmtos env LD_LIBRARY_PATH="$build/lib" LD_PRELOAD="$asan" SOFTRDMA_TRANSPORT=iwarp ib_send_lat -R \
		--tos=184 -n 50 -p $cmport -- env LD_LIBRARY_PATH="$build/lib" \
		LD_PRELOAD="$asan" SOFTRDMA_TRANSPORT=iwarp ib_send_lat -R --tos=184 -n 50 -p $cmport 10.231.7.2 && {
		stop_capture
		# perftest's -R opens its side channel first, without the TOS, then the test's
		# connection with it: the last connection to the port, client to server (the
		# passive side keeps its own marking, as a kernel TCP that does not reflect).
		stream=$(tshark -r "$cap" -Y "tcp.flags.syn == 1 && tcp.flags.ack == 0 &&
			tcp.dstport == $cmport" -T fields -e tcp.stream 2>/dev/null | tail -n 1)
		expect "iWARP rdma_cm TOS 184 (ib_send_lat -R)" \
			"tcp.stream == ${stream:-999999} && tcp.dstport == $cmport" 46 -
	}
	stop_capture
else
	echo "skip iWARP rdma_cm TOS: perftest not installed"
fi
exit $fail
