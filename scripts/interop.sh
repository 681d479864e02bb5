#!/usr/bin/env bash
# softrdma against the Linux kernel's rxe (RoCEv2) and siw (iWARP): Debian's unmodified RDMA
# programs (ibverbs-utils, perftest, rdmacm-utils), each in both roles (kernel server with a
# softrdma client, softrdma server with a kernel client), over both transports, iWARP with and
# without siw's MPA CRC, at sizes that span several MTUs; then the flaky case of issue 10 in a
# loop (rping over iWARP against siw right after a neighbour-cache flush).
#
# Usage (as root, from anywhere): scripts/interop.sh [options]
#   --quick        one size per program, no loop (about 5 minutes)
#   --only RE      only the cases whose name matches the extended regex RE
#   --loop N       rping-after-neighbour-flush runs (default 50; 0: none)
#   --lab DIR      the lab (default: ../shared/lab next to this checkout, or $SOFTRDMA_LAB)
#   --keep-lab     leave the lab running at the end (default: stop it if this script started it)
#   --build DIR    softrdma's build directory (default: build; built, or brought up to date)
#   -h, --help     this text
# Needs the lab of ../shared/lab (two QEMU guests, Linux 6.1 rxe and siw; its image is built the
# first time, ~3 minutes). Prints one line per case, then the matrix (passed/total per
# transport and role) and the logs of the failures; exit status 0 only if every case passed.
# Logs: results/interop-<time>/. Not part of the CI suite (root, QEMU, minutes).
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; }

quick=0 only="" loops=50 keep=0 build="$here/build"
lab=${SOFTRDMA_LAB:-$here/../shared/lab}
while [ $# -gt 0 ]; do
	case "$1" in
	--quick) quick=1; loops=0 ;;
	--only) only=${2:?--only needs a regex}; shift ;;
	--loop) loops=${2:?--loop needs a count}; shift ;;
	--lab) lab=${2:?--lab needs a directory}; shift ;;
	--keep-lab) keep=1 ;;
	--build) build=${2:?--build needs a directory}; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "interop.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
	esac
	shift
done
case "$loops" in '' | *[!0-9]*) echo "interop.sh: --loop takes a count" >&2; exit 2 ;; esac
[ "$(id -u)" = 0 ] || { echo "interop.sh: run as root (the lab needs network namespaces and QEMU)" >&2; exit 2; }
[ -x "$lab/start-lab.sh" ] || { echo "interop.sh: no lab at $lab (--lab DIR)" >&2; exit 2; }
lab=$(cd "$lab" && pwd)
NS=rdmalab G="$lab/guest-run.sh"

# Built if missing, and brought up to date if not: a stale binary would test old code.
if [ ! -f "$build/CMakeCache.txt" ]; then
	echo "== building softrdma in $build"
	"$here/scripts/install-deps.sh" && cmake -S "$here" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null ||
		{ echo "interop.sh: cmake failed" >&2; exit 1; }
fi
cmake --build "$build" -j "$(nproc)" >/dev/null || { echo "interop.sh: the build in $build failed" >&2; exit 1; }
if [ ! -x "$build/softrdma" ]; then
	echo "interop.sh: no $build/softrdma after the build" >&2
	exit 1
fi
SR="$build/softrdma"

started=0
if ! ip netns list 2>/dev/null | grep -qw "$NS" || ! "$G" vm1 true >/dev/null 2>&1; then
	echo "== starting the lab (building its image the first time)"
	"$lab/build-image.sh" >/dev/null && "$lab/start-lab.sh" 1 || { echo "interop.sh: the lab did not start" >&2; exit 1; }
	started=1
fi
stop_lab() { [ $started = 1 ] && [ $keep = 0 ] && "$lab/stop-lab.sh" >/dev/null 2>&1; }

out="$here/results/interop-$(date +%Y%m%d-%H%M%S)"
mkdir -p "$out"
echo "== logs in $out"

# Addresses: kernel (vm1) and softrdma (the namespace) per transport.
K_roce=10.77.0.11 S_roce=10.77.0.1 K_iwarp=10.77.2.11 S_iwarp=10.77.2.1
pass=0 total=0 failed=()
declare -A cell_pass cell_total
spid=""
cleanup() {
	[ -n "$spid" ] && kill "$spid" 2>/dev/null
	"$G" vm1 'pkill -f "ibv_|ib_|rping|rdma_|ucmatose|udaddy" ; true' >/dev/null 2>&1
	stop_lab
}
trap 'cleanup; exit 130' INT TERM

