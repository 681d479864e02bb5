#!/usr/bin/env bash
# Debian's own RDMA programs, unmodified, on softrdma (`softrdma run`, the drop-in
# libibverbs.so.1): ibverbs-utils (ibv_devices, ibv_devinfo, ibv_rc_pingpong, ibv_srq_pingpong)
# and perftest without -R (ib_{send,write,read,atomic}_{lat,bw}), server and client on
# loopback over roce_lo and iwarp_lo. Each run must exit 0 and print sane figures (numbers,
# not zero); over iWARP, where the protocol has no atomics, ib_atomic_* must fail cleanly
# (non-zero exit, no crash, no hang), as they do on siw. ibv_xsrq_pingpong (XRC) runs over
# roce_lo and fails cleanly over iwarp_lo (no XRC on iWARP, as siw). Skips (77) if the Debian
# packages are missing. In a sanitizer build the library runs under ASan (preloaded).
set -u
build=${1:?build directory}
for p in ibv_devices ibv_devinfo ibv_rc_pingpong ibv_srq_pingpong ib_send_lat ib_write_bw; do
	command -v "$p" >/dev/null || { echo "SKIP: $p not installed (scripts/install-deps.sh)"; exit 77; }
done
run=("$build/softrdma" run --)
if grep -q "SOFTRDMA_SANITIZE:BOOL=ON" "$build/CMakeCache.txt" 2>/dev/null; then
	export LD_PRELOAD="$(gcc -print-file-name=libasan.so)"
	export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 # the programs' own leaks are not ours
fi
export SOFTRDMA_IW_PORT=$((20000 + RANDOM % 12000))
dir=$(mktemp -d)
srv=
trap '[ -n "$srv" ] && kill "$srv" 2>/dev/null; rm -rf "$dir"' EXIT
fail=0 runs=0 retried=0
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }

# One server/client pair. $1: label, $2: awk program that exits 0 when the client's output
# has sane figures, $3: expected outcome (ok or fail), rest: the command (without address).
attempt() {
	local label=$1 check=$2 want=$3
	shift 3
	local port=$((20000 + RANDOM % 12000))
	timeout 60 "${run[@]}" "$@" -p "$port" >"$dir/srv" 2>&1 &
	srv=$!
	sleep 0.3
	timeout 60 "${run[@]}" "$@" -p "$port" 127.0.0.1 >"$dir/cli" 2>&1
	local rc=$?
	wait "$srv"
	local rs=$?
	srv=
	if [ "$want" = fail ]; then
		# A clean failure: an exit status, not a signal or a timeout.
		if [ $rc -eq 0 ] || [ $rc -ge 124 ] || [ $rs -ge 124 ]; then
			why="$label: expected a clean failure, got client $rc server $rs"
			tail -5 "$dir/cli"
			return 1
		else
			echo "ok   $label (fails cleanly, exit $rc: $(grep -i -m1 'error\|fail\|unsupported' "$dir/cli" | tr -s ' ' | cut -c1-60))"
		fi
		return
	fi
	if [ $rc -ne 0 ] || [ $rs -ne 0 ]; then
		why="$label: client exit $rc, server exit $rs"
		sed 's/^/  client: /' "$dir/cli" | tail -8
		sed 's/^/  server: /' "$dir/srv" | tail -8
		return 1
	fi
	if ! awk "$check" "$dir/cli"; then
		why="$label: no sane figures in the output"
		tail -6 "$dir/cli"
		return 1
	fi
	echo "ok   $label: $(awk "$check" SHOW=1 "$dir/cli")"
}

# A pair that fails is shown, then run once more on new ports: a port another test on this
# machine happens to hold must not fail the suite, a real fault fails twice.
pair() {
	runs=$((runs + 1))
	why=
	attempt "$@" && return
	echo "RETRY: $why"
	retried=$((retried + 1))
	attempt "$@" || bad "$why (twice)"
}

# perftest: the line after the header (#bytes ...) has numbers; the checked column > 0.
lat_ok='/#bytes/ {h=1; next} h && NF >= 6 && $1 ~ /^[0-9]+$/ { if (SHOW) print $1 " B: typical " $5 " us, avg " $6 " us"; ok = ($5 + 0 > 0 && $6 + 0 > 0); exit } END {exit !ok}'
bw_ok='/#bytes/ {h=1; next} h && NF >= 4 && $1 ~ /^[0-9]+$/ { if (SHOW) print $1 " B: " $4 " MB/s average"; ok = ($4 + 0 > 0); exit } END {exit !ok}'
# -a: a row per size, 2 B .. 8 MiB; every row's message rate > 0 (small sizes round to 0.00 MB/s).
all_ok='/#bytes/ {h=1; next} h && $1 ~ /^[0-9]+$/ { rows++; if ($5 + 0 <= 0) zero++; last = $1 " B: " $4 " MB/s" } END { if (SHOW) print rows " sizes, up to " last; exit !(rows >= 20 && !zero) }'
pp_ok='/iters in/ { if (SHOW) print $0; ok = ($(NF-1) + 0 > 0) } END {exit !ok}'
# ibv_xsrq_pingpong prints both ends' QPNs and XRC SRQ numbers, then "success".
xs_ok='/^ *remote: .*QPN RECV [0-9a-f]+ SEND [0-9a-f]+, .*SRQN [0-9a-f]+/ { r = $0 } /^success$/ { s = 1 } END { if (SHOW) print "success, " substr(r, index(r, "QPN")); exit !(r != "" && s) }'

# ibverbs-utils: the device list and attributes.
out=$("${run[@]}" ibv_devices 2>&1) || bad "ibv_devices failed"
for d in roce_lo iwarp_lo; do
	echo "$out" | grep -q "$d" || bad "ibv_devices does not list $d"
