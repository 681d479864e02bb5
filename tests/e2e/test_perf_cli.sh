#!/usr/bin/env bash
# `softrdma lat` and `softrdma bw` (src/tools/perf.c): help, every kind of bad input (exit
# status and message), a short lat and bw run of each verb on roce_lo and iwarp_lo (perftest's
# columns, sane figures, the same row on both sides; iWARP atomics refused clearly), --json,
# --histogram, --perftest-compat, -D, -a, -q/-b, the data checks (a corrupted byte must be
# reported), and peers that vanish, hang or are interrupted: clear messages, no hang.
# Usage: test_perf_cli.sh BUILD_DIR   (the binary is BUILD_DIR/softrdma)
set -u
build=${1:?build directory}
sr=$build/softrdma
[ -x "$sr" ] || { echo "FAIL: $sr not built"; exit 1; }
tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT
# Random ports, so that parallel runs (and other tests' captures of 4791) never meet.
export SOFTRDMA_IW_PORT=$((20000 + RANDOM % 12000))
export SOFTRDMA_UDP_PORT=$((20000 + RANDOM % 12000))
port=$((20000 + RANDOM % 12000))
fail=0
pass=0
t_start=$SECONDS

bad() {
	echo "FAIL $*"
	fail=$((fail + 1))
}
good() {
	pass=$((pass + 1))
}
show() { # file...: the last lines, indented
	for f in "$@"; do tail -n 5 "$f" | sed "s|^|    $(basename "$f"): |"; done
}
# expect_rc NAME WANT GOT
expect_rc() {
	if [ "$3" -eq "$2" ]; then good; else bad "$1: exit status $3, expected $2"; return 1; fi
}
# expect_msg NAME FILE REGEX
expect_msg() {
	if grep -Eq -- "$3" "$2"; then good; else
		bad "$1: no /$3/ in its output"
		show "$2"
		return 1
	fi
}

# ---- help ----
"$sr" --help >"$tmp/o" 2>&1
expect_rc "softrdma --help" 0 $?
expect_msg "softrdma --help" "$tmp/o" '^  lat \[options\]'
expect_msg "softrdma --help" "$tmp/o" '^  bw \[options\]'
for c in lat bw; do
	"$sr" $c --help >"$tmp/o" 2>"$tmp/e"
	expect_rc "$c --help" 0 $?
	for w in -- '--verb' '--ib-dev' '--gid-index' '--size' '--all' '--iters' '--duration' \
		'--tx-depth' '--json' '--timeout' 'rdma_cm' 'Exit status'; do
		expect_msg "$c --help mentions $w" "$tmp/o" "$w"
	done
	[ -s "$tmp/e" ] && bad "$c --help wrote to stderr"
done
expect_msg "lat --help" <("$sr" lat -h) 'perftest-compat'
expect_msg "bw --help" <("$sr" bw -h) 'report_gbits'

# ---- usage errors: exit 2, a message naming the problem, no connection attempted ----
usage_case() { # expected-regex args...
	local want=$1
	shift
	timeout 10 "$sr" "$@" >"$tmp/o" 2>"$tmp/e"
	local rc=$?
	expect_rc "softrdma $* (usage)" 2 $rc && expect_msg "softrdma $*" "$tmp/e" "$want" &&
		expect_msg "softrdma $* (hint)" "$tmp/e" "Run 'softrdma (lat|bw) --help'"
}
usage_case "unknown option '--bogus'" lat --bogus
usage_case "unknown option '-z'" bw -z 127.0.0.1
usage_case "option '-s' needs a value" lat -s
usage_case "option '--ib-dev' needs a value" bw --ib-dev
usage_case "bad value '12Q' for option '-s'" lat -s 12Q
usage_case "bad value 'foo' for option '--verb'" bw --verb foo
usage_case "bad value '0' for option '-n'" lat -n 0
usage_case "bad value 'abc' for option '--timeout'" lat --timeout=abc
usage_case "bad value '-1' for option '-D'" bw -D -1
usage_case "bad value '70000' for option '-p'" lat -p 70000
usage_case "bandwidth options" lat -q 2
usage_case "bandwidth options" lat -b
usage_case "latency options" bw --histogram
usage_case "latency options" bw --perftest-compat
usage_case "latency options" bw --cdf
usage_case "-a and -s exclude each other" lat -a -s 64
usage_case "-n and -D exclude each other" bw -n 10 -D 1
usage_case "one server address at most" lat 127.0.0.1 127.0.0.2
usage_case "atomics are 8 bytes" bw --verb atomic -s 64
usage_case "needs --verb atomic" lat -A CMP_AND_SWAP
usage_case "needs -n 4 or more" lat --perftest-compat -n 3

