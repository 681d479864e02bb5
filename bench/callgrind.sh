#!/usr/bin/env bash
# Instructions per message under valgrind --tool=callgrind: a cost figure that does not drift
# with the machine's load (unlike times). For RoCEv2 (roce_lo), iWARP (iwarp_lo) and the
# raw-socket floors (softrdma compare --floor udp-*/tcp-*), on 127.0.0.1:
#   - 100 B SEND round trips (softrdma lat; floors: UDP / TCP ping-pong)
#   - 64 KiB RDMA WRITEs (softrdma bw -V write; floors: UDP datagrams, a TCP stream)
# The round trips' client and server are sr_perf (bench/sr_perf.c: perftest's loop, nothing
# else per message), so that the count is softrdma's and not a tool's: `softrdma lat` also
# checks and clears each message's ends (about 1,100 instructions per round trip of its own,
# bench/README.md 2026-12-07).
# One side runs under callgrind (whole process, all threads), the other natively, each test
# twice, with N1 and N2 messages: instructions/msg = (Ir(N2) - Ir(N1)) / (N2 - N1), which
# cancels start-up and connection set-up. Client side always; server side in a second pair.
# Usage: bench/callgrind.sh [--build DIR] [--quick] [--repeat R] [--no-server]  (needs valgrind)
#   --build DIR   softrdma build directory (default: build; configured and built if missing)
#   --quick       N1/N2 = 500/1000 round trips, 250/500 64 KiB writes (default 2000/4000, 1000/2000)
#   --repeat R    runs per count, the least Ir kept (default 3; --quick: 2)
#   --no-server   only the client side (half the runs)
set -euo pipefail
cd "$(dirname "$0")/.."
build=build
quick=0
server_side=1
repeat=3
repeat_set=0
while [ $# -gt 0 ]; do
	case "$1" in
	--build) [ $# -ge 2 ] || { echo "callgrind.sh: --build needs a directory" >&2; exit 2; }
		build=$2; shift 2 ;;
	--quick) quick=1; shift ;;
	--no-server) server_side=0; shift ;;
	--repeat) [ "${2:-}" -ge 1 ] 2>/dev/null || { echo "callgrind.sh: --repeat needs a count >= 1" >&2; exit 2; }
		repeat=$2; repeat_set=1; shift 2 ;;
	-h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "callgrind.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
	esac
done
if ! command -v valgrind >/dev/null; then
	echo "callgrind.sh: valgrind not found; install it: apt-get install valgrind" \
		"(scripts/install-deps.sh does)" >&2
	exit 1
fi
if [ ! -x "$build/softrdma" ] || [ ! -x "$build/sr_perf" ]; then
	echo "callgrind.sh: building softrdma and sr_perf in $build" >&2
	[ -f "$build/CMakeCache.txt" ] || cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build "$build" -j "$(nproc)" --target softrdma_cli sr_perf >/dev/null
fi
sr=$(cd "$build" && pwd)/softrdma
srp=$(cd "$build" && pwd)/sr_perf
if [ $quick = 1 ]; then
	[ "$repeat_set" = 1 ] || repeat=2
	lat_n1=500 lat_n2=1000 bw_n1=250 bw_n2=500
else
	lat_n1=2000 lat_n2=4000 bw_n1=1000 bw_n2=2000
fi
T=$(mktemp -d)
pids=()
cleanup() {
	local p
	for p in "${pids[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null; done
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# iWARP's auto-connect rendezvous port and the tests' ports: random, on loopback.
export SOFTRDMA_IW_PORT=$((31000 + RANDOM % 10000))
# RoCE's UDP port too: other softrdma processes on the host (tests) share 4791 otherwise.
export SOFTRDMA_UDP_PORT=$((41000 + RANDOM % 10000))
port=$((21000 + RANDOM % 10000))
VG=(valgrind --tool=callgrind --callgrind-out-file="$T/cg.out.%p")
# Both sides busy-poll, so instructions spent waiting for the peer count. The native peer is
# ~50x faster than the side under callgrind and answers before that side polls again, unless
# it is descheduled: it gets its own vCPU and a high priority (root; otherwise nice only
# warns), the side under callgrind the other vCPU.
if [ "$(nproc)" -ge 2 ]; then
	PEER=(nice -n -19 taskset -c 1) CG=(taskset -c 0)
else
	PEER=(nice -n -19) CG=()
fi
limit=300 # seconds, any one process (the one under callgrind is ~50x slower than natively)

# args TEST: the command line of TEST's server, without -n/-p ('sr_perf' first, or after
# 'softrdma'); the client adds its own (cli_args).
args() {
	case "$1" in
	roce-lat) echo "sr_perf -d roce_lo" ;;
	iw-lat) echo "sr_perf -d iwarp_lo" ;;
	udp-lat) echo "compare --floor udp-lat --server -s 100" ;;
	tcp-lat) echo "compare --floor tcp-lat --server -s 100" ;;
	roce-bw) echo "bw -d roce_lo -V write -s 65536" ;;
	iw-bw) echo "bw -d iwarp_lo -V write -s 65536" ;;
	udp-bw) echo "compare --floor udp-bw --server -s 65536" ;;
	tcp-bw) echo "compare --floor tcp-bw --server -s 65536" ;;
	esac
}

