#!/usr/bin/env bash
# The floors and set-up timing of `softrdma compare` (src/tools/floor.c), run as compare runs
# them: `softrdma compare --floor MODE` and `softrdma compare --setup`, a server and a client on
# 127.0.0.1. Each of udp-lat, tcp-lat, udp-bw, tcp-bw, setup --tcp and setup over rdma_cm
# (SOFTRDMA_TRANSPORT=roce and iwarp): exit 0 on both sides and a sane JSON file (positive
# figures, n_iterations as asked, p50 <= p99 <= max, the cdf ascending). Then: bad options
# exit 2; a client without a server and a server without a client exit 1 within --timeout.
# Usage: test_floor.sh BUILD_DIR. FLOOR_CMD overrides the command (default
# "BUILD_DIR/softrdma compare"), e.g. a scratch driver while the dispatch is not wired.
set -u
build=${1:?build directory}
cmd=${FLOOR_CMD:-$build/softrdma compare}
read -r -a fl <<<"$cmd"
command -v python3 >/dev/null || { echo "SKIP: python3 needed for the JSON checks"; exit 77; }
if ! timeout 10 "${fl[@]}" --floor --help 2>/dev/null | grep -q -- '--floor MODE'; then
	echo "SKIP: '$cmd --floor' is not available (dispatch not wired?)"
	exit 77
fi
tmp=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT
# Random ports, so that parallel runs never meet; the RDMA devices' own ports too.
export SOFTRDMA_IW_PORT=$((20000 + RANDOM % 12000))
export SOFTRDMA_UDP_PORT=$((20000 + RANDOM % 12000))
port=$((20000 + RANDOM % 10000)) # below the ephemeral range (32768-60999)
fail=0
pass=0
t_start=$SECONDS

bad() {
	echo "FAIL $*"
	fail=$((fail + 1))
}
show() { # file...: the last lines, indented
	for f in "$@"; do tail -n 5 "$f" | sed "s|^|    $(basename "$f"): |"; done
}

# pair NAME CHECK [env...] -- ARGS...: a server and a client (the client adds 127.0.0.1), both
# with --json; CHECK is the python check of the client's JSON (reads `j`, argv[2] = iters).
pair() {
	local name=$1 check=$2
	shift 2
	local envs=()
	while [ "$1" != "--" ]; do
		envs+=("$1")
		shift
	done
	shift
	port=$((port + 1))
	env "${envs[@]}" timeout 40 "${fl[@]}" "$@" --timeout 5 -p $port --json "$tmp/s.json" \
		>"$tmp/s.out" 2>&1 &
	local s=$!
	pids+=("$s")
	env "${envs[@]}" timeout 40 "${fl[@]}" "$@" --timeout 5 -p $port --json "$tmp/c.json" \
		127.0.0.1 >"$tmp/c.out" 2>&1
	local crc=$?
	wait "$s"
	local src=$?
	if [ $crc -ne 0 ] || [ $src -ne 0 ]; then
		bad "$name: exit status client $crc, server $src"
		show "$tmp/c.out" "$tmp/s.out"
		return
	fi
	if ! python3 - "$tmp/c.json" "$tmp/s.json" <<EOF >"$tmp/py.out" 2>&1; then
import json, sys
j = json.load(open(sys.argv[1]))
s = json.load(open(sys.argv[2]))
assert "error" not in j and "error" not in s, "error in the JSON"
$check
EOF
		bad "$name: JSON check"
		show "$tmp/py.out"
		sed 's/^/    c.json: /' "$tmp/c.json" | cut -c1-200 | head -20
		return
	fi
	pass=$((pass + 1))
	echo "ok   $name ($(grep -Eo '"(t_typical|BW_average|p50_ms)": [0-9.]+' "$tmp/c.json" |
		head -1))"
}

lat_check='
assert j["tool"] == "softrdma floor" and j["latency"] == "round trip" and j["unit"] == "usec"
r = j["results"][0]
assert r["MsgSize"] == 100 and r["n_iterations"] == 2000, r
for k in ("t_min", "t_max", "t_typical", "t_avg", "percentile_99", "percentile_99.9",
          "cpu_client_us", "cpu_server_us"):
    assert r[k] > 0, k
assert r["t_min"] <= r["t_typical"] <= r["percentile_99"] <= r["percentile_99.9"] <= r["t_max"]
assert r["t_stdev"] >= 0 and r["resends"] >= 0
c = r["cdf"]
# jitter = p99 - p50, both nearest-rank (stats_jitter): p50 is the CDF at 0.5, which can differ
# from t_typical, the median (the mean of the two middle samples of an even count)
assert c[50][1] == 0.5 and abs(r["jitter"] - (r["percentile_99"] - c[50][0])) < 0.02, r["jitter"]
assert len(c) == 100 + 7 + 1 and c[-1][1] == 1.0 and abs(c[-1][0] - r["t_max"]) < 0.01
assert all(a[0] <= b[0] and a[1] < b[1] for a, b in zip(c, c[1:])), "cdf not ascending"
'
bw_check='
assert j["tool"] == "softrdma floor"
r = j["results"][0]
assert r["MsgSize"] == 65536, r
for k in ("n_iterations", "BW_average", "gbps", "MsgRate", "cpu_client_us", "cpu_server_us"):
    assert r[k] > 0, k
