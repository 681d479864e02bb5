#!/usr/bin/env bash
# Measures softrdma's RC figures over RoCEv2 and iWARP and the raw-socket floors they ride on,
# in the same run, and prints one table: for each target of issue 11, softrdma's figure, the
# floor (or baseline) measured in the same run, the ratio, the target ratio and ok / MISS.
# Medians over the rounds; only same-run ratios count (the machines are noisy).
#   latency    100 B SEND round trip p50/p99, busy-polling: RoCEv2 / UDP ping-pong (and / a
#              UDP ping-pong that also carries each message's ACK, RC's floor),
#              iWARP / TCP ping-pong; RDMA WRITE ping-pong and RDMA READ whose target never
#              calls the library / the SEND round trip; event-driven (completion channel)
#              round trips / blocking UDP and TCP echo
#   bandwidth  RDMA WRITE of 64 KiB, 1, 4, 16 MiB: RoCEv2 / a UDP GSO+GRO stream of 64 KiB
#              super-packets, iWARP / a TCP stream of writes of the same size; 8 B SEND
#              message rate / 8 B UDP datagrams and 8 B TCP writes; CPU per 64 KiB, both sides
#   peers      UCX over TCP (ucx_perftest -t tag_lat) and libfabric tcp (fi_pingpong -e msg),
#              100 B round trips, when installed
#   scale      WRITE bandwidth with 8 QPs / 1 QP; 100 B latency with 1000 idle QPs / none
# Usage: bench/run.sh [--quick] [--rounds N] [--veth] [--build DIR] [--no-peers] [--idle N]
#   --quick      one round, fewer iterations (5000 round trips, 1 s streams): a few minutes
#   --rounds N   rounds (default 3; --quick: 1)
#   --veth       between two network namespaces over a veth pair this script creates and
#                deletes (MTU 1500: what two hosts see; needs root) instead of 127.0.0.1
#   --build DIR  softrdma build directory (default build; configured if missing, then built)
#   --no-peers   skip UCX and libfabric
#   --idle N     idle QPs of the scale row (default 1000)
# Needs ../shared/bench (pingpong.c: the ping-pong floors), gcc, cmake; taskset pins the
# server to CPU 0 and the client to CPU 1. Every process runs under timeout; ports are random.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=3 rounds_set=0 quick=0 veth=0 build=build peers=1 idle=1000
while [ $# -gt 0 ]; do
	case "$1" in
	--rounds) [ "${2:-}" -ge 1 ] 2>/dev/null || { echo "run.sh: --rounds needs a count >= 1" >&2; exit 2; }
		rounds=$2; rounds_set=1; shift 2 ;;
	--quick) quick=1; shift ;;
	--veth) veth=1; shift ;;
	--build) [ $# -ge 2 ] || { echo "run.sh: --build needs a directory" >&2; exit 2; }
		build=$2; shift 2 ;;
	--no-peers) peers=0; shift ;;
	--idle) [ "${2:-}" -ge 1 ] 2>/dev/null || { echo "run.sh: --idle needs a count >= 1" >&2; exit 2; }
		idle=$2; shift 2 ;;
	-h|--help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "run.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
	esac
done
if [ $quick = 1 ]; then
	[ $rounds_set = 1 ] || rounds=1
	n=5000 secs=1
else
	n=20000 secs=2
fi
shared=../shared/bench
[ -f "$shared/pingpong.c" ] || { echo "run.sh: $shared/pingpong.c (the ping-pong floor) not found" >&2; exit 1; }
if [ $veth = 1 ] && [ "$(id -u)" != 0 ]; then
	echo "run.sh: --veth needs root (network namespaces)" >&2
	exit 1
fi
if [ ! -f "$build/CMakeCache.txt" ]; then
	cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
fi
nice cmake --build "$build" -j "$(nproc)" --target sr_perf sr_floor >/dev/null
bin=$(cd "$build" && pwd)

