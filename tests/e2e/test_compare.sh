#!/usr/bin/env bash
# `softrdma compare --quick` end to end on loopback: exit 0, every section of the JSON result
# measured for every transport with sane figures, the HTML report written with its plots, the
# terminal table and summary printed; bad usage exits 2; SIGINT stops a run promptly with exit
# 130, leaving no process and no network namespace behind; the two-host mode (--server and a
# client naming it, both on this host).
set -u
build=${1:?build directory}
sr=$build/softrdma
[ -x "$sr" ] || { echo "FAIL: $sr missing (build first)"; exit 1; }
if grep -q "SOFTRDMA_SANITIZE:BOOL=ON" "$build/CMakeCache.txt" 2>/dev/null; then
	export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
fi
dir=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
fail=0
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }
port=$((20000 + RANDOM % 9000)) # + up to 2500: below the ephemeral range (32768-)

# Usage errors: exit 2 with a message; --help: exit 0.
for args in "--bogus" "-n abc" "-D 0" "-p 80" "host1 host2" "--server 127.0.0.1" "--json"; do
	# shellcheck disable=SC2086
	"$sr" compare $args >"$dir/out" 2>&1
	rc=$?
	[ $rc -eq 2 ] || bad "compare $args: exit $rc, expected 2"
	grep -q "softrdma compare:" "$dir/out" || bad "compare $args: no message"
done
"$sr" compare --help >"$dir/out" 2>&1 || bad "compare --help: exit $?"
grep -q "usage: softrdma compare" "$dir/out" || bad "compare --help: no usage"
echo "ok   usage errors exit 2, --help exits 0"
# A server that is not there: exit 1 with the reason, within the timeout.
t0=$(date +%s)
"$sr" compare --timeout 1 -p "$port" 127.0.0.1 >"$dir/out" 2>&1
rc=$?
[ $rc -eq 1 ] || bad "no server: exit $rc, expected 1"
grep -q "cannot connect to 127.0.0.1 port $port within 1 s" "$dir/out" || bad "no server: $(cat "$dir/out")"
[ $(($(date +%s) - t0)) -le 5 ] || bad "no server: took too long"
echo "ok   no server: exit 1 with the reason"

# The quick run.
t0=$(date +%s)
timeout 600 "$sr" compare --quick -p "$port" --json "$dir/c.json" --html "$dir/c.html" \
	>"$dir/table" 2>"$dir/progress"
rc=$?
echo "quick run: exit $rc in $(($(date +%s) - t0)) s"
cat "$dir/table"
[ $rc -eq 0 ] || { bad "compare --quick: exit $rc"; tail -20 "$dir/progress"; }
grep -q "^Latency, 100 B round trip" "$dir/table" || bad "no latency table"
grep -q "^Summary:" "$dir/table" || bad "no summary"
grep -q "\[ *1/" "$dir/progress" || bad "no progress display"
python3 - "$dir/c.json" <<'EOF' || bad "the JSON result is not complete and sane"
import json, sys
d = json.load(open(sys.argv[1]))
errs = []
def check(cond, what):
    if not cond:
        errs.append(what)
check(d["tool"] == "softrdma compare" and d["schema"] == 1, "header")
ids = [t["id"] for t in d["transports"]]
check(ids == ["roce", "iwarp", "udp", "tcp"], "transports")
lat = {s["transport"]: s for s in d["latency"]["series"]}
for t in ids:
    s = lat.get(t, {})
    check("error" not in s, f"latency {t}: {s.get('error')}")
    if "error" in s or not s:
        continue
    check(0 < s["min_us"] <= s["p50_us"] <= s["p99_us"] <= s["p999_us"] <= s["max_us"], f"latency {t} order")
    check(abs(s["jitter_us"] - (s["p99_us"] - s["p50_us"])) < 0.01, f"latency {t} jitter")
    cdf = s["cdf"]
    check(len(cdf) > 50 and all(a[0] <= b[0] and a[1] <= b[1] for a, b in zip(cdf, cdf[1:])), f"cdf {t}")
bw = {s["transport"]: s["points"] for s in d["bandwidth"]["series"]}
for t in ids:
    pts = bw.get(t, [])
    check(len(pts) == 4, f"bandwidth {t}: {len(pts)} sizes")
    for p in pts:
        check("error" not in p and p.get("gbps", 0) > 0 and p.get("mpps", 0) > 0, f"bandwidth {t} {p}")
cpu = d["cpu"]["series"]
check(len(cpu) >= 6, f"cpu rows {len(cpu)}")
for r in cpu:
    check(r["client_us_per_msg"] > 0, f"cpu {r}")
setup = {s["transport"]: s for s in d["setup"]["series"]}
for t in ["roce", "iwarp", "tcp"]:
    s = setup.get(t, {})
    check("error" not in s and s.get("p50_ms", 0) > 0, f"setup {t}: {s}")