# ---- errors at run time: exit 1 and a clear message, quickly ----
run_case() { # name expected-regex max-seconds args...
	local name=$1 want=$2 max=$3
	shift 3
	local t0=$SECONDS
	timeout 30 "$sr" "$@" >"$tmp/o" 2>"$tmp/e"
	local rc=$?
	expect_rc "$name" 1 $rc && expect_msg "$name" "$tmp/e" "$want"
	[ $((SECONDS - t0)) -le "$max" ] || bad "$name: took $((SECONDS - t0)) s"
}
run_case "no such device (client)" "no device named 'nosuchdev' \(available: .*roce_lo" 5 \
	lat -d nosuchdev -p $port 127.0.0.1
run_case "no such device (server)" "no device named 'nosuchdev'" 5 bw -d nosuchdev -p $port
run_case "no server" "cannot connect to the server 127.0.0.1 port $port within 1.0 s: Connection refused" 5 \
	lat --timeout 1 -p $port 127.0.0.1
run_case "no client" "no client connected to TCP port $port within 1.0 s" 5 bw --timeout 1 -p $port
run_case "iWARP atomics (client)" "device iwarp_lo has no atomics" 5 \
	lat -d iwarp_lo --verb atomic -p $port 127.0.0.1
run_case "unwritable --json" "cannot write /nonexistent/x.json" 5 lat --json /nonexistent/x.json

# A server and a client: both must end with the given statuses; the outputs are in
# $tmp/srv and $tmp/cli.
pair() { # srv-rc cli-rc "server args" client args...
	local want_s=$1 want_c=$2 sargs=$3
	shift 3
	port=$((port + 1))
	# shellcheck disable=SC2086
	timeout 60 "$sr" $sargs -p $port >"$tmp/srv" 2>&1 &
	local s=$!
	timeout 60 "$sr" "$@" -p $port 127.0.0.1 >"$tmp/cli" 2>"$tmp/cli.err"
	local rc=$?
	wait $s
	local rs=$?
	cat "$tmp/cli.err" >>"$tmp/cli"
	if [ $rc -ne "$want_c" ] || [ $rs -ne "$want_s" ]; then
		bad "softrdma $*: client $rc (want $want_c), server $rs (want $want_s)"
		show "$tmp/cli" "$tmp/srv"
		return 1
	fi
	good
}
pair 1 1 "lat -d iwarp_lo" lat -d roce_lo --verb atomic -n 10 &&
	expect_msg "iWARP atomics (server)" "$tmp/cli" "server: device iwarp_lo has no atomics"
pair 1 1 "lat --verb write" lat -n 10 &&
	expect_msg "verb mismatch" "$tmp/cli" "server: the client and the server disagree on --verb" &&
	expect_msg "verb mismatch (server)" "$tmp/srv" "disagree on --verb"
pair 1 1 "lat" bw -n 10 &&
	expect_msg "lat server, bw client" "$tmp/cli" "the client runs 'softrdma bw', this server 'softrdma lat'"
pair 1 1 "lat -d iwarp_lo" lat -d roce_lo -n 10 &&
	expect_msg "transport mismatch" "$tmp/cli" "both sides need the same transport"