T=$(mktemp -d)
pids=()
ns_made=()
veth_made=
cleanup() {
	local p
	set +e # every step, whatever failed before
	for p in "${pids[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null; done
	for p in "${pids[@]:-}"; do [ -n "$p" ] && wait "$p" 2>/dev/null; done
	for p in "${ns_made[@]:-}"; do [ -n "$p" ] && ip netns del "$p"; done
	# A veth end still in this namespace (interrupted before it moved) goes with its pair.
	[ -z "$veth_made" ] || ip link del "$veth_made" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
gcc -O2 -o "$T/pp" "$shared/pingpong.c" -lm

# Where the two ends run: 127.0.0.1, or two namespaces joined by a veth pair (names unique to
# this run; deleting a namespace deletes its end of the pair).
if [ $veth = 1 ]; then
	id=$$$((RANDOM % 100))
	id=${id: -6}
	nss=srb${id}s nsc=srb${id}c
	sub="10.$((RANDOM % 200 + 20)).$((RANDOM % 250))"
	ip netns add "$nss"; ns_made+=("$nss")
	ip netns add "$nsc"; ns_made+=("$nsc")
	veth_made=$nss
	ip link add "$nss" type veth peer name "$nsc"
	ip link set "$nss" netns "$nss"
	ip link set "$nsc" netns "$nsc"
	ip -n "$nss" addr add "$sub.1/24" dev "$nss"
	ip -n "$nsc" addr add "$sub.2/24" dev "$nsc"
	for ns in "$nss" "$nsc"; do ip -n "$ns" link set lo up; ip -n "$ns" link set "$ns" up; done
	srv_ns=(ip netns exec "$nss") cli_ns=(ip netns exec "$nsc")
	host=$sub.1 srv_if=$nss cli_if=$nsc
	where="veth between namespaces $nss and $nsc ($sub.0/24)"
else
	srv_ns=() cli_ns=()
	host=127.0.0.1 srv_if=lo cli_if=lo
	where="loopback 127.0.0.1"
fi
mtu=$("${cli_ns[@]}" cat "/sys/class/net/$cli_if/mtu")
# RoCEv2's datagrams on this path: the path MTU as softrdma (and rxe) picks it (1500 -> 1024,
# lo -> 4096) plus BTH and ICRC (16 bytes). The UDP floor sends datagrams of that size, as
# 64 KiB GSO super-packets of whole datagrams (at most 64).
pmtu=256
for m in 512 1024 2048 4096; do [ $((m + 60)) -le "$mtu" ] && pmtu=$m; done
seg=$((pmtu + 16))
segs=$((65507 / seg)); [ $segs -gt 64 ] && segs=64
superpkt=$((seg * segs))
C0=0 C1=1
[ "$(nproc)" -lt 2 ] && C1=0
# iWARP's auto-connect rendezvous port and the UDP port of RoCEv2: free ones of our own.
export SOFTRDMA_IW_PORT=$((31000 + RANDOM % 10000))
export SOFTRDMA_UDP_PORT=$((41000 + RANDOM % 10000))
port=$((21000 + RANDOM % 9000))

# pair NAME LIMIT SERVER-COMMAND... ::: CLIENT-COMMAND...: runs the server (CPU 0) and then
# the client (CPU 1), each under timeout LIMIT; the client's output goes to $T/NAME.out. The
# commands name the port $port; pair moves on to the next one.
pair() {
	local name=$1 limit=$2 srv=() sp i
	shift 2
	while [ "$1" != ":::" ]; do srv+=("$1"); shift; done
	shift
	timeout "$limit" "${srv_ns[@]}" taskset -c $C0 "${srv[@]}" > "$T/$name.srv" 2>&1 &
	sp=$!
	pids+=("$sp")
	sleep 0.3
	if ! timeout "$limit" "${cli_ns[@]}" taskset -c $C1 "$@" > "$T/$name.out" 2> "$T/$name.err"; then
		echo "run.sh: $name failed: $(tail -n 2 "$T/$name.err" "$T/$name.srv" | tr '\n' ' ')" >&2
		: > "$T/$name.out"
	fi
	for i in $(seq 50); do kill -0 "$sp" 2>/dev/null || break; sleep 0.1; done
	kill "$sp" 2>/dev/null || true
	wait "$sp" 2>/dev/null || true
	port=$((port + 1))
}
# keep KEY NAME FIELD [SCALE]: appends FIELD=value of $T/NAME.out (times SCALE) to the figure KEY.
keep() {
	local v
	v=$(tr ' ' '\n' < "$T/$2.out" | sed -n "s/^$3=//p" | head -n 1)
	[ -n "$v" ] && awk -v v="$v" -v s="${4:-1}" 'BEGIN {print v * s}' >> "$T/fig.$1"
	true
}
median() {
	[ -s "$T/fig.$1" ] || return 0
	sort -g "$T/fig.$1" | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'
}
sp_srv=("$bin/sr_perf")
fl_srv=("$bin/sr_floor")
roce_s=roce_$srv_if roce_c=roce_$cli_if iw_s=iwarp_$srv_if iw_c=iwarp_$cli_if
sizes="65536 1048576 4194304 16777216"
have_ucx=0 have_fi=0
[ $peers = 1 ] && command -v ucx_perftest >/dev/null && have_ucx=1
[ $peers = 1 ] && command -v fi_pingpong >/dev/null && have_fi=1

# srperf NAME DEV_S DEV_C ARGS...: one sr_perf test.
srperf() {
	local name=$1 ds=$2 dc=$3
	shift 3
	pair "$name" 180 "${sp_srv[@]}" -d "$ds" -p $port ::: "$bin/sr_perf" -d "$dc" -p $port "$@" "$host"
}
# pingpong NAME udp|tcp busy|block: the 100 B ping-pong floor.
pingpong() {
	pair "$1" 120 "$T/pp" -s -b "$host" -p $port -P "$2" -M "$3" ::: \
		"$T/pp" -c "$host" -p $port -P "$2" -M "$3" -m 100 -n $n -w $((n / 10))
}
# floor NAME ARGS...: one sr_floor stream.
floor() {
	local name=$1
	shift
	pair "$name" 60 "${fl_srv[@]}" -p $port ::: "$bin/sr_floor" -p $port -D $secs "$@" "$host"
}

start=$(date +%s)
for r in $(seq "$rounds"); do
	echo "round $r/$rounds ($where)" >&2
	# Latency, busy-polling.
	pingpong udp_lat udp busy; keep udp_p50 udp_lat p50; keep udp_p99 udp_lat p99
	pingpong tcp_lat tcp busy; keep tcp_p50 tcp_lat p50; keep tcp_p99 tcp_lat p99
	# RC's own share: a UDP ping-pong that also carries the ACK of each message (sr_floor -t rc).
	floor udp_rc -t rc -n $n; keep udp_rc_p50 udp_rc p50; keep udp_rc_p99 udp_rc p99
	for t in roce iw; do
		eval "ds=\$${t}_s dc=\$${t}_c"
		srperf ${t}_lat "$ds" "$dc" -t lat -n $n
		keep ${t}_p50 ${t}_lat p50; keep ${t}_p99 ${t}_lat p99; keep ${t}_avg ${t}_lat avg
		for k in wlat rlat; do
			srperf ${t}_$k "$ds" "$dc" -t $k -n $n
			keep ${t}_${k}_p50 ${t}_$k p50; keep ${t}_${k}_p99 ${t}_$k p99
		done
		# Event-driven.
		srperf ${t}_elat "$ds" "$dc" -t lat -e -n $((n / 2))
		keep ${t}_e_p50 ${t}_elat p50; keep ${t}_e_p99 ${t}_elat p99
		# Scale: idle QPs.
		# (2000 round trips: with many idle iWARP QPs a round trip has taken milliseconds)
		srperf ${t}_idle "$ds" "$dc" -t lat -I "$idle" -n 2000
		keep ${t}_idle_p50 ${t}_idle p50
	done
	# The floor of wlat: each side's messages taken by a thread woken on the core where the
	# application spins (sr_floor -t wlat).
	for P in udp tcp; do
		floor ${P}_wlat -t wlat -P $P -n $n
		keep ${P}_wl_p50 ${P}_wlat p50; keep ${P}_wl_p99 ${P}_wlat p99
	done
	pingpong udp_blk udp block; keep udp_b_p50 udp_blk p50; keep udp_b_p99 udp_blk p99
	pingpong tcp_blk tcp block; keep tcp_b_p50 tcp_blk p50; keep tcp_b_p99 tcp_blk p99
	# Bandwidth and CPU.
	floor udp_gso -P udp -m $superpkt -g $seg
	keep udp_gso_bw udp_gso gbps; keep udp_gso_cpu udp_gso cpu_us_per_64k
	for s in $sizes; do
		floor tcp_$s -P tcp -m "$s"; keep tcp_bw_$s tcp_$s gbps
		srperf roce_bw_$s "$roce_s" "$roce_c" -t bw -s "$s" -D $secs; keep roce_bw_$s roce_bw_$s gbps
		srperf iw_bw_$s "$iw_s" "$iw_c" -t bw -s "$s" -D $secs; keep iw_bw_$s iw_bw_$s gbps
	done
	keep tcp_cpu tcp_65536 cpu_us_per_64k
	keep roce_cpu roce_bw_65536 cpu_us_per_64k
	keep iw_cpu iw_bw_65536 cpu_us_per_64k
	for t in roce iw; do
		eval "ds=\$${t}_s dc=\$${t}_c"
		srperf ${t}_bw_q8 "$ds" "$dc" -t bw -q 8 -D $secs; keep ${t}_bw_q8 ${t}_bw_q8 gbps
		srperf ${t}_sbw "$ds" "$dc" -t sbw -s 8 -D $secs; keep ${t}_rate ${t}_sbw msgs_per_sec 1e-6
	done
	floor udp_8 -P udp -m 8; keep udp_rate udp_8 msgs_per_sec 1e-6
	floor tcp_8 -P tcp -m 8; keep tcp_rate tcp_8 msgs_per_sec 1e-6
	# Peers, 100 B round trips over TCP (their figures are one-way: half a round trip).
	if [ $have_ucx = 1 ]; then
		pair ucx 120 env UCX_TLS=tcp UCX_NET_DEVICES="$srv_if" ucx_perftest -p $port ::: \
			env UCX_TLS=tcp UCX_NET_DEVICES="$cli_if" ucx_perftest "$host" -p $port -t tag_lat \
			-s 100 -n $n -w $((n / 10)) -f
		awk 'NF >= 8 && $1 ~ /^[0-9]+$/ {print "p50=" $2 * 2, "avg=" $3 * 2}' "$T/ucx.out" > "$T/ucx.x"
		mv "$T/ucx.x" "$T/ucx.out"
		keep ucx_p50 ucx p50; keep ucx_avg ucx avg
	fi
	if [ $have_fi = 1 ]; then
		pair fi 120 fi_pingpong -p tcp -e msg -S 100 -I $n -B $port ::: \
			fi_pingpong -p tcp -e msg -S 100 -I $n -P $port "$host"
		awk '$1 == 100 && NF >= 8 {print "avg=" $7 * 2}' "$T/fi.out" > "$T/fi.x"
		mv "$T/fi.x" "$T/fi.out"
		keep fi_avg fi avg
	fi
done

# The table. row LABEL UNIT SOFTRDMA BASE OP TARGET: ratio = SOFTRDMA / BASE, ok when
# ratio OP TARGET (<= or >=).
pass=0 miss=0 na=0
row() {
	local label=$1 unit=$2 a=$3 b=$4 op=$5 tgt=$6 ratio mark
	if [ -z "$a" ] || [ -z "$b" ]; then
		printf "%-58s %-7s %10s %10s %7s %7s  %s\n" "$label" "$unit" "${a:-n/a}" "${b:-n/a}" - "$op$tgt" n/a
		na=$((na + 1))
		return
	fi
	ratio=$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}')
	if awk -v r="$ratio" -v t="$tgt" -v op="$op" 'BEGIN {exit !(op == "<=" ? r <= t : r >= t)}'; then
		mark=ok pass=$((pass + 1))
	else
		mark=MISS miss=$((miss + 1))
	fi
	printf "%-58s %-7s %10s %10s %7s %7s  %s\n" "$label" "$unit" "$a" "$b" "$ratio" "$op$tgt" "$mark"
}
info() {
	printf "%-58s %-7s %10s %10s %7s %7s\n" "$1" "$2" "${3:-n/a}" "${4:-n/a}" \
		"$(awk -v a="${3:-0}" -v b="${4:-0}" 'BEGIN {if (a > 0 && b > 0) printf "%.2f", a / b; else print "-"}')" -
}
m() { local v; v=$(median "$1"); [ -z "$v" ] || awk -v v="$v" 'BEGIN {printf "%.4g\n", v}'; }
echo
echo "softrdma bench/run.sh: $where, MTU $mtu (RoCEv2 path MTU $pmtu), $rounds round(s)," \
	"medians, $(($(date +%s) - start)) s; $(date -u +%Y-%m-%dT%H:%MZ)"