# fill TEMPLATE DEV GID SELF PEER: the command with its placeholders replaced.
fill() {
	local t=$1
	t=${t//\{DEV\}/$2}; t=${t//\{GID\}/$3}; t=${t//\{SELF\}/$4}; t=${t//\{PEER\}/$5}
	printf '%s' "$t"
}

# The guest's server is up: its TCP port listens, or its rdma_cm id does.
guest_ready() { # READY
	for _ in $(seq 60); do
		case "$1" in
		tcp:*) "$G" vm1 "ss -ltn | grep -q ':${1#tcp:} '" 2>/dev/null && return 0 ;;
		cm) "$G" vm1 "rdma res show cm_id | grep -q LISTEN" 2>/dev/null && return 0 ;;
		esac
		sleep 0.2
	done
	return 1
}

# softrdma's server is up: its TCP port (perftest's exchange, iWARP's rdma_cm) listens in the
# namespace; RoCE rdma_cm listeners have no TCP port: a second.
ns_ready() { # READY
	case "$1" in
	tcp:*) for _ in $(seq 50); do ip netns exec $NS ss -ltn | grep -q ":${1#tcp:} " && return 0; sleep 0.1; done; return 1 ;;
	*) sleep 1 ;;
	esac
}

record() { # NAME CELL OK LOG
	total=$((total + 1))
	cell_total[$2]=$((${cell_total[$2]:-0} + 1))
	if [ "$3" = 1 ]; then
		pass=$((pass + 1)); cell_pass[$2]=$((${cell_pass[$2]:-0} + 1))
		printf 'PASS %s\n' "$1"
	else
		failed+=("$1|$4"); printf 'FAIL %s (log: %s)\n' "$1" "$4"
	fi
}

# One program, both roles. pair NAME TRANSPORT READY SERVER_TEMPLATE CLIENT_TEMPLATE
pair() {
	local name=$1 tr=$2 ready=$3 st=$4 ct=$5 crc=${CRC:-}
	# No --transport: rdma_cm follows the device the program opened, or asks the peer.
	local kdev sdev kgid sgid kip sip trflag=""
	if [ "$tr" = roce ]; then kdev=rxe0 sdev=roce_lab0 kgid=1 sgid=0 kip=$K_roce sip=$S_roce
	else kdev=siw0 sdev=iwarp_lab0 kgid=0 sgid=0 kip=$K_iwarp sip=$S_iwarp; fi
	local tag=$tr${crc:+-crc}
	local role
	for role in kserver sserver; do
		local full="$tag/$name/$role"
		[ -n "$only" ] && ! [[ "$full" =~ $only ]] && continue
		local log="$out/${full//\//_}.log" ok=0
		if [ $role = kserver ]; then
			local srv cli
			srv=$(fill "$st" $kdev $kgid $kip $sip) cli=$(fill "$ct" $sdev $sgid $sip $kip)
			{ echo "## kernel server (vm1): $srv"; echo "## softrdma client: $cli"; } >"$log"
			"$G" vm1 'pkill -f "ibv_|ib_|rping|rdma_|ucmatose|udaddy" ; true' >/dev/null 2>&1
			"$G" -b vm1 "timeout 90 $srv; echo __rc=\$?" >/dev/null 2>&1
			guest_ready "$ready" || echo "## the kernel server did not come up" >>"$log"
			timeout 90 ip netns exec $NS "$SR" run $trflag -- $cli >>"$log" 2>&1
			local crc_rc=$?
			local src=""
			for _ in $(seq 50); do
				src=$("$G" vm1 "grep -o '__rc=[0-9]*' /tmp/bg.log" 2>/dev/null) && [ -n "$src" ] && break
				sleep 0.3
			done
			{ echo "## softrdma client exit: $crc_rc"; echo "## kernel server log:"; "$G" vm1 'cat /tmp/bg.log' 2>&1; } >>"$log"
			[ $crc_rc = 0 ] && [ "$src" = "__rc=0" ] && ok=1
		else
			local srv cli
			srv=$(fill "$st" $sdev $sgid $sip $kip) cli=$(fill "$ct" $kdev $kgid $kip $sip)
			{ echo "## softrdma server: $srv"; echo "## kernel client (vm1): $cli"; } >"$log"
			timeout 90 ip netns exec $NS "$SR" run $trflag -- $srv >"$log.srv" 2>&1 &
			spid=$!
			ns_ready "$ready"
			timeout 90 "$G" vm1 "timeout 80 $cli" >>"$log" 2>&1
			local kc=$?
			local s_rc=124
			for _ in $(seq 100); do kill -0 $spid 2>/dev/null || break; sleep 0.2; done
			if kill -0 $spid 2>/dev/null; then kill $spid 2>/dev/null; fi
			wait $spid 2>/dev/null; s_rc=$?
			spid=""
			{ echo "## kernel client exit: $kc, softrdma server exit: $s_rc"; echo "## softrdma server log:"; cat "$log.srv"; } >>"$log"
			rm -f "$log.srv"
			[ $kc = 0 ] && [ $s_rc = 0 ] && ok=1
		fi
		record "$full" "$tag/$role" $ok "$log"
	done
}

