#!/usr/bin/env bash
# softrdma switch (src/tools/switch_net.c, switch_model.c) with real traffic: three hosts in
# network namespaces, two of them writing to the third through a 200 Mbit/s port (a 2:1
# incast), so that a queue really forms. Each case runs `softrdma bw` (RC SEND, 64 KiB, 2 s, every
# message checked) from hosts 1 and 2 to host 0 and reads the switch's totals and the
# library's counters (SOFTRDMA_STATS=1):
#   drop-tail  a 64 KiB buffer: the switch drops, go-back-N resends, every byte arrives;
#   PFC        the switch pauses the senders instead: no drop anywhere, no resend;
#   ECN        SOFTRDMA_ECN=1 and RED marking: the switch marks, host 0 answers with CNPs,
#              the senders' QPs cut their rate (DCQCN).
# Needs root and /dev/net/tun (exit 77 otherwise). Usage: test_switch.sh BUILD_DIR
set -u
build=${1:?build directory}
sr=$build/softrdma
[ -x "$sr" ] || { echo "FAIL: $sr not built"; exit 1; }
if [ "$(id -u)" != 0 ] || [ ! -c /dev/net/tun ] || ! command -v ip >/dev/null; then
	echo "skip: needs root, /dev/net/tun and ip"
	exit 77