printf "%-58s %-7s %10s %10s %7s %7s  %s\n" "figure / its floor or baseline (same run)" unit softrdma floor ratio target ""
echo "-- 100 B SEND round trip, busy-polling"
row "RoCEv2 p50 / UDP ping-pong" us "$(m roce_p50)" "$(m udp_p50)" "<=" 1.3
row "RoCEv2 p99 / UDP ping-pong" us "$(m roce_p99)" "$(m udp_p99)" "<=" 2
row "iWARP p50 / TCP ping-pong" us "$(m iw_p50)" "$(m tcp_p50)" "<=" 1.2
row "iWARP p99 / TCP ping-pong" us "$(m iw_p99)" "$(m tcp_p99)" "<=" 2
echo "-- the same / RC's floor: a UDP ping-pong that carries each message's ACK too (sr_floor -t rc)"
info "RoCEv2 p50 / UDP ping-pong with ACKs p50" us "$(m roce_p50)" "$(m udp_rc_p50)"
info "RoCEv2 p99 / UDP ping-pong with ACKs p99" us "$(m roce_p99)" "$(m udp_rc_p99)"
info "UDP ping-pong with ACKs p50 / UDP ping-pong p50" us "$(m udp_rc_p50)" "$(m udp_p50)"
echo "-- target never calls the library: 100 B round trip / the SEND round trip"
for t in roce iw; do
	[ $t = roce ] && P=RoCEv2 || P=iWARP
	row "$P WRITE ping-pong (wlat) p50 / SEND p50" us "$(m ${t}_wlat_p50)" "$(m ${t}_p50)" "<=" 1.5
	row "$P WRITE ping-pong (wlat) p99 / SEND p99" us "$(m ${t}_wlat_p99)" "$(m ${t}_p99)" "<=" 3
	row "$P READ (rlat) p50 / SEND p50" us "$(m ${t}_rlat_p50)" "$(m ${t}_p50)" "<=" 1.5
	row "$P READ (rlat) p99 / SEND p99" us "$(m ${t}_rlat_p99)" "$(m ${t}_p99)" "<=" 3
