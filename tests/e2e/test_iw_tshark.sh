#!/usr/bin/env bash
# tshark decodes what softrdma sends as iWARP: capture the traffic generator (iw_traffic,
# tests/tools/iw_traffic.c) on lo twice, with MPA CRC32c on and off, then check for each run
# that tshark
#   - finds one TCP connection with one MPA Request and one Reply (revision 2, not rejected,
#     C flag set on both iff CRC is on);
#   - decodes every byte of both directions as MPA frames and FPDUs (nothing left as bare TCP);
#   - finds exactly the RDMAP messages the generator sends: Send x3 (100 B, SIZE, a 0-byte one
#     behind the Write), Send with SE, Send with Invalidate (with its STag), RDMA Write, Read
#     Request, Read Response; the large ones in several FPDUs; nothing else (no Terminate);
#   - flags nothing as malformed or as an error, and no iWARP warnings but the two it gives
#     every MPA v2 (RFC 6581) Request / Reply, siw's included;
#   - with CRC on, checks every FPDU's CRC32c as good (none bad); with CRC off, sees none.
# Needs tshark and the right to capture on lo (root); otherwise it says why and skips (77).
set -u
build=${1:?build directory}
gen=$build/iw_traffic
command -v tshark >/dev/null || { echo "SKIP: tshark not installed"; exit 77; }
[ -x "$gen" ] || { echo "FAIL: $gen not built"; exit 1; }
dir=$(mktemp -d)
cap=
cleanup() {
	if [ -n "$cap" ]; then kill "$cap" 2>/dev/null; wait "$cap" 2>/dev/null; fi
	rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP
port_on=$((20000 + RANDOM % 12000)) # below the ephemeral range: no client port collides
port_off=$((port_on + 1))
pcap=$dir/cap.pcapng
# -a: the capture stops by itself should this script be killed (ctest timeout).
tshark -i lo -a duration:120 -f "tcp port $port_on or tcp port $port_off" -w "$pcap" -q >"$dir/tshark.log" 2>&1 &
cap=$!
no_capture() { echo "SKIP: cannot capture on lo:"; cat "$dir/tshark.log"; exit 77; }
# tshark says "Capturing on" before dumpcap has opened the interface: it must also live on.
for _ in $(seq 50); do grep -q "Capturing on" "$dir/tshark.log" && break; sleep 0.1; done
sleep 0.3
grep -q "Capturing on" "$dir/tshark.log" && kill -0 "$cap" 2>/dev/null || no_capture
fail=0
# Exact message counts below: no nudges (zero-length Writes an MPA initiator sends in its
# first 512 ms; test_iw_nudge covers them).
export SOFTRDMA_IW_NUDGE=0
timeout 60 "$gen" -p "$port_on" -c on >"$dir/on.log" 2>&1 || { echo "FAIL: iw_traffic -c on:"; cat "$dir/on.log"; fail=1; }
timeout 60 "$gen" -p "$port_off" -c off >"$dir/off.log" 2>&1 || { echo "FAIL: iw_traffic -c off:"; cat "$dir/off.log"; fail=1; }
[ $fail -eq 0 ] || exit 1
sleep 1 # the last packets reach the file
kill -0 "$cap" 2>/dev/null || no_capture
kill -INT "$cap"; wait "$cap" 2>/dev/null; cap=
[ -s "$pcap" ] || no_capture

# iWARP is found by tshark's MPA heuristic (there is no "decode as" for it). The RPC-over-RDMA
# heuristic under iwarp_ddp_rdmap throws on a 0-byte Send ("Malformed Packet: RPCoRDMA"), a
# tshark 4.0 bug unrelated to iWARP, so it is disabled.
ts=(tshark -r "$pcap" --enable-heuristic iwarp_mpa_tcp --disable-protocol rpcordma
	-o tcp.desegment_tcp_streams:TRUE -o tcp.relative_sequence_numbers:TRUE)
# The RDMAP messages (last DDP segments) iw_traffic sends, per opcode (RFC 5040 4.2). Opcodes
# not listed must not appear at all.
expect="3:3 5:1 4:1 0:1 1:1 2:1"
multi="3 0 2" # the opcodes of the SIZE-byte transfers, in several FPDUs

check_run() { # port, crc (on|off)
	local port=$1 crc=$2 good bad errors warns
	echo "== CRC $crc (tcp port $port)"
	"${ts[@]}" -Y "tcp.port==$port" -T fields -E occurrence=a -e tcp.stream -e tcp.srcport \
		-e tcp.seq -e tcp.len -e iwarp_mpa.key.req -e iwarp_mpa.key.rep -e iwarp_mpa.crc_flag \
		-e iwarp_mpa.rev -e iwarp_mpa.rej_flag -e iwarp_mpa.pdlength -e iwarp_mpa.ulpdulength \
		-e iwarp_rdma.opcode -e iwarp_ddp.last_flag -e iwarp_mpa.crc_check \
		-e iwarp_rdma.inval_stag >"$dir/$crc.fields" 2>"$dir/$crc.err" ||
		{ echo "FAIL: tshark:"; cat "$dir/$crc.err"; return 1; }
	# The CRC check's verdict is only in the field's text (the value is the CRC sent).
	"${ts[@]}" -Y "tcp.port==$port" -V >"$dir/$crc.txt" 2>/dev/null
	good=$(grep -c "(Good CRC32)" "$dir/$crc.txt")
	bad=$(grep -c "Bad CRC32" "$dir/$crc.txt")
	errors=$("${ts[@]}" -Y "tcp.port==$port && (_ws.malformed || _ws.expert.severity >= 8388608)" 2>/dev/null)
	warns=$("${ts[@]}" -q -z "expert,warn,tcp.port==$port" 2>/dev/null | grep IWARP |
		grep -v -e "Res field is NOT set to zero" -e "Rev field is NOT set to one")
	local rc=0
	[ -z "$errors" ] || { echo "FAIL: tshark flags malformed packets / errors:"; echo "$errors" | head; rc=1; }
	[ -z "$warns" ] || { echo "FAIL: unexpected iWARP warnings:"; echo "$warns"; rc=1; }
	awk -F'\t' -v crc="$crc" -v good="$good" -v bad="$bad" -v expect="$expect" -v multi="$multi" '
	function hex(s,   v, i) { s = tolower(s); sub(/^0x/, "", s); v = 0
		for (i = 1; i <= length(s); i++) v = v * 16 + index("0123456789abcdef", substr(s, i, 1)) - 1
		return v }
	function bad_(msg) { print "FAIL: " msg; failed = 1 }
	BEGIN { split("RDMA Write,Read Request,Read Response,Send,Send with Invalidate,Send with SE,Send with SE and Invalidate,Terminate", name, ",") }
	{
		packets++; streams[$1] = 1
		# Relative sequence numbers: the data starts at 1 (a FIN takes one more number, so
		# only packets with data count).
		if ($4 > 0 && $3 + $4 > end[$2] + 0) end[$2] = $3 + $4
		if ($5 != "") { reqs++; reqc = $7; mpa_bytes += 20 + $10; if ($8 != 2 || $9 != 0) bad_("MPA Request rev " $8 " rej " $9) }
		if ($6 != "") { reps++; repc = $7; mpa_bytes += 20 + $10; if ($8 != 2 || $9 != 0) bad_("MPA Reply rev " $8 " rej " $9) }
		if ($11 == "") next
		n = split($11, len, ","); split($12, op, ","); split($13, last, ",")
		ncrc += ($14 == "") ? 0 : split($14, junk, ",")
		if ($15 != "" && hex($15) == 0) bad_("Send with Invalidate without an STag")
		inval += ($15 == "") ? 0 : 1
		for (i = 1; i <= n; i++) {
			fpdus++; o = hex(op[i]); f[o]++; m[o] += last[i] == "1"
			# RFC 5044 4.1: length, ULPDU, pad to 4, and the CRC field, present even
			# when CRCs are off.
			fpdu_bytes += 2 + len[i] + (4 - (2 + len[i]) % 4) % 4 + 4
		}
	}
	END {
		for (s in end) stream_bytes += end[s] - 1
		nstreams = 0; for (s in streams) nstreams++
		printf "%d packets, %d TCP connection(s), %d payload bytes: MPA Request %d, Reply %d, %d FPDUs (%d bytes)\n",
			packets, nstreams, stream_bytes, reqs, reps, fpdus, fpdu_bytes
		if (nstreams != 1) bad_(nstreams " TCP connections, expected 1")
		if (reqs != 1 || reps != 1) bad_("expected one MPA Request and one Reply")
		if (mpa_bytes + fpdu_bytes != stream_bytes)
			bad_("tshark decoded " mpa_bytes + fpdu_bytes " of the " stream_bytes " stream bytes as MPA")
		c = (crc == "on")
		if (reqc != c || repc != c) bad_("MPA C flags: Request " reqc ", Reply " repc ", expected " c)
		printf "CRC32c: %d FPDUs carry one, %d checked good, %d bad\n", ncrc, good, bad
		if (ncrc != (c ? fpdus : 0) || good != ncrc || bad != 0) bad_("CRC check: expected " (c ? "all " fpdus " good" : "none"))
		if (inval != m[4] + m[6]) bad_(inval " Invalidate STags for " m[4] + m[6] " Sends with Invalidate")
		for (o = 0; o < 16; o++) want[o] = 0
		split(expect, e, " "); for (i in e) { split(e[i], kv, ":"); want[kv[1]] = kv[2] }
		for (o = 0; o < 16; o++) {
			if (f[o] + 0 == 0 && want[o] == 0) continue
			printf "  %-28s %3d FPDUs %3d messages\n", (o < 8 ? name[o + 1] : "opcode " o), f[o], m[o]
			if (m[o] + 0 != want[o]) bad_((o < 8 ? name[o + 1] : "opcode " o) ": " m[o] + 0 " messages, expected " want[o])
		}
		split(multi, mu, " "); for (i in mu) if (f[mu[i]] <= m[mu[i]]) bad_(name[mu[i] + 1] ": no message in several FPDUs")
		exit failed
	}' "$dir/$crc.fields" || rc=1
	return $rc
}
check_run "$port_on" on || fail=1
check_run "$port_off" off || fail=1
[ $fail -eq 0 ] && echo "OK: tshark decodes softrdma's iWARP as MPA / DDP / RDMAP"
exit $fail