# ir TEST SIDE N: runs TEST with N messages, SIDE (client|server) under callgrind, the other
# side natively; sets IR to the callgrind process's total Ir (returns 1 on failure).
ir() {
	local t=$1 side=$2 n=$3 a srv=() cli=() sp cp rc=0 f
	set -- $(args "$t")
	if [ "$1" = sr_perf ]; then
		shift
		srv=("$srp" "$@" -p "$port")
		cli=("$srp" "$@" -p "$port" -t lat -s 100 -n "$n" 127.0.0.1)
	else
		srv=("$sr") cli=("$sr")
		for a in "$@" -n "$n" -p "$port" --timeout 60; do
			srv+=("$a")
			[ "$a" = --server ] || cli+=("$a")
		done
		cli+=(127.0.0.1)
	fi
	local lport=$port
	port=$((port + 1))
	rm -f "$T"/cg.out.*
	if [ "$side" = server ]; then
		timeout $limit "${CG[@]}" "${VG[@]}" "${srv[@]}" > "$T/server.log" 2>&1 &
	else
		"${PEER[@]}" timeout $limit "${srv[@]}" > "$T/server.log" 2>&1 &
	fi
	sp=$!; pids+=("$sp")
	# Start the client once the server listens (says so, or its TCP port does): a server
	# under callgrind busy-polls while it waits, and the floors' UDP client only resends
	# after 1 s.
	for _ in $(seq 600); do
		grep -qi "waiting for" "$T/server.log" 2>/dev/null ||
			[ -n "$(ss -Hltn "sport = :$lport" 2>/dev/null)" ] ||
			! kill -0 "$sp" 2>/dev/null && break
		sleep 0.1
	done
	if [ "$side" = server ]; then
		"${PEER[@]}" timeout $limit "${cli[@]}" > "$T/client.log" 2>&1 &
	else
		timeout $limit "${CG[@]}" "${VG[@]}" "${cli[@]}" > "$T/client.log" 2>&1 &
	fi
	cp=$!; pids+=("$cp")
	wait "$cp" || rc=$?
	wait "$sp" || { [ $rc -ne 0 ] || rc=$?; }
	pids=()
	if [ $rc -ne 0 ]; then
		echo "callgrind.sh: $t ($side under callgrind, n=$n) failed (exit $rc):" >&2
		tail -n 5 "$T/client.log" "$T/server.log" | sed 's/^/    /' >&2
		return 1
	fi
	# One out file (callgrind counts all threads together); its "totals:" line is Ir. Less
	# the latency tools' statistics (a sort of the N samples, n log n, not per message:
	# stats_finalize, or sr_perf's qsort where there is none), from callgrind_annotate's
	# inclusive cost.
	f=$(ls "$T"/cg.out.* 2>/dev/null | head -n 1)
	IR=$( [ -n "$f" ] && sed -n 's/^totals: *\([0-9]*\).*/\1/p' "$f" | head -n 1)
	[ -n "$IR" ] || { echo "callgrind.sh: $t: no callgrind totals" >&2; return 1; }
	STATS=$(callgrind_annotate --inclusive=yes "$f" 2>/dev/null |
		awk '/:stats_finalize \[/ {gsub(",", "", $1); s += $1}
		     /msort.c:qsort \[/ {gsub(",", "", $1); q += $1}
		     END {print (s ? s : q) + 0}')
	IR=$((IR - STATS))
}

# ir_min TEST SIDE N: the least IR of $repeat runs. Waiting for the peer only ever adds
# instructions (busy-polling), so the least count is the one closest to the work itself.
ir_min() {
	local r best=
	for r in $(seq "$repeat"); do
		ir "$@" || return 1
		if [ -z "$best" ] || [ "$IR" -lt "$best" ]; then best=$IR; fi
	done
	IR=$best
}

# per_msg TEST SIDE: sets PER to the instructions per message from two runs, or "fail".
per_msg() {
	local t=$1 side=$2 n1 n2 a b
	case "$t" in *-lat) n1=$lat_n1 n2=$lat_n2 ;; *) n1=$bw_n1 n2=$bw_n2 ;; esac
	step=$((step + 1))
	echo "[$step/$steps] $(date +%T) $t, $side under callgrind: n=$n1, n=$n2, $repeat runs each" >&2
	PER=fail
	if ir_min "$t" "$side" "$n1"; then
		a=$IR
		if ir_min "$t" "$side" "$n2"; then
			b=$IR
			raw+=("$(printf "%-9s %-7s Ir(%d) = %11d   Ir(%d) = %11d   (stats: %d)" "$t" "$side" "$n1" "$a" "$n2" "$b" "$STATS")")
			# sr_perf makes n/10 unmeasured warm-up round trips before its n.
			local m1=$n1 m2=$n2
			if [ "$(args "$t" | cut -d' ' -f1)" = sr_perf ]; then
				m1=$((n1 + n1 / 10)) m2=$((n2 + n2 / 10))
			fi
			PER=$(awk -v a="$a" -v b="$b" -v n1="$m1" -v n2="$m2" 'BEGIN{printf "%.0f", (b - a) / (n2 - n1)}')
			return 0
		fi
	fi
	failed=1
}