done
echo "-- the same / its floor: a thread woken per message beside a spinning one (sr_floor -t wlat)"
info "RoCEv2 wlat p50 / UDP receiving-thread ping-pong p50" us "$(m roce_wlat_p50)" "$(m udp_wl_p50)"
info "RoCEv2 wlat p99 / UDP receiving-thread ping-pong p99" us "$(m roce_wlat_p99)" "$(m udp_wl_p99)"
info "iWARP wlat p50 / TCP receiving-thread ping-pong p50" us "$(m iw_wlat_p50)" "$(m tcp_wl_p50)"
info "iWARP wlat p99 / TCP receiving-thread ping-pong p99" us "$(m iw_wlat_p99)" "$(m tcp_wl_p99)"
info "UDP receiving-thread p50 / UDP busy ping-pong p50" us "$(m udp_wl_p50)" "$(m udp_p50)"
info "TCP receiving-thread p50 / TCP busy ping-pong p50" us "$(m tcp_wl_p50)" "$(m tcp_p50)"
echo "-- event-driven 100 B SEND round trip (completion channel) / blocking echo"
row "RoCEv2 p50 / UDP blocking ping-pong" us "$(m roce_e_p50)" "$(m udp_b_p50)" "<=" 2
info "RoCEv2 p99 / UDP blocking ping-pong" us "$(m roce_e_p99)" "$(m udp_b_p99)"
row "iWARP p50 / TCP blocking ping-pong" us "$(m iw_e_p50)" "$(m tcp_b_p50)" "<=" 2
info "iWARP p99 / TCP blocking ping-pong" us "$(m iw_e_p99)" "$(m tcp_b_p99)"
echo "-- RDMA WRITE bandwidth (payload), 32 outstanding"
for s in $sizes; do
	row "RoCEv2 $((s / 1024)) KiB / UDP GSO+GRO stream (${seg} B dgrams)" Gbit/s "$(m roce_bw_$s)" "$(m udp_gso_bw)" ">=" 0.8