big=1
[ $quick = 1 ] && big=0

roce_cases() {
	local T=roce
	# ibverbs-utils (TCP exchange on 18515, then RC / UC / UD / SRQ traffic)
	pair rc_pingpong_64 $T tcp:18515 'ibv_rc_pingpong -d {DEV} -g {GID} -n 20 -s 64' 'ibv_rc_pingpong -d {DEV} -g {GID} -n 20 -s 64 {PEER}'
	[ $big = 1 ] && pair rc_pingpong_8k $T tcp:18515 'ibv_rc_pingpong -d {DEV} -g {GID} -n 20 -s 8192' 'ibv_rc_pingpong -d {DEV} -g {GID} -n 20 -s 8192 {PEER}'
	pair uc_pingpong_4k $T tcp:18515 'ibv_uc_pingpong -d {DEV} -g {GID} -n 20 -s 4096' 'ibv_uc_pingpong -d {DEV} -g {GID} -n 20 -s 4096 {PEER}'
	pair ud_pingpong_1k $T tcp:18515 'ibv_ud_pingpong -d {DEV} -g {GID} -n 20 -s 1024' 'ibv_ud_pingpong -d {DEV} -g {GID} -n 20 -s 1024 {PEER}'
	pair srq_pingpong_8k $T tcp:18515 'ibv_srq_pingpong -d {DEV} -g {GID} -n 10 -s 8192' 'ibv_srq_pingpong -d {DEV} -g {GID} -n 10 -s 8192 {PEER}'
	# perftest, socket exchange
	local p
	for p in ib_send_lat ib_write_lat ib_read_lat; do
		pair ${p}_2 $T tcp:18515 "$p -d {DEV} -x {GID} -n 20 -s 2" "$p -d {DEV} -x {GID} -n 20 -s 2 {PEER}"
		[ $big = 1 ] && pair ${p}_4k $T tcp:18515 "$p -d {DEV} -x {GID} -n 20 -s 4096" "$p -d {DEV} -x {GID} -n 20 -s 4096 {PEER}"
	done
	pair ib_atomic_lat $T tcp:18515 'ib_atomic_lat -d {DEV} -x {GID} -n 20' 'ib_atomic_lat -d {DEV} -x {GID} -n 20 {PEER}'
	for p in ib_send_bw ib_write_bw ib_read_bw; do
		pair ${p}_64k $T tcp:18515 "$p -d {DEV} -x {GID} -n 100 -s 65536" "$p -d {DEV} -x {GID} -n 100 -s 65536 {PEER}"
	done
	pair ib_atomic_bw $T tcp:18515 'ib_atomic_bw -d {DEV} -x {GID} -n 100' 'ib_atomic_bw -d {DEV} -x {GID} -n 100 {PEER}'
	# A message rate: back-to-back posts, which softrdma sends together (core_posted).
	pair ib_send_bw_8 $T tcp:18515 'ib_send_bw -d {DEV} -x {GID} -n 20000 -s 8' 'ib_send_bw -d {DEV} -x {GID} -n 20000 -s 8 {PEER}'
	[ $big = 1 ] && pair ib_send_bw_ud_1k $T tcp:18515 'ib_send_bw -c UD -d {DEV} -x {GID} -n 100 -s 1024' 'ib_send_bw -c UD -d {DEV} -x {GID} -n 100 -s 1024 {PEER}'
	[ $big = 1 ] && pair ib_write_bw_uc_8k $T tcp:18515 'ib_write_bw -c UC -d {DEV} -x {GID} -n 100 -s 8192' 'ib_write_bw -c UC -d {DEV} -x {GID} -n 100 -s 8192 {PEER}'
	# perftest over rdma_cm (the IB CM's MADs on QP1)
	for p in ib_send_lat ib_write_lat ib_read_lat ib_atomic_lat; do
		pair ${p}_R $T cm "$p -d {DEV} -R -n 20" "$p -d {DEV} -R -n 20 {PEER}"
	done
	for p in ib_send_bw ib_write_bw ib_read_bw; do
		pair ${p}_R_64k $T cm "$p -d {DEV} -R -n 100 -s 65536" "$p -d {DEV} -R -n 100 -s 65536 {PEER}"
	done
	rdmacm_cases $T
}

