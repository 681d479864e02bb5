#!/usr/bin/env bash
# Measures softrdma's RC figures over RoCEv2 and iWARP and this machine's raw-socket floors in
# the same run, and prints them side by side as ratios (the machines are noisy: only same-run
# ratios count).
#   - 100-byte SEND round trip (p50, p99): RoCEv2 vs raw UDP ping-pong, iWARP vs raw TCP
#     ping-pong (busy-poll both ends)
#   - 64 KiB RDMA WRITE bandwidth: RoCEv2 vs raw UDP sends of 1472-byte and of 4140-byte
#     datagrams (softrdma's own datagram size on lo, path MTU 4096); iWARP vs a raw TCP
#     stream of 64 KiB writes
# Usage: bench/run.sh [--rounds N]        (needs ../shared/bench for the floors)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=3
while [ $# -gt 0 ]; do
	case "$1" in
	--rounds) rounds=$2; shift 2 ;;
	-h|--help) sed -n '2,10p' "$0" | sed 's/^# //'; exit 0 ;;
	*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
	esac
done
shared=../shared/bench
[ -f "$shared/pingpong.c" ] || { echo "run.sh: $shared (the machine's floor programs) not found" >&2; exit 1; }
scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" >/dev/null
T=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null; done; rm -rf "$T"; true' EXIT
gcc -O2 -o "$T/pp" "$shared/pingpong.c" -lm
gcc -O2 -o "$T/udp_bw" "$shared/udp_bw.c"
gcc -O2 -o "$T/tcp_stream" "$shared/tcp_stream.c"
# iWARP's auto-connect rendezvous port: a free one of our own.
export SOFTRDMA_IW_PORT=$((31000 + RANDOM % 10000))
field() { tr ' ' '\n' | sed -n "s/^$1=//p"; }
median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else printf "%.3f\n", (a[NR/2]+a[NR/2+1])/2}'; }
port=$((21000 + RANDOM % 10000))
for r in $(seq "$rounds"); do
	echo "round $r/$rounds" >&2
	"$T/pp" -s -b 127.0.0.1 -p $port -P udp -M busy -C 0 & pids+=($!); sleep 0.2
	timeout 60 "$T/pp" -c 127.0.0.1 -p $port -P udp -M busy -m 100 -n 20000 -w 2000 -C 1 > "$T/udp"
	wait "${pids[-1]}" || true
	echo "$(field p50 < "$T/udp") $(field p99 < "$T/udp")" >> "$T/udp_lat"
	port=$((port + 1))
	taskset -c 0 build/sr_perf -t lat -p $port -n 20000 > /dev/null & pids+=($!); sleep 0.2
	timeout 120 taskset -c 1 build/sr_perf -t lat -p $port -n 20000 127.0.0.1 > "$T/sr"
	wait "${pids[-1]}" || true
	echo "$(field p50 < "$T/sr") $(field p99 < "$T/sr")" >> "$T/sr_lat"
	port=$((port + 1))
	# UDP floors: 1472-byte datagrams (Ethernet MTU) and datagrams as large as softrdma's
	# on lo (path MTU 4096 + 44 bytes of transport headers and ICRC).
	for m in 1472 4140; do
		"$T/udp_bw" -r -b 127.0.0.1 -p $port -C 0 > "$T/ubr" & pids+=($!); sleep 0.2
		timeout 30 "$T/udp_bw" -c 127.0.0.1 -p $port -m $m -t 2 -C 1 > /dev/null
		wait "${pids[-1]}" || true
		field gbps < "$T/ubr" >> "$T/udp_bw_$m.txt"
		port=$((port + 1))
	done
	taskset -c 0 build/sr_perf -t bw -p $port -n 20000 > /dev/null & pids+=($!); sleep 0.2
	timeout 120 taskset -c 1 build/sr_perf -t bw -p $port -n 20000 127.0.0.1 > "$T/srb"
	wait "${pids[-1]}" || true
	field gbps < "$T/srb" >> "$T/sr_bw"
	port=$((port + 1))
	# iWARP against raw TCP.
	"$T/pp" -s -b 127.0.0.1 -p $port -P tcp -M busy -C 0 & pids+=($!); sleep 0.2
	timeout 60 "$T/pp" -c 127.0.0.1 -p $port -P tcp -M busy -m 100 -n 20000 -w 2000 -C 1 > "$T/tcp"
	wait "${pids[-1]}" || true
	echo "$(field p50 < "$T/tcp") $(field p99 < "$T/tcp")" >> "$T/tcp_lat"
	port=$((port + 1))
	taskset -c 0 build/sr_perf -t lat -d iwarp_lo -p $port -n 20000 > /dev/null & pids+=($!); sleep 0.2
	timeout 120 taskset -c 1 build/sr_perf -t lat -d iwarp_lo -p $port -n 20000 127.0.0.1 > "$T/iw"
	wait "${pids[-1]}" || true
	echo "$(field p50 < "$T/iw") $(field p99 < "$T/iw")" >> "$T/iw_lat"
	port=$((port + 1))
	"$T/tcp_stream" -r -b 127.0.0.1 -p $port -C 0 > "$T/tsr" & pids+=($!); sleep 0.2
	timeout 30 "$T/tcp_stream" -c 127.0.0.1 -p $port -m 65536 -t 2 -C 1 > /dev/null
	wait "${pids[-1]}" || true
	field gbps < "$T/tsr" >> "$T/tcp_bw"
	port=$((port + 1))
	taskset -c 0 build/sr_perf -t bw -d iwarp_lo -p $port -n 20000 > /dev/null & pids+=($!); sleep 0.2
	timeout 120 taskset -c 1 build/sr_perf -t bw -d iwarp_lo -p $port -n 20000 127.0.0.1 > "$T/iwb"
	wait "${pids[-1]}" || true
	field gbps < "$T/iwb" >> "$T/iw_bw"
	port=$((port + 1))