# ---- short runs of every verb on both devices ----
lat_hdr=' #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] '
bw_hdr=' #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]'
row() { # file: the first row under the header
	awk '/#bytes/ { if (getline > 0) print; exit }' "$1"
}
check_lat() { # name file size iters: columns and sane figures, the server's row the same
	local name=$1 f=$2 size=$3 iters=$4
	grep -qF -- "$lat_hdr" "$f" || { bad "$name: no perftest latency header"; show "$f"; return; }
	local r
	r=$(row "$f")
	if echo "$r" | awk -v s="$size" -v n="$iters" '
		NF < 9 || $1 != s || $2 != n { exit 1 }
		{ for (i = 3; i <= NF; i++) if ($i !~ /^[0-9]+\.[0-9][0-9]$/) exit 1 }
		# min <= median, avg <= max; median <= p99 <= p99.9 <= max; positive and < 10 s
		!($3 > 0 && $3 <= $5 && $5 <= $4 && $3 <= $6 && $6 <= $4 && $5 <= $8 &&
		  $8 <= $9 && $9 <= $4 && $4 < 1e7 && $7 >= 0) { exit 1 }
		NF == 10 && !($10 >= 0 && $10 <= $8) { exit 1 }'; then
		good
	else
		bad "$name: bad row '$r'"
		show "$f"
	fi
	[ "$(row "$tmp/srv")" = "$r" ] && good || bad "$name: the server printed '$(row "$tmp/srv")'"
}
check_bw() { # name file size iters
	local name=$1 f=$2 size=$3 iters=$4
	grep -qF -- "$bw_hdr" "$f" || { bad "$name: no perftest bandwidth header"; show "$f"; return; }
	local r
	r=$(row "$f")
	# BW average = size * MsgRate (MiB/s vs Mpps) within rounding; peak >= average.
	if echo "$r" | awk -v s="$size" -v n="$iters" '
		NF != 5 || $1 != s || $2 != n { exit 1 }
		!($4 > 0 && $3 >= $4 * 0.999 && $5 > 0 && $4 < 1e6) { exit 1 }
		{ x = s * $5 * 1e6 / 1048576; if (x < $4 * 0.97 - 0.01 || x > $4 * 1.03 + 0.01) exit 1 }'
	then
		good
	else
		bad "$name: bad row '$r'"
		show "$f"
	fi
	[ "$(row "$tmp/srv")" = "$r" ] && good || bad "$name: the server printed '$(row "$tmp/srv")'"
}
for dev in roce_lo iwarp_lo; do
	for verb in send write read atomic; do
		size=100
		[ $verb = atomic ] && size=8
		if [ $dev = iwarp_lo ] && [ $verb = atomic ]; then
			run_case "bw atomic on iWARP" "device iwarp_lo has no atomics" 5 \
				bw -d $dev --verb atomic -p $port 127.0.0.1
			continue
		fi
		pair 0 0 "lat -d $dev" lat -d $dev --verb $verb -s $size -n 200 &&
			check_lat "lat $verb $dev" "$tmp/cli" $size 200
		[ $verb = atomic ] || size=65536
		pair 0 0 "bw -d $dev" bw -d $dev --verb $verb -s $size -n 300 &&
			check_bw "bw $verb $dev" "$tmp/cli" $size 300
	done
done

# ---- options ----
# With --json -, stdout carries only the JSON document (the table goes to stderr).
timeout 60 "$sr" lat -p $((port + 1)) >"$tmp/srv" 2>&1 &
s=$!
timeout 60 "$sr" lat -p $((port + 1)) -n 100 -s 4K --histogram --cdf --json - --verb write 127.0.0.1 \
	>"$tmp/cli.json" 2>"$tmp/cli.err"
rc=$?
wait $s
port=$((port + 1))
expect_rc "--json -" 0 $rc
if python3 -m json.tool "$tmp/cli.json" >/dev/null; then good; else
	bad "--json - is not JSON"
	show "$tmp/cli.json"