tests=(roce-lat iw-lat udp-lat tcp-lat roce-bw iw-bw udp-bw tcp-bw)
step=0 steps=$(( ${#tests[@]} + server_side * (${#tests[@]} - 1) )) failed=0
declare -A C S
start=$(date +%s)
raw=()
for t in "${tests[@]}"; do per_msg "$t" client; C[$t]=$PER; S[$t]=-; done
if [ $server_side = 1 ]; then
	for t in "${tests[@]}"; do
		# A UDP receiver under callgrind falls far behind the native sender and the kernel
		# drops most datagrams: what it counts is not per message sent.
		if [ "$t" = udp-bw ]; then S[$t]="n/a"; continue; fi
		per_msg "$t" server; S[$t]=$PER
	done
fi

ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (a+0 > 0 && b+0 > 0) printf "%.2f", a/b; else print "-" }'; }
row() { printf "| %-22s | %12s | %12s | %-22s |\n" "$1" "${C[$2]}" "${S[$2]}" "$3"; }
echo
echo "Instructions per message (callgrind Ir, (Ir(N2) - Ir(N1)) / (N2 - N1); round trips:" \
	"N = $lat_n1/$lat_n2 (softrdma's: sr_perf, which adds N/10 of warm-up, counted), 64 KiB" \
	"writes: N = $bw_n1/$bw_n2; least of $repeat runs; $(($(date +%s) - start)) s)"
echo
printf "| %-22s | %12s | %12s | %-22s |\n" test "client Ir/msg" "server Ir/msg" "ratio to the floor (client)"
echo "|------------------------|-------------:|-------------:|------------------------|"
row "RoCEv2 SEND 100 B rtt" roce-lat "$(ratio "${C[roce-lat]}" "${C[udp-lat]}") x UDP"
row "iWARP SEND 100 B rtt" iw-lat "$(ratio "${C[iw-lat]}" "${C[tcp-lat]}") x TCP"
row "UDP 100 B rtt" udp-lat "1"
row "TCP 100 B rtt" tcp-lat "1"
row "RoCEv2 WRITE 64 KiB" roce-bw "$(ratio "${C[roce-bw]}" "${C[udp-bw]}") x UDP"
row "iWARP WRITE 64 KiB" iw-bw "$(ratio "${C[iw-bw]}" "${C[tcp-bw]}") x TCP"
row "UDP 64 KiB" udp-bw "1"
row "TCP 64 KiB" tcp-bw "1"
echo
echo "Raw counts (without the statistics; in brackets what they took at N2):"
printf '  %s\n' "${raw[@]}"
echo
cat <<'EOF_NOTE'
Ir counts user-space instructions only, not the kernel's (system calls, the loopback path):
the 64 KiB floors hand whole messages to the kernel, which copies them, so their Ir/msg is
near zero and the WRITE ratios say what softrdma does in user space (ICRC, segmentation),
not how much more CPU it costs in all. Busy-polling counts too: see bench/README.md.
EOF_NOTE
exit $failed