done
u50=$(cut -d' ' -f1 "$T/udp_lat" | median); u99=$(cut -d' ' -f2 "$T/udp_lat" | median)
s50=$(cut -d' ' -f1 "$T/sr_lat" | median); s99=$(cut -d' ' -f2 "$T/sr_lat" | median)
t50=$(cut -d' ' -f1 "$T/tcp_lat" | median); t99=$(cut -d' ' -f2 "$T/tcp_lat" | median)
i50=$(cut -d' ' -f1 "$T/iw_lat" | median); i99=$(cut -d' ' -f2 "$T/iw_lat" | median)
tb=$(median < "$T/tcp_bw"); ib=$(median < "$T/iw_bw")
ub=$(median < "$T/udp_bw_1472.txt"); ub4=$(median < "$T/udp_bw_4140.txt"); sb=$(median < "$T/sr_bw")
printf "%-44s %10s %10s %8s\n" "figure (median of $rounds rounds)" softrdma floor ratio
printf "%-44s %10s %10s %8.2f\n" "100 B SEND round trip p50 [us] / UDP ping-pong" "$s50" "$u50" "$(awk -v a="$s50" -v b="$u50" 'BEGIN{print a/b}')"
printf "%-44s %10s %10s %8.2f\n" "100 B SEND round trip p99 [us] / UDP ping-pong" "$s99" "$u99" "$(awk -v a="$s99" -v b="$u99" 'BEGIN{print a/b}')"
printf "%-44s %10s %10s %8.2f\n" "64 KiB WRITE [Gbit/s] / UDP 1472 B sends" "$sb" "$ub" "$(awk -v a="$sb" -v b="$ub" 'BEGIN{print a/b}')"
printf "%-44s %10s %10s %8.2f\n" "64 KiB WRITE [Gbit/s] / UDP 4140 B sends" "$sb" "$ub4" "$(awk -v a="$sb" -v b="$ub4" 'BEGIN{print a/b}')"
row() { printf "%-50s %10s %10s %8.2f\n" "$1" "$2" "$3" "$(awk -v a="$2" -v b="$3" 'BEGIN{print a/b}')"; }
row "iWARP 100 B SEND round trip p50 [us] / TCP ping-pong" "$i50" "$t50"
row "iWARP 100 B SEND round trip p99 [us] / TCP ping-pong" "$i99" "$t99"
row "iWARP 64 KiB WRITE [Gbit/s] / TCP stream, 64 KiB writes" "$ib" "$tb"