fi
if python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
r = d["results"][0]
assert d["test"] == "lat" and d["verb"] == "write" and d["statistics"] == "native"
assert r["MsgSize"] == 4096 and r["n_iterations"] == 100
assert 0 < r["t_min"] <= r["t_typical"] <= r["t_max"] and r["jitter"] >= 0
assert sum(b["count"] for b in r["histogram"]) == 100
# --cdf: [usec, fraction] ascending from t_min to t_max; the median at 0.5
cdf = r["cdf"]
assert abs(cdf[0][0] - r["t_min"]) < 0.01 and cdf[0][1] == 0.0, cdf[0]
assert abs(cdf[-1][0] - r["t_max"]) < 0.01 and cdf[-1][1] == 1.0, cdf[-1]
assert all(a[0] <= b[0] and a[1] < b[1] for a, b in zip(cdf, cdf[1:]))
p50, p51 = [v for v, f in cdf if f in (0.5, 0.51)] # the median lies between (even count)
assert p50 - 0.01 <= r["t_typical"] <= p51 + 0.01, (p50, r["t_typical"], p51)
# CPU per round trip on each side: positive, and a busy-polling client spends about its
# whole round trip (half of it is the reported latency) on the CPU, not far more
assert 0 < r["cpu_client_us"] and 0 < r["cpu_server_us"]
assert r["cpu_client_us"] < 4 * 2 * r["t_avg"] + 50, (r["cpu_client_us"], r["t_avg"])
' "$tmp/cli.json"; then good; else bad "--json -: unexpected content"; fi
expect_msg "--json -: the table on stderr" "$tmp/cli.err" '^ 4096 +100 '
expect_msg "--histogram" "$tmp/cli.err" '^\[ +[0-9]+, +[0-9]+\) ns +[0-9]+ +[0-9.]+% #+$'
pair 0 0 "bw --json $tmp/srv.json" bw -n 300 --report_gbits -V read --json "$tmp/cli.json" &&
	python3 -m json.tool "$tmp/srv.json" >/dev/null && python3 -c '
import json, sys
for f in sys.argv[1:]:
    d = json.load(open(f))
    r = d["results"][0]
    assert d["test"] == "bw" and r["unit"] == "Gb/sec" and r["BW_average"] > 0, f
    assert r["cpu_client_us"] > 0 and r["cpu_server_us"] >= 0, r
' "$tmp/cli.json" "$tmp/srv.json" && good || bad "bw --json (both sides)"
expect_msg "--report_gbits" "$tmp/cli" 'BW average\[Gb/sec\]'
pair 0 0 "lat" lat -n 100 --perftest-compat &&
	check_lat "--perftest-compat" "$tmp/cli" 2 100 &&
	expect_msg "--perftest-compat header" "$tmp/cli" 'perftest-compatible' &&
	if grep -q 'jitter\[usec\]' "$tmp/cli"; then bad "--perftest-compat: extra column"; fi
pair 0 0 "lat -d iwarp_lo" lat -d iwarp_lo -D 300ms --verb read &&
	expect_msg "lat -D" "$tmp/cli" '^ 2 +[0-9]+ +[0-9]'
pair 0 0 "bw -d iwarp_lo" bw -d iwarp_lo -q 2 -b -n 200 -s 16K --verb send &&
	check_bw "bw -q 2 -b iWARP" "$tmp/cli" 16384 200 &&
	expect_msg "bw -b title" "$tmp/cli" 'Send Bidirectional BW Test'
pair 0 0 "bw" bw -q 3 -b -D 0.3 --verb atomic -A CMP_AND_SWAP &&
	expect_msg "bw atomic CAS -D" "$tmp/cli" 'Atomic CMP_AND_SWAP BW Test'
pair 0 0 "lat" lat -a -n 5 --verb write &&
	[ "$(grep -cE '^ [0-9]+ +5 ' "$tmp/cli")" -eq 23 ] && good ||
	bad "lat -a: expected 23 rows of 2 B .. 8 MiB"
expect_msg "lat -a: 8 MiB last" "$tmp/cli" '^ 8388608 +5 '
expect_msg "lat -a: progress" "$tmp/cli" '\[23/23\] 8388608 bytes done'
pair 0 0 "bw -d iwarp_lo" bw -d iwarp_lo -a -n 20 &&
	[ "$(grep -cE '^ [0-9]+ +20 ' "$tmp/cli")" -eq 23 ] && good ||
	bad "bw -a (iWARP): expected 23 rows"