done
out=$("${run[@]}" ibv_devinfo -v -d roce_lo 2>&1) || bad "ibv_devinfo -v failed"
echo "$out" | grep -q "PORT_ACTIVE" || bad "ibv_devinfo: port not active"
echo "$out" | grep -Eq "GID\[  0\]:.*(::ffff:127\.0\.0\.1|ffff:7f00:0001), RoCE v2" ||
	bad "ibv_devinfo: no RoCE v2 GID for 127.0.0.1"
out=$("${run[@]}" ibv_devinfo -d iwarp_lo 2>&1) || bad "ibv_devinfo iwarp_lo failed"
echo "$out" | grep -q "transport:.*iWARP" || bad "ibv_devinfo: iwarp_lo is not iWARP"
echo "ok   ibv_devices, ibv_devinfo"

for dev in roce_lo iwarp_lo; do
	pair "ibv_rc_pingpong $dev" "$pp_ok" ok ibv_rc_pingpong -d "$dev" -g 0 -n 200
	pair "ibv_rc_pingpong $dev -e (events)" "$pp_ok" ok ibv_rc_pingpong -d "$dev" -g 0 -n 200 -e
	pair "ibv_rc_pingpong $dev 64 KiB" "$pp_ok" ok ibv_rc_pingpong -d "$dev" -g 0 -n 50 -s 65536
	pair "ibv_srq_pingpong $dev" "$pp_ok" ok ibv_srq_pingpong -d "$dev" -g 0 -n 100
	for t in send write read; do
		pair "ib_${t}_lat $dev" "$lat_ok" ok "ib_${t}_lat" -d "$dev" -x 0 -n 200
		pair "ib_${t}_bw $dev" "$bw_ok" ok "ib_${t}_bw" -d "$dev" -x 0 -n 200
	done
	pair "ib_write_bw $dev -a" "$all_ok" ok ib_write_bw -d "$dev" -x 0 -n 20 -a
	pair "ib_send_bw $dev -q 4" "$bw_ok" ok ib_send_bw -d "$dev" -x 0 -n 100 -q 4
	pair "ib_write_bw $dev -b (bidirectional)" "$bw_ok" ok ib_write_bw -d "$dev" -x 0 -n 100 -b
	pair "ib_send_lat $dev -e (events)" "$lat_ok" ok ib_send_lat -d "$dev" -x 0 -n 100 -e
	pair "ib_send_bw $dev --use-srq" "$bw_ok" ok ib_send_bw -d "$dev" -x 0 -n 100 --use-srq
	if [ "$dev" = roce_lo ]; then
		pair "ib_atomic_lat $dev" "$lat_ok" ok ib_atomic_lat -d "$dev" -x 0 -n 200
		pair "ib_atomic_bw $dev" "$bw_ok" ok ib_atomic_bw -d "$dev" -x 0 -n 200
	else
		pair "ib_atomic_lat $dev" "" fail ib_atomic_lat -d "$dev" -x 0 -n 20
		pair "ib_atomic_bw $dev" "" fail ib_atomic_bw -d "$dev" -x 0 -n 20
	fi
done
# UC and UD on roce_lo (iWARP is connected only, as siw: UD / UC QPs are refused cleanly).
pair "ibv_uc_pingpong roce_lo" "$pp_ok" ok ibv_uc_pingpong -d roce_lo -g 0 -n 200
pair "ibv_uc_pingpong roce_lo 64 KiB -e (events)" "$pp_ok" ok ibv_uc_pingpong -d roce_lo -g 0 -n 50 -s 65536 -e
pair "ibv_ud_pingpong roce_lo" "$pp_ok" ok ibv_ud_pingpong -d roce_lo -g 0 -n 200
pair "ibv_ud_pingpong roce_lo 4 KiB -e (events)" "$pp_ok" ok ibv_ud_pingpong -d roce_lo -g 0 -n 200 -s 4096 -e
pair "ibv_ud_pingpong iwarp_lo" "" fail ibv_ud_pingpong -d iwarp_lo -g 0 -n 20
pair "ib_send_lat -c UD roce_lo" "$lat_ok" ok ib_send_lat -d roce_lo -x 0 -n 200 -c UD
pair "ib_send_bw -c UD roce_lo" "$bw_ok" ok ib_send_bw -d roce_lo -x 0 -n 200 -c UD
for t in send write; do
	pair "ib_${t}_lat -c UC roce_lo" "$lat_ok" ok "ib_${t}_lat" -d roce_lo -x 0 -n 200 -c UC
	pair "ib_${t}_bw -c UC roce_lo" "$bw_ok" ok "ib_${t}_bw" -d roce_lo -x 0 -n 200 -c UC
done
# XRC: XRC_SEND / XRC_RECV QPs and an XRC SRQ per side, on roce_lo only (siw has no XRC).
if command -v ibv_xsrq_pingpong >/dev/null; then
	pair "ibv_xsrq_pingpong roce_lo" "$xs_ok" ok ibv_xsrq_pingpong -d roce_lo -g 0 -n 100
	pair "ibv_xsrq_pingpong roce_lo 64 KiB -e (events)" "$xs_ok" ok ibv_xsrq_pingpong -d roce_lo -g 0 -n 50 -s 65536 -m 1024 -e
	pair "ibv_xsrq_pingpong iwarp_lo" "" fail ibv_xsrq_pingpong -d iwarp_lo -g 0 -n 10
fi
echo "$runs program pairs, $fail failed, $retried passed on a second attempt"
[ $fail -eq 0 ]