done
for s in $sizes; do
	row "iWARP $((s / 1024)) KiB / TCP stream of $((s / 1024)) KiB writes" Gbit/s "$(m iw_bw_$s)" "$(m tcp_bw_$s)" ">=" 0.9
done
echo "-- 8 B message rate (SEND) / datagrams or writes of 8 B"
row "RoCEv2 SEND / UDP 8 B datagrams received" M/s "$(m roce_rate)" "$(m udp_rate)" ">=" 0.8
row "iWARP SEND / TCP 8 B writes (TCP_NODELAY)" M/s "$(m iw_rate)" "$(m tcp_rate)" ">=" 0.8
echo "-- CPU (user+system, both processes) per 64 KiB WRITE / the 64 KiB streams"
row "RoCEv2 / UDP GSO+GRO stream" us "$(m roce_cpu)" "$(m udp_gso_cpu)" "<=" 1.2
row "iWARP / TCP stream" us "$(m iw_cpu)" "$(m tcp_cpu)" "<=" 1.2
echo "-- peers over TCP, 100 B round trip (softrdma at least 2x faster)"
if [ $have_ucx = 1 ]; then
	row "RoCEv2 p50 / UCX tcp tag_lat p50" us "$(m roce_p50)" "$(m ucx_p50)" "<=" 0.5
	row "iWARP p50 / UCX tcp tag_lat p50" us "$(m iw_p50)" "$(m ucx_p50)" "<=" 0.5