# ---- the data checks can fail: one wrong byte must be reported by the peer ----
export SOFTRDMA_PERF_CORRUPT=1
pair 1 1 "lat --timeout 2" lat -V send -s 100 -n 20 --timeout 2 &&
	expect_msg "corrupt SEND" "$tmp/srv" "SEND data mismatch: QP 0, message 0 of 100 bytes, byte 50"
pair 1 1 "bw --timeout 2" bw -V write -s 100 -n 20 --timeout 2 &&
	expect_msg "corrupt WRITE" "$tmp/cli" "server: RDMA WRITE data mismatch"
pair 1 1 "lat -d iwarp_lo --timeout 2" lat -d iwarp_lo -V read -s 4K -n 20 --timeout 2 &&
	expect_msg "corrupt READ" "$tmp/cli" "RDMA READ data mismatch: QP 0, message 0 of 4096 bytes, byte 2048"
unset SOFTRDMA_PERF_CORRUPT

# ---- vanished, hung and interrupted peers ----
start_pair() { # "server args" "client args": sets spid, cpid (no timeout wrapper: we signal them)
	port=$((port + 1))
	# shellcheck disable=SC2086
	"$sr" $1 -p $port >"$tmp/srv" 2>&1 &
	spid=$!
	# shellcheck disable=SC2086
	"$sr" $2 -p $port 127.0.0.1 >"$tmp/cli" 2>&1 &
	cpid=$!
	pids+=("$spid" "$cpid")
	# Wait until the run is under way (the table header is out).
	for _ in $(seq 100); do grep -q '#bytes' "$tmp/cli" 2>/dev/null && break; sleep 0.1; done
	sleep 0.5
}
wait_for() { # pid seconds: its exit status, or 124 if it is still running after that long
	local t0=$SECONDS
	while kill -0 "$1" 2>/dev/null; do
		[ $((SECONDS - t0)) -ge "$2" ] && return 124
		sleep 0.1
	done
	wait "$1"
}
start_pair "bw --timeout 3" "bw -D 30"
{ kill -9 $cpid && wait $cpid; } 2>/dev/null
wait_for $spid 5
expect_rc "server, client SIGKILLed" 1 $? &&
	expect_msg "server, client SIGKILLed" "$tmp/srv" "the client closed the side-band connection"
start_pair "lat --timeout 2" "lat -D 30 --verb write"
kill -STOP $cpid
wait_for $spid 6
expect_rc "server, client hung (SIGSTOP)" 1 $? &&
	expect_msg "server, client hung" "$tmp/srv" "no .* from the client for 2.0 s: the client stopped responding"
{ kill -9 $cpid && wait $cpid; } 2>/dev/null # (no "Killed" notice from bash)
start_pair "lat -V read" "lat -V read -D 30"
kill -INT $cpid
wait_for $cpid 5
expect_rc "client SIGINT" 130 $? && expect_msg "client SIGINT" "$tmp/cli" "interrupted by SIGINT"
wait_for $spid 5
expect_rc "server of an interrupted client" 1 $? &&
	expect_msg "server of an interrupted client" "$tmp/srv" "the client stopped: interrupted by SIGINT"
start_pair "bw -d iwarp_lo" "bw -d iwarp_lo -D 30"
kill -TERM $spid
wait_for $spid 5
expect_rc "server SIGTERM" 143 $?
wait_for $cpid 5
expect_rc "client of a terminated server" 1 $? &&
	expect_msg "client of a terminated server" "$tmp/cli" "the server stopped: interrupted by SIGTERM"
port=$((port + 1))
"$sr" lat -p $port >"$tmp/srv" 2>&1 &
spid=$!
pids+=("$spid")
sleep 0.3
kill -INT $spid
wait_for $spid 5
expect_rc "waiting server SIGINT" 130 $?

echo "perf_cli: $pass checks passed, $fail failed ($((SECONDS - t_start)) s)"
[ $fail -eq 0 ]