iwarp_cases() {
	local T=iwarp p
	for p in ib_send_lat ib_write_lat ib_read_lat; do
		pair ${p}_R_2 $T cm "$p -d {DEV} -R -n 20 -s 2" "$p -d {DEV} -R -n 20 -s 2 {PEER}"
		[ $big = 1 ] && pair ${p}_R_8k $T cm "$p -d {DEV} -R -n 20 -s 8192" "$p -d {DEV} -R -n 20 -s 8192 {PEER}"
	done
	for p in ib_send_bw ib_write_bw ib_read_bw; do
		pair ${p}_R_64k $T cm "$p -d {DEV} -R -n 100 -s 65536" "$p -d {DEV} -R -n 100 -s 65536 {PEER}"
	done
	rdmacm_cases $T
}

rdmacm_cases() { # TRANSPORT
	local T=$1
	pair rping_64 $T cm 'rping -s -a {SELF} -C 10 -S 64' 'rping -c -a {PEER} -C 10 -S 64'
	[ $big = 1 ] && pair rping_8k $T cm 'rping -s -a {SELF} -C 10 -S 8192' 'rping -c -a {PEER} -C 10 -S 8192'
	pair rdma_server_client $T cm 'rdma_server' 'rdma_client -s {PEER}'
	pair rdma_xserver_client_rc $T cm 'rdma_xserver -c r' 'rdma_xclient -c r -s {PEER}'
}

echo "== RoCEv2 against rxe"
roce_cases
echo "== iWARP against siw (MPA CRC off)"
"$G" vm1 'lab-siw-crc off' >/dev/null 2>&1
CRC="" iwarp_cases
echo "== iWARP against siw (MPA CRC on)"
"$G" vm1 'lab-siw-crc on' >/dev/null 2>&1
CRC=1 iwarp_cases
"$G" vm1 'lab-siw-crc off' >/dev/null 2>&1

if [ "$loops" -gt 0 ] && { [ -z "$only" ] || [[ "loop/rping" =~ $only ]]; }; then
	echo "== rping over iWARP, softrdma client, right after a neighbour flush: $loops runs"
	ok=0 log="$out/loop_rping_iwarp.log"
	: >"$log"
	for i in $(seq "$loops"); do
		"$G" vm1 'pkill rping; true' >/dev/null 2>&1
		ip netns exec $NS ip neigh flush all
		"$G" -b vm1 "timeout 40 rping -s -a $K_iwarp -C 3 -v; echo __rc=\$?" >/dev/null 2>&1
		guest_ready cm
		if timeout 30 ip netns exec $NS "$SR" run -- rping -c -a $K_iwarp -C 3 -v >>"$log" 2>&1; then
			ok=$((ok + 1))
		else
			echo "## run $i failed" >>"$log"
		fi
		[ -t 1 ] && printf '\r   %d of %d runs passed' $ok $i
	done
	[ -t 1 ] && echo
	record "iwarp/loop/rping_after_neigh_flush ($ok/$loops)" "iwarp/loop" $([ $ok = "$loops" ] && echo 1 || echo 0) "$log"
fi

cleanup
trap - INT TERM
echo
echo "== matrix (passed/total)"
printf '%-12s %-22s %-22s\n' transport "kernel server" "softrdma server"
for t in roce iwarp iwarp-crc; do
	printf '%-12s %-22s %-22s\n' $t "${cell_pass[$t/kserver]:-0}/${cell_total[$t/kserver]:-0}" \
		"${cell_pass[$t/sserver]:-0}/${cell_total[$t/sserver]:-0}"
done
for f in "${failed[@]}"; do
	echo
	echo "---- FAIL ${f%%|*}: last lines of ${f#*|}"
	tail -n 25 "${f#*|}"
done
echo
echo "$pass/$total passed"
[ "$pass" = "$total" ]