loss = d["loss"]
check("skipped" in loss or len(loss["series"]) >= 1, "loss")
if "series" in loss:
    for s in loss["series"]:
        pts = s["points"]
        check(len(pts) == 4 and [p["loss_pct"] for p in pts] == [0, 0.01, 0.1, 1], f"loss {s['transport']} points")
        check("error" not in pts[0] and pts[0]["gbps"] > 0, f"loss {s['transport']} at 0 %: {pts[0]}")
check(len(d["summary"]) >= 3 and all(len(x) > 20 for x in d["summary"]), "summary")
check(d["errors"] == [], f"errors: {d['errors']}")
for e in errs:
    print("  -", e)
print(f"  JSON: {len(lat)} latency series, {sum(len(p) for p in bw.values())} bandwidth points, "
      f"{len(cpu)} CPU rows, {len(setup)} set-up series, loss: {'skipped' if 'skipped' in loss else len(loss['series'])} series")
sys.exit(1 if errs else 0)
EOF
for id in plot-latency-cdf plot-bandwidth plot-loss table-latency table-bandwidth; do
	grep -q "id=\"$id\"" "$dir/c.html" || bad "the report has no $id"
done
echo "ok   the report has its plots and tables ($(wc -c <"$dir/c.html") bytes)"

# SIGINT mid-run: exit 130 within seconds, no children left, no namespace left.
setsid "$sr" compare --quick -q -p $((port + 1000)) --json "$dir/i.json" --html "$dir/i.html" \
	>"$dir/int.out" 2>&1 &
pid=$!
sleep 3
sid=$pid
kill -INT "$pid"
t0=$(date +%s%N)
wait "$pid"
rc=$?
pid=
ms=$((($(date +%s%N) - t0) / 1000000))
[ $rc -eq 130 ] || bad "SIGINT: exit $rc, expected 130"
[ $ms -lt 10000 ] || bad "SIGINT: took $ms ms"
sleep 0.5
left=$(pgrep -s "$sid" | tr '\n' ' ')
[ -z "$left" ] || { bad "processes left after SIGINT: $left"; kill $left 2>/dev/null; }
[ ! -e "$dir/i.json" ] || bad "an interrupted run wrote a result"
if ip netns list 2>/dev/null | grep -q "srlink$sid"; then
	bad "network namespace left after SIGINT"
fi
echo "ok   SIGINT: exit $rc after $ms ms, nothing left behind"

# Two hosts, both on this one: `compare --server` and a client naming it. The server refuses
# garbage and survives it, notices a client that vanishes (and ends its measurement), serves
# the next one, and stops on SIGINT with exit 130.
sport=$((port + 2000))
"$sr" compare --server -p "$sport" >"$dir/server.log" 2>&1 &
spid=$!
sleep 0.5
exec 3<>"/dev/tcp/127.0.0.1/$sport"
echo "GARBAGE" >&3
read -r -t 5 reply <&3
exec 3>&-
[ "$reply" = "ERR unknown command" ] || bad "--server: garbage got '$reply'"
"$sr" compare --quick --no-loss -q -p "$sport" --json "$dir/v.json" --html "$dir/v.html" \
	127.0.0.1 >"$dir/vanish.out" 2>&1 &
vpid=$!
sleep 2.5
kill -9 "$vpid"
wait "$vpid" 2>/dev/null
for _ in $(seq 50); do
	grep -q ": left" "$dir/server.log" && [ -z "$(pgrep -P "$spid")" ] && break
	sleep 0.2
done
grep -q ": left" "$dir/server.log" || bad "--server: a vanished client was not noticed"
[ -z "$(pgrep -P "$spid")" ] || bad "--server: a measurement outlived its client"
timeout 300 "$sr" compare --quick --no-loss -p "$sport" --json "$dir/r.json" --html "$dir/r.html" \
	127.0.0.1 >"$dir/remote.out" 2>"$dir/remote.err"
rc=$?
[ $rc -eq 0 ] || { bad "two hosts: exit $rc"; tail -n 5 "$dir/remote.err" "$dir/remote.out"; }
python3 - "$dir/r.json" <<'EOF2' || bad "two hosts: the JSON result is not complete"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["mode"] == "two hosts" and d["server"] == "127.0.0.1"
assert all(t.get("server_device") == t.get("device") for t in d["transports"] if t["kind"] == "rdma")
assert len([s for s in d["latency"]["series"] if "p50_us" in s]) == 4
assert all(len(s["points"]) == 4 for s in d["bandwidth"]["series"])
assert "skipped" in d["loss"] and d["errors"] == []
EOF2
kill -INT "$spid"
wait "$spid"
rc=$?
[ $rc -eq 130 ] || bad "--server: SIGINT gave exit $rc"
grep -q "running softrdma lat -d roce_lo" "$dir/server.log" || bad "--server: no log of its runs"
echo "ok   two hosts (--server on this host): garbage refused, a vanished client noticed, a run" \
	"served, SIGINT ends it"

[ $fail -eq 0 ] && echo "PASS" || echo "$fail failures"
[ $fail -eq 0 ]