fi
tmp=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null; done; wait; [ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
export SOFTRDMA_STATS=1
# Go-back-N, whose counters the checks read (selective repeat keeps what follows a gap:
# test_scenario.sh's loss part covers it).
export SOFTRDMA_SR=0
fail=0
bad() { echo "FAIL: $*"; fail=1; }

# Bad usage is refused with a reason, before anything is made.
for args in "--hosts 1" "--hosts 17" "--rate fast" "--pfc --xon 100K --xoff 50K" "--loss 2" \
	"--kmin 10K --kmax 5K" "--buffer 1K" "--pfc-prio 8" "extra"; do
	# shellcheck disable=SC2086
	"$sr" switch $args >"$tmp/usage.out" 2>&1
	rc=$?
	[ $rc -eq 2 ] && grep -q "softrdma switch:" "$tmp/usage.out" ||
		bad "'switch $args' exited $rc: $(head -c 200 "$tmp/usage.out")"
done
"$sr" switch --help | grep -q -- "--pfc" || bad "switch --help does not list --pfc"

# field FILE PORT COLUMN: a column of the switch's totals for PORT.
field() {
	awk -v p="$2" -v c="$3" '/^totals after/ {t = 1; next}
		t && $1 == "port" {for (i = 1; i <= NF; i++) h[$i] = i; next}
		t && $1 == p {print $h[c]; exit}' "$1"
}
# count FILE NAME: the sum of NAME=N over the context lines of FILE.
count() {
	grep "context:" "$1" | grep -o "\b$2=[0-9]*" | cut -d= -f2 | awk '{s += $1} END {print s + 0}'
}
# qpcount FILE NAME: the sum of NAME=N over the QP lines of FILE.
qpcount() {
	grep "QP 0x" "$1" | grep -o "\b$2=[0-9]*" | cut -d= -f2 | awk '{s += $1} END {print s + 0}'
}

# incast LABEL "SWITCH OPTIONS" [ENV...]: the switch, two bw servers on host 0 and a client
# on each of hosts 1 and 2; the switch's output in $tmp/LABEL.sw, the clients' and servers'
# in $tmp/LABEL.cli1 .cli2 .srv1 .srv2. Returns 1 if a transfer failed.
incast() {
	local label=$1 opts=$2
	shift 2
	# shellcheck disable=SC2086
	timeout 120 "$sr" switch -n 3 --rate 200M -i 0 $opts >"$tmp/$label.sw" 2>&1 &
	local sw=$!
	pids+=("$sw")
	for _ in $(seq 100); do
		grep -q "running" "$tmp/$label.sw" && break
		sleep 0.1
	done
	grep -q "running" "$tmp/$label.sw" || { bad "$label: the switch did not start: $(head -c 300 "$tmp/$label.sw")"; return 1; }
	local ns=() ifs=() addr=()
	read -r -a ns <<<"$(grep -o "ip netns exec [^ ]*" "$tmp/$label.sw" | awk '{print $4}' | tr '\n' ' ')"
	read -r -a ifs <<<"$(grep -o "device [^;]*" "$tmp/$label.sw" | awk '{print $2}' | tr '\n' ' ')"
	read -r -a addr <<<"$(grep -o "(10\.213\.[0-9.]*" "$tmp/$label.sw" | tr -d '(' | tr '\n' ' ')"
	local base=$((20000 + RANDOM % 10000)) i s=() c=() rc=0
	for i in 1 2; do
		env "$@" timeout 60 ip netns exec "${ns[0]}" "$sr" bw -d "roce_${ifs[0]}" -p $((base + i)) \
			-D 2 >"$tmp/$label.srv$i" 2>&1 &
		s[i]=$!
		pids+=("${s[i]}")
	done
	sleep 0.5
	for i in 1 2; do
		env "$@" timeout 60 ip netns exec "${ns[i]}" "$sr" bw -d "roce_${ifs[i]}" -p $((base + i)) \
			-D 2 "${addr[0]}" >"$tmp/$label.cli$i" 2>&1 &
		c[i]=$!
		pids+=("${c[i]}")
	done
	for i in 1 2; do
		wait "${c[i]}" || { rc=1; bad "$label: client $i failed: $(tail -n 2 "$tmp/$label.cli$i")"; }
		wait "${s[i]}" || { rc=1; bad "$label: server $i failed: $(tail -n 2 "$tmp/$label.srv$i")"; }
	done
	# Datagrams host 0's kernel dropped for want of socket buffer (Udp RcvbufErrors of its
	# namespace): a loss past the switch's port, which the switch's PFC does not cover.
	ip netns exec "${ns[0]}" awk '/^Udp:/ && !h {for (i = 1; i <= NF; i++) n[$i] = i; h = 1; next}
		/^Udp:/ {print $n["RcvbufErrors"]}' /proc/net/snmp >"$tmp/$label.rcvbuf" 2>/dev/null
	kill -TERM "$sw"
	wait "$sw"
	grep -q "^totals after" "$tmp/$label.sw" || { bad "$label: no totals from the switch"; return 1; }
	return $rc
}

# Drop-tail: 64 KiB of buffer cannot absorb two senders' windows.
if incast tail "--buffer 64K"; then
	drops=$(($(field "$tmp/tail.sw" 1 tail) + $(field "$tmp/tail.sw" 2 tail)))
	rexmit=$(($(qpcount "$tmp/tail.cli1" retransmits) + $(qpcount "$tmp/tail.cli2" retransmits)))
	[ "$drops" -gt 0 ] || bad "drop-tail: the switch dropped nothing"
	[ "$rexmit" -ge "$drops" ] || bad "drop-tail: $drops drops but only $rexmit packets resent"
	gaps=$(($(qpcount "$tmp/tail.srv1" seq_naks_sent) + $(qpcount "$tmp/tail.srv2" seq_naks_sent) +
		$(qpcount "$tmp/tail.srv1" drop_psn_gap) + $(qpcount "$tmp/tail.srv2" drop_psn_gap)))
	[ "$gaps" -gt 0 ] || bad "drop-tail: host 0 saw no PSN gap"
	echo "ok   drop-tail: $drops packets dropped at the congested port, $rexmit resent, every message arrived"
fi

# PFC: the same incast, lossless. Both senders get paused; nothing is dropped, at the switch
# or in a host's queue, so the receivers never see a PSN gap. (A sender may still time out
# and resend its window while it is paused behind a deep queue on this busy machine: PFC
# trades loss for delay. Such packets arrive twice, none is missing.)
if incast pfc "--pfc --buffer 512K"; then
	for h in 1 2; do
		for k in tail host-queue loss; do
			v=$(field "$tmp/pfc.sw" $h $k)
			[ "$v" = 0 ] || bad "PFC: host $h: $k=$v"
		done
		p=$(field "$tmp/pfc.sw" $h pauses)
		[ "${p:-0}" -gt 0 ] || bad "PFC: host $h was never paused"
		gaps=$(($(qpcount "$tmp/pfc.srv$h" seq_naks_sent) + $(qpcount "$tmp/pfc.srv$h" drop_psn_gap)))
		# Past the switch's ports PFC reaches nothing: a host's kernel may still drop, on a
		# busy machine, a datagram its socket has no room for (host 0's receive buffers) or
		# cannot queue (the sender's, softrdma never blocks: udp_tx_drop_*).
		hostloss=$(($(cat "$tmp/pfc.rcvbuf" 2>/dev/null || echo 0) +
			$(count "$tmp/pfc.cli$h" udp_tx_drop_again) + $(count "$tmp/pfc.cli$h" udp_tx_drop_nobufs)))
		if [ "$gaps" != 0 ] && [ "$hostloss" -gt 0 ]; then
			echo "note PFC: host 0 saw $gaps PSN gaps from host $h after $hostloss datagrams" \
				"were dropped by the hosts' sockets (not the switch)"
		elif [ "$gaps" != 0 ]; then
			bad "PFC: host 0 saw $gaps PSN gaps from host $h, with nothing dropped at the switch or by a host's socket"
		fi
		r=$(qpcount "$tmp/pfc.cli$h" retransmits)
		dup=$(qpcount "$tmp/pfc.srv$h" dup_requests)
		# Resent packets whose first copy is still queued arrive twice, or after the
		# receiver has closed: never more duplicates than resends.
		[ "$dup" -le "$r" ] || bad "PFC: host $h resent $r packets, host 0 received $dup twice"
		echo "ok   PFC: host $h paused $p times ($(field "$tmp/pfc.sw" $h "paused[ms]") ms), nothing dropped, no gap ($r packets resent after timeouts, $dup arrived twice)"
	done
fi

# ECN: RED marks the queue's packets, host 0 answers with CNPs, the senders slow down.
if incast ecn "--ecn" SOFTRDMA_ECN=1; then
	marked=$(field "$tmp/ecn.sw" 0 marked)
	ect=$(field "$tmp/ecn.sw" 0 ect)
	[ "${marked:-0}" -gt 0 ] || bad "ECN: nothing marked"
	[ "${ect:-0}" -gt 0 ] || bad "ECN: no ECN-capable packets reached host 0"
	cnps=$(($(count "$tmp/ecn.srv1" cnp_tx) + $(count "$tmp/ecn.srv2" cnp_tx)))
	[ "$cnps" -gt 0 ] && [ "$cnps" -le "$marked" ] || bad "ECN: host 0 sent $cnps CNPs for $marked marks"
	for h in 1 2; do
		cuts=$(qpcount "$tmp/ecn.cli$h" cc_cuts)
		took=$(qpcount "$tmp/ecn.cli$h" cc_cnps)
		[ "$cuts" -gt 0 ] && [ "$took" -gt 0 ] || bad "ECN: host $h took $took CNPs and cut its rate $cuts times"
		echo "ok   ECN: host $h took $took CNPs, cut its rate $cuts times"
	done
	echo "ok   ECN: $marked of $ect ECN-capable packets marked, $cnps CNPs sent"
fi
exit $fail