else
	echo "   (UCX skipped: ucx_perftest not installed (ucx-utils) or --no-peers)"
fi
if [ $have_fi = 1 ]; then
	row "RoCEv2 mean / libfabric tcp fi_pingpong mean" us "$(m roce_avg)" "$(m fi_avg)" "<=" 0.5
	row "iWARP mean / libfabric tcp fi_pingpong mean" us "$(m iw_avg)" "$(m fi_avg)" "<=" 0.5
else
	echo "   (libfabric skipped: fi_pingpong not installed (libfabric-bin) or --no-peers)"
fi
echo "-- scale"
row "RoCEv2 64 KiB WRITE, 8 QPs / 1 QP" Gbit/s "$(m roce_bw_q8)" "$(m roce_bw_65536)" ">=" 1
row "iWARP 64 KiB WRITE, 8 QPs / 1 QP" Gbit/s "$(m iw_bw_q8)" "$(m iw_bw_65536)" ">=" 1
row "RoCEv2 SEND p50, $idle idle QPs open / none" us "$(m roce_idle_p50)" "$(m roce_p50)" "<=" 1.1
row "iWARP SEND p50, $idle idle QPs open / none" us "$(m iw_idle_p50)" "$(m iw_p50)" "<=" 1.1
echo "targets: $pass ok, $miss missed, $na not measured (callgrind targets: bench/callgrind.sh)"