assert abs(r["gbps"] - r["BW_average"] * 1048576 * 8 / 1e9) < 0.01 * r["gbps"] + 0.002
'
setup_check='
assert j["tool"] == "softrdma setup" and j["unit"] == "ms" and j["samples"] == 10, j
assert 0 < j["min_ms"] <= j["p50_ms"] <= j["p90_ms"] <= j["max_ms"], j
assert j["min_ms"] <= j["mean_ms"] <= j["max_ms"], j
'

pair "udp-lat" "$lat_check" -- --floor udp-lat -n 2000 --cdf
pair "tcp-lat" "$lat_check" -- --floor tcp-lat -n 2000 --cdf
pair "udp-bw -n" "$bw_check
assert j['mode'] == 'udp-bw' and 0 <= r['loss_ratio'] < 1
assert r['datagrams_sent'] == 3000 * 16 and r['n_iterations'] <= 3000" -- --floor udp-bw -n 3000
pair "tcp-bw -n" "$bw_check
assert j['mode'] == 'tcp-bw' and r['n_iterations'] == 3000 and 'loss_ratio' not in r" \
	-- --floor tcp-bw -n 3000
pair "tcp-bw -D" "$bw_check" -- --floor tcp-bw -D 0.3
pair "setup --tcp" "$setup_check
assert j['transport'] == 'tcp'" -- --setup --tcp -n 10
for t in roce iwarp; do
	pair "setup rdma_cm $t" "$setup_check
assert j['transport'] == 'rdma_cm' and j['device'] == '${t}_lo', j" SOFTRDMA_TRANSPORT=$t -- \
		--setup -n 10
done

# ---- bad options: exit 2 and a message ----
for args in "--floor" "--floor udp-ping" "--floor udp-lat -s 0" "--floor udp-lat -s 70000" \
	"--floor tcp-lat -n 5 -D 1" "--floor udp-bw --cdf" "--floor tcp-bw --bogus" \
	"--floor udp-lat -p 70000" "--floor udp-lat --timeout x" "--floor udp-lat -n" \
	"--floor tcp-lat --server 127.0.0.1" "--setup --cdf" "--setup -s 5" "--setup a b"; do
	# shellcheck disable=SC2086 # the words are the arguments
	timeout 10 "${fl[@]}" $args >"$tmp/o" 2>"$tmp/e"
	rc=$?
	if [ $rc -ne 2 ] || ! [ -s "$tmp/e" ]; then
		bad "'$args': exit status $rc (want 2 and a message)"
		show "$tmp/e"
	else
		pass=$((pass + 1))
	fi
done

# ---- nobody there: exit 1 within --timeout 1 plus slack, the JSON carries the error ----
alone() { # name want-regex args...
	local name=$1 want=$2
	shift 2
	port=$((port + 1))
	local t0=$SECONDS
	timeout 20 "${fl[@]}" "$@" --timeout 1 -p $port --json "$tmp/a.json" >"$tmp/o" 2>"$tmp/e"
	local rc=$? took=$((SECONDS - t0))
	if [ $rc -ne 1 ] || [ $took -gt 4 ]; then
		bad "$name: exit status $rc after ${took}s (want 1 within 1 s + slack)"
		show "$tmp/e"
	elif ! grep -Eq "$want" "$tmp/e" || ! grep -q '"error"' "$tmp/a.json"; then
		bad "$name: no /$want/ or no \"error\" in the JSON"
		show "$tmp/e" "$tmp/a.json"
	else
		pass=$((pass + 1))
	fi
}
for m in udp-lat tcp-lat udp-bw tcp-bw; do
	alone "$m client, no server" "no answer from the server|cannot connect" --floor $m 127.0.0.1
	alone "$m server, no client" "no client" --floor $m
done
alone "setup --tcp client, no server" "cannot connect" --setup --tcp 127.0.0.1
alone "setup rdma_cm client, no server" "refused|REJECTED" --setup 127.0.0.1
alone "setup rdma_cm server, no client" "no client" --setup

# ---- a client that vanishes mid-run: the server says so (exit 1), no hang ----
port=$((port + 1))
timeout 20 "${fl[@]}" --floor udp-lat --timeout 1 -p $port >"$tmp/o" 2>"$tmp/e" &
s=$!
pids+=("$s")
timeout 20 "${fl[@]}" --floor udp-lat -D 10 -p $port 127.0.0.1 >/dev/null 2>&1 &
c=$!
pids+=("$c")
sleep 0.5
kill -TERM "$c"
wait "$c"
crc=$?
wait "$s"
src=$?
if [ $crc -ne 143 ] || [ $src -ne 1 ] || ! grep -q "the client vanished" "$tmp/e"; then
	bad "vanishing client: client $crc (want 143), server $src (want 1)"
	show "$tmp/e"
else
	pass=$((pass + 1))
fi

echo "test_floor: $pass passed, $fail failed in $((SECONDS - t_start)) s"
[ $fail -eq 0 ]
