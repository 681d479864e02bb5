#!/usr/bin/env bash
# Debian's rdma_cm programs, unmodified, on softrdma's rdma_cm (`softrdma run`, the drop-in
# librdmacm.so.1 over the rdma_cm in libibverbs.so.1), server and client on loopback, over
# RoCEv2 (roce_lo, the default) and iWARP (--transport iwarp: iwarp_lo):
#   rping (-C 10 -v, every ping checked; -q self-managed QPs), ucmatose (1 and 2
#   connections), rdma_server / rdma_client (the synchronous API), rdma_xserver / rdma_xclient
#   (RC, and -c x: XRC through rdma_cm on RoCE, a clean EOPNOTSUPP on iWARP), rstream (rsockets
#   are not implemented: a clean ENOSYS failure), perftest with -R
#   (ib_send_lat, ib_write_bw, ib_read_lat, ib_send_bw: sane figures), and udaddy (UD through
#   rdma_cm, SIDR: its 10 datagrams each way over RoCE; over iWARP, which has no UD, a clean
#   failure at rdma_create_qp with EOPNOTSUPP, as with siw), and mckey (UD multicast through
#   rdma_cm: a receiver and a sender process joined to a group of their own, the sender's
#   datagrams received; also with 2 ids each, 20 messages of 1 KiB; over iWARP a clean failure
#   at rdma_create_qp, as with siw).
# Every run must exit 0 (udaddy over iWARP: a clean non-zero exit with the expected message);
# every process is bounded by timeout and only our own PIDs are killed. Skips (77) if rdmacm-utils or perftest are missing. In a
# sanitizer build the library runs under ASan (preloaded), as in test_dropin.sh.
set -u
build=${1:?build directory}
for p in rping ucmatose rdma_server rdma_client rdma_xserver rdma_xclient udaddy mckey rstream ib_send_lat \
	ib_write_bw ib_read_lat \
	ib_send_bw; do
	command -v "$p" >/dev/null || { echo "SKIP: $p not installed (scripts/install-deps.sh)"; exit 77; }
done
[ -x "$build/softrdma" ] && [ -e "$build/lib/librdmacm.so.1" ] || {
	echo "FAIL: $build/softrdma or $build/lib/librdmacm.so.1 missing (build first)"; exit 1; }
if grep -q "SOFTRDMA_SANITIZE:BOOL=ON" "$build/CMakeCache.txt" 2>/dev/null; then
	export LD_PRELOAD="$(gcc -print-file-name=libasan.so)"
	export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 # the programs' own leaks are not ours
fi
dir=$(mktemp -d)
srv=
trap '[ -n "$srv" ] && kill "$srv" 2>/dev/null; rm -rf "$dir"' EXIT
fail=0 runs=0
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }

# One server/client pair. $1 transport (roce, iwarp, auto; or SERVER/CLIENT), $2 label, $3 awk program that exits 0 when the
# outputs are sane (file names: server output first, then the client's; for a failure: a
# pattern the client's output must match, or empty), $4 expected outcome (ok, or fail: a clean
# failure), $5 server command, $6 client command; PORT in the commands becomes a random port.
pair() {
	local tr=$1 label=$2 check=$3 want=$4 scmd=$5 ccmd=$6
	local port=$((20000 + RANDOM % 12000)) str=${1%/*} ctr=${1#*/}
	runs=$((runs + 1))
	local t0=$(date +%s%N)
	timeout 60 "$build/softrdma" run --transport "$str" -- ${scmd//PORT/$port} >"$dir/srv" 2>&1 &
	srv=$!
	sleep 0.3
	timeout 60 "$build/softrdma" run --transport "$ctr" -- ${ccmd//PORT/$port} >"$dir/cli" 2>&1
	local rc=$?
	if [ "$want" = fail ]; then
		kill "$srv" 2>/dev/null
	fi
	wait "$srv"
	local rs=$?
	srv=
	local ms=$((($(date +%s%N) - t0) / 1000000))
	if [ "$want" = fail ]; then
		# A clean failure: an exit status, not a signal or a timeout (124..192; 255 is a
		# program's exit(-1)), with the expected message.
		if [ $rc -eq 0 ] || { [ $rc -ge 124 ] && [ $rc -le 192 ]; }; then
			bad "$tr $label: expected a clean failure, got client $rc"
			tail -5 "$dir/cli"
		elif [ -n "$check" ] && ! grep -q -- "$check" "$dir/cli"; then
			bad "$tr $label: failed, but not with \"$check\""
			tail -5 "$dir/cli"
		else
			echo "ok   $tr $label (fails cleanly, exit $rc: $(grep -i -m1 'error\|fail\|support' "$dir/cli" | tr -s ' ' | cut -c1-60)) ${ms} ms"
		fi
		return
	fi
	if [ $rc -ne 0 ] || [ $rs -ne 0 ]; then
		bad "$tr $label: client exit $rc, server exit $rs"
		sed 's/^/  client: /' "$dir/cli" | tail -8
		sed 's/^/  server: /' "$dir/srv" | tail -8
		return
	fi
	if ! awk "$check" "$dir/srv" "$dir/cli" >/dev/null; then
		bad "$tr $label: the output is not what it should be"
		sed 's/^/  client: /' "$dir/cli" | tail -6
		sed 's/^/  server: /' "$dir/srv" | tail -6
		return
	fi
	echo "ok   $tr $label: $(awk "$check" SHOW=1 "$dir/srv" "$dir/cli") (${ms} ms)"
}

# rping -v: the client prints every ping it got back, the server every ping it read; 10 each,
# with the right counter and payload start.
rping_ok='FNR == 1 {f++} f == 1 && /^server ping data: rdma-ping-[0-9]+: / {s++} f == 2 && /^ping data: rdma-ping-[0-9]+: [A-z]/ {c++; last = $3}
	END { if (SHOW) print c " pings back, " s " read by the server"; exit !(s == 10 && c == 10 && last == "rdma-ping-9:") }'
# ucmatose: both end with "return status 0" after their data transfers.
ucma_ok='FNR == 1 {f++} /data transfers complete/ {d[f]++} /return status 0/ {r[f]++}
	END { if (SHOW) print "data transfers complete, status 0 on both sides"; exit !(d[1] && d[2] && r[1] && r[2]) }'
# udaddy: the server got the client's datagrams and sent its replies, the client got them back;
# both end with "return status 0".
ud_ok='FNR == 1 {f++} f == 1 && /^receiving data transfers/ {s++} f == 1 && /^sending replies/ {s++}
	f == 2 && /^initiating data transfers/ {c++} /^data transfers complete/ {d[f]++} /^return status 0$/ {r[f]++}
	END { if (SHOW) print "10 datagrams each way, status 0 on both sides"; exit !(s == 2 && c == 1 && d[1] && d[2] && r[1] && r[2]) }'
# mckey: both joined the group (dgid ::ffff:<group>), the receiver got its messages, the sender
# sent them; both end with "return status 0".
mc_ok='FNR == 1 {f++} /^mckey: joined dgid: ::ffff:239\./ {j[f]++} f == 1 && /^receiving data transfers/ {s++}
	f == 2 && /^initiating data transfers/ {c++} /^data transfers complete/ {d[f]++} /^return status 0$/ {r[f]++}
	END { if (SHOW) print "joined on both sides, the datagrams received, status 0"; exit !(j[1] && j[2] && s && c && d[1] && d[2] && r[1] && r[2]) }'
rdma_ok='/rdma_server: end 0/ {s++} /rdma_client: end 0/ {c++} END { if (SHOW) print "end 0 on both sides"; exit !(s && c) }'
xrdma_ok='/rdma_xserver: end 0/ {s++} /rdma_xclient: end 0/ {c++} END { if (SHOW) print "end 0 on both sides"; exit !(s && c) }'
# perftest: the line after the header (#bytes ...) has numbers; the checked column > 0.
lat_ok='FNR == 1 {f++; h = 0} f == 2 && /#bytes/ {h=1; next} f == 2 && h && NF >= 6 && $1 ~ /^[0-9]+$/ { if (SHOW) print $1 " B: typical " $5 " us"; ok = ($5 + 0 > 0); exit } END {exit !ok}'
bw_ok='FNR == 1 {f++; h = 0} f == 2 && /#bytes/ {h=1; next} f == 2 && h && NF >= 4 && $1 ~ /^[0-9]+$/ { if (SHOW) print $1 " B: " $4 " MB/s average"; ok = ($4 + 0 > 0); exit } END {exit !ok}'

for tr in roce iwarp; do
	dev=${tr}_lo
	pair "$tr" "rping -C 10 -v" "$rping_ok" ok \
		"rping -s -a 127.0.0.1 -p PORT -C 10 -v" "rping -c -a 127.0.0.1 -p PORT -C 10 -v"
	pair "$tr" "rping -q (self-managed QPs)" "$rping_ok" ok \
		"rping -s -q -a 127.0.0.1 -p PORT -C 10 -v" "rping -c -q -a 127.0.0.1 -p PORT -C 10 -v"
	pair "$tr" "ucmatose" "$ucma_ok" ok "ucmatose -p PORT" "ucmatose -s 127.0.0.1 -p PORT"
	pair "$tr" "ucmatose -c 2" "$ucma_ok" ok "ucmatose -p PORT -c 2" \
		"ucmatose -s 127.0.0.1 -p PORT -c 2"
	pair "$tr" "rdma_server / rdma_client" "$rdma_ok" ok "rdma_server -p PORT" \
		"rdma_client -s 127.0.0.1 -p PORT"
	pair "$tr" "rdma_xserver / rdma_xclient (RC)" "$xrdma_ok" ok "rdma_xserver -p PORT" \
		"rdma_xclient -s 127.0.0.1 -p PORT"
	# -c x: XRC through rdma_cm (RDMA_PS_IB, XRC_SEND / XRC_RECV QPs, an XRC SRQ whose
	# number the server sends as private data). iWARP has no XRC (as siw): a clean failure.
	if [ "$tr" = roce ]; then
		pair "$tr" "rdma_xserver / rdma_xclient -c x (XRC)" "$xrdma_ok" ok \
			"rdma_xserver -p PORT -c x" "rdma_xclient -s 127.0.0.1 -p PORT -c x"
	else
		pair "$tr" "rdma_xclient -c x (XRC)" "rdma_create_ep: Operation not supported" fail \
			"rdma_xserver -p PORT -c x" "rdma_xclient -s 127.0.0.1 -p PORT -c x"
	fi
	pair "$tr" "ib_send_lat -R" "$lat_ok" ok "ib_send_lat -R -d $dev -p PORT -n 500" \
		"ib_send_lat -R -d $dev -p PORT -n 500 127.0.0.1"
	pair "$tr" "ib_write_bw -R" "$bw_ok" ok "ib_write_bw -R -d $dev -p PORT -n 500" \
		"ib_write_bw -R -d $dev -p PORT -n 500 127.0.0.1"
	pair "$tr" "ib_read_lat -R" "$lat_ok" ok "ib_read_lat -R -d $dev -p PORT -n 500" \
		"ib_read_lat -R -d $dev -p PORT -n 500 127.0.0.1"
	pair "$tr" "ib_send_bw -R" "$bw_ok" ok "ib_send_bw -R -d $dev -p PORT -n 500" \
		"ib_send_bw -R -d $dev -p PORT -n 500 127.0.0.1"
	# udaddy has no port option (-p is the port space): its fixed 7174. No UD on iWARP:
	# rdma_create_qp(UD) fails with EOPNOTSUPP (siw_create_qp: RC only), udaddy exits -1.
	if [ "$tr" = roce ]; then
		pair "$tr" "udaddy (UD, SIDR)" "$ud_ok" ok "udaddy" "udaddy -s 127.0.0.1"
	else
		pair "$tr" "udaddy (UD)" "unable to create QP: Operation not supported" fail \
			"udaddy" "udaddy -s 127.0.0.1"
	fi
	# mckey: a group of its own per run (other programs of the host may use one too). The
	# receiver joins first; the sender sends after its join and a 3 s pause (mckey's own).
	grp=239.$((RANDOM % 256)).$((RANDOM % 256)).$((RANDOM % 254 + 1))
	if [ "$tr" = roce ]; then
		pair "$tr" "mckey (UD multicast)" "$mc_ok" ok "mckey -m $grp -b 127.0.0.1" \
			"mckey -m $grp -b 127.0.0.1 -s"
		pair "$tr" "mckey -c 2 -C 20 -S 1024" "$mc_ok" ok \
			"mckey -m $grp -b 127.0.0.1 -c 2 -C 20 -S 1024" \
			"mckey -m $grp -b 127.0.0.1 -c 2 -C 20 -S 1024 -s"
	else
		pair "$tr" "mckey (UD multicast)" "unable to create QP: Operation not supported" fail \
			"mckey -m $grp -b 127.0.0.1" "mckey -m $grp -b 127.0.0.1 -s"
	fi
done
# Which transport (README "rdma_cm"), no --transport: perftest opens -d iwarp_lo itself, and
# rdma_cm follows on both sides (ib_read_lat -R used to get RoCE, then EINVAL); rping opens
# no device: a client asks the peer (SOFTRDMA_CM_DEBUG shows the connections' transport).
iw_lat_ok='FNR == 1 {f++; h = 0} /\(iWARP, ESTABLISHED\)/ {iw[f]++} /\(RoCE, ESTABLISHED\)/ {ro[f]++}
	f == 2 && /#bytes/ {h = 1; next} f == 2 && h && NF >= 6 && $1 ~ /^[0-9]+$/ && !t {t = $5}
	END { if (SHOW) print t " us typical, iWARP on both sides"; exit !(t + 0 > 0 && iw[1] && iw[2] && !ro[1] && !ro[2]) }'
rping_tr() { # $1 the transport both ends must report
	echo "FNR == 1 {f++} /\\($1, ESTABLISHED\\)/ {e[f]++} /\\(($2), ESTABLISHED\\)/ {x[f]++}
	f == 2 && /^ping data: rdma-ping-[0-9]+: / {c++}
	END { if (SHOW) print c \" pings, $1 on both sides\"; exit !(c == 10 && e[1] && e[2] && !x[1] && !x[2]) }"
}
export SOFTRDMA_CM_DEBUG=1
pair auto "ib_read_lat -R -d iwarp_lo (no --transport)" "$iw_lat_ok" ok \
	"ib_read_lat -R -d iwarp_lo -p PORT -n 500" "ib_read_lat -R -d iwarp_lo -p PORT -n 500 127.0.0.1"
pair iwarp/auto "rping, iWARP-only server, client asks" "$(rping_tr iWARP RoCE)" ok \
	"rping -s -a 127.0.0.1 -p PORT -C 10 -v" "rping -c -a 127.0.0.1 -p PORT -C 10 -v"
pair roce/auto "rping, RoCE-only server, client asks" "$(rping_tr RoCE iWARP)" ok \
	"rping -s -a 127.0.0.1 -p PORT -C 10 -v" "rping -c -a 127.0.0.1 -p PORT -C 10 -v"
pair auto/iwarp "rping, server takes both, iWARP client" "$(rping_tr iWARP RoCE)" ok \
	"rping -s -a 127.0.0.1 -p PORT -C 10 -v" "rping -c -a 127.0.0.1 -p PORT -C 10 -v"
# rdma_create_ep's listener on 127.0.0.1 takes both; rdma_get_request gives an iWARP request
# a QP of its own device (the listener's PD is RoCE's).
pair auto/iwarp "rdma_server on 127.0.0.1 (both), iWARP rdma_client" "$rdma_ok" ok \
	"rdma_server -s 127.0.0.1 -p PORT" "rdma_client -s 127.0.0.1 -p PORT"
unset SOFTRDMA_CM_DEBUG
# rsockets (librdmacm's own protocol over RC QPs) are not implemented: rstream fails cleanly.
pair roce "rstream (rsockets: not implemented)" "rsocket failed: Function not implemented" fail \
	"rstream -p PORT" "rstream -s 127.0.0.1 -p PORT"
echo "$runs program pairs, $fail failed"
[ $fail -eq 0 ]
