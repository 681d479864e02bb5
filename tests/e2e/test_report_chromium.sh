#!/usr/bin/env bash
# `softrdma report` (src/tools/report.c) in a real browser: the page made from
# tests/data/compare_sample.json is loaded in headless Chromium and must
#   - log nothing to the console (a control page with a deliberate error proves that console
#     messages are seen at all),
#   - have, in the DOM Chromium built, the three plots (plot-latency-cdf, plot-bandwidth,
#     plot-loss) with one series per transport and a polyline point per data point, the five
#     data tables with their rows, and no <script> element,
#   - render: a screenshot of the page is large with many colours, and a screenshot of the three
#     plots alone shows every transport's colour.
# Chromium runs in its own session (setsid) with a private profile and HOME under a temporary
# directory, bounded in time; its whole process group is killed afterwards, nothing else.
# Usage: test_report_chromium.sh BUILD_DIR   (the binary is BUILD_DIR/softrdma)
# Exit 77 (skip) without /usr/bin/chromium or python3.
set -u
build=${1:?build directory}
src=$(cd "$(dirname "$0")/../.." && pwd)
sr=$build/softrdma
chromium=/usr/bin/chromium
[ -x "$chromium" ] || { echo "SKIP: $chromium not installed (Debian package chromium)"; exit 77; }
command -v python3 >/dev/null || { echo "SKIP: python3 not installed"; exit 77; }
[ -x "$sr" ] || { echo "FAIL: $sr not built"; exit 1; }
tmp=$(mktemp -d)
pgids=()
cleanup() {
	for g in "${pgids[@]}"; do kill -KILL -- "-$g" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT
fail=0
t_start=$SECONDS
bad() {
	echo "FAIL $*"
	fail=$((fail + 1))
}

# chrome NAME WxH ARGS...: runs Chromium headless with a WxH window on ARGS (the last is the
# URL), stdout in $tmp/NAME.out and stderr in $tmp/NAME.err; at most 90 s. Returns its exit
# status.
chrome() {
	local name=$1 size=$2
	shift 2
	mkdir -p "$tmp/home"
	# setsid: Chromium and its zygote, GPU and renderer processes form one process group
	# whose id is the pid we start (we are not a group leader, so setsid does not fork).
	HOME=$tmp/home XDG_CONFIG_HOME=$tmp/home XDG_CACHE_HOME=$tmp/home \
		setsid "$chromium" --headless=new --no-sandbox --disable-gpu --no-first-run \
		--user-data-dir="$tmp/prof-$name" --enable-logging=stderr --v=0 \
		--window-size="$size" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" </dev/null &
	local pid=$!
	pgids+=("$pid")
	local i
	for ((i = 0; i < 900; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		echo "chromium ($name) still running after 90 s: killing it"
		kill -TERM -- "-$pid" 2>/dev/null
		sleep 1
		kill -KILL -- "-$pid" 2>/dev/null
	fi
	wait "$pid"
	local rc=$?
	# Helpers that outlived the browser process go too (only this group: ours).
	kill -KILL -- "-$pid" 2>/dev/null
	return $rc
}

# Console messages as Chromium logs them with --enable-logging=stderr --v=0:
#   [pid:tid:time:INFO:CONSOLE:1] "message", source: file:///... (1)
console_lines() {
	grep -E ':CONSOLE[:(]|Uncaught|Refused to|Content Security Policy' "$1"
}

# 1. Control: a page with a console error and an uncaught exception must be seen as such,
# otherwise a clean log below would prove nothing.
printf '<!DOCTYPE html><title>control</title><script>console.error("control-error");%s</script>' \
	'no_such_function();' >"$tmp/control.html"
chrome control 800,600 --dump-dom "file://$tmp/control.html"
if ! grep -q 'control-error' "$tmp/control.err" || ! grep -q 'Uncaught' "$tmp/control.err"; then
	bad "control page: Chromium's console messages are not visible in its log; cannot check"
	sed 's/^/    /' "$tmp/control.err" | tail -n 20
fi

# 2. The report.
if ! "$sr" report "$src/tests/data/compare_sample.json" -o "$tmp/r.html" 2>"$tmp/report.err"; then
	bad "softrdma report failed: $(cat "$tmp/report.err")"
	exit 1
fi
chrome dom 1100,2000 --dump-dom "file://$tmp/r.html" || bad "chromium --dump-dom exited with status $?"
if console_lines "$tmp/dom.err" >"$tmp/console.txt"; then
	bad "console messages while loading the report:"
	sed 's/^/    /' "$tmp/console.txt"
fi
[ -s "$tmp/dom.out" ] || bad "chromium dumped no DOM"

# 3. The DOM as Chromium parsed it (python3 standard library only).
python3 - "$tmp/dom.out" <<'EOF' || bad "DOM checks (above)"
import sys
from html.parser import HTMLParser

class Dom(HTMLParser):
    def __init__(self):
        super().__init__()
        self.stack = []          # open elements: (tag, attrs)
        self.svgs = {}           # svg id -> list of series [transport, points, polylines]
        self.tables = {}         # table id -> tbody rows
        self.scripts = 0
        self.cur_svg = None
        self.cur_table = None
        self.in_tbody = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "script":
            self.scripts += 1
        if tag == "svg" and a.get("id"):
            self.cur_svg = a["id"]
            self.svgs[self.cur_svg] = []
        if tag == "g" and self.cur_svg and "series" in (a.get("class") or "").split():
            self.svgs[self.cur_svg].append([a.get("data-transport"), 0, 0])
        if tag == "polyline" and self.cur_svg and self.svgs[self.cur_svg]:
            pts = (a.get("points") or "").split()
            s = self.svgs[self.cur_svg][-1]
            s[1] += len([p for p in pts if p.count(",") == 1])
            s[2] += 1
        if tag == "table" and a.get("id"):
            self.cur_table = a["id"]
            self.tables[self.cur_table] = 0
        if tag == "tbody":
            self.in_tbody = True
        if tag == "tr" and self.cur_table and self.in_tbody:
            self.tables[self.cur_table] += 1

    def handle_endtag(self, tag):
        if tag == "svg":
            self.cur_svg = None
        if tag == "table":
            self.cur_table = None
        if tag == "tbody":
            self.in_tbody = False

d = Dom()
d.feed(open(sys.argv[1], encoding="utf-8").read())
errors = []
def expect(what, got, want):
    if got != want:
        errors.append(f"{what}: got {got!r}, want {want!r}")

ids = ["roce", "iwarp", "udp", "tcp"]
expect("script elements", d.scripts, 0)
expect("plots", sorted(d.svgs), ["plot-bandwidth", "plot-latency-cdf", "plot-loss"])
lat = d.svgs.get("plot-latency-cdf", [])
expect("latency series", [s[0] for s in lat], ids)
expect("latency points", [s[1] for s in lat], [20] * 4)
bw = d.svgs.get("plot-bandwidth", [])
expect("bandwidth series", [s[0] for s in bw], ids)
expect("bandwidth points", [s[1] for s in bw], [11, 10, 11, 11])
loss = d.svgs.get("plot-loss", [])
expect("loss series", [s[0] for s in loss], ["roce", "iwarp", "tcp"])
expect("loss points", [s[1] for s in loss], [4, 5, 5])
expect("tables", {k: v for k, v in d.tables.items() if k != "table-transports"},
       {"table-latency": 4, "table-bandwidth": 11, "table-cpu": 8, "table-setup": 3,
        "table-loss": 5})
for e in errors:
    print("    " + e)
sys.exit(1 if errors else 0)
EOF

# 4. Rendering: the whole page, then the three plots alone (so their colours cannot come from
# the tables' swatches).
python3 - "$tmp/r.html" "$tmp/plots.html" <<'EOF' || bad "could not extract the plots"
import re, sys
page = open(sys.argv[1], encoding="utf-8").read()
style = re.search(r"<style>.*?</style>", page, re.S).group(0)
svgs = re.findall(r"<svg id=\"plot-.*?</svg>", page, re.S)
if len(svgs) != 3:
    sys.exit(1)
open(sys.argv[2], "w", encoding="utf-8").write(
    "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>plots</title>" + style +
    "</head><body style=\"margin:0\">" + "".join(svgs) + "</body></html>")
EOF
chrome shot 1000,2400 --screenshot="$tmp/page.png" "file://$tmp/r.html" || bad "chromium --screenshot failed"
chrome plots 840,1340 --screenshot="$tmp/plots.png" "file://$tmp/plots.html" || bad "chromium plots failed"
for n in shot plots; do
	if console_lines "$tmp/$n.err" >"$tmp/console.txt"; then
		bad "console messages while rendering ($n):"
		sed 's/^/    /' "$tmp/console.txt"
	fi
done

python3 - "$tmp/page.png" "$tmp/plots.png" <<'EOF' || bad "screenshot checks (above)"
import struct, sys, zlib

def decode(path):
    """8-bit RGB/RGBA, non-interlaced PNG -> (width, height, rows of pixel tuples)."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, ihdr = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            ihdr = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    w, h, depth, ctype, _, _, interlace = ihdr
    if depth != 8 or ctype not in (2, 6) or interlace:
        raise ValueError(f"unsupported PNG (depth {depth}, colour type {ctype})")
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(h):
        f = raw[i]
        line = bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pr = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[x] = (line[x] + pr) & 255
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows

def colours(path):
    w, h, bpp, rows = decode(path)
    hist = {}
    for r in rows:
        for x in range(0, len(r), bpp):
            px = r[x:x + 3]
            hist[px] = hist.get(px, 0) + 1
    return w, h, hist

errors = []
palette = {"roce": "0072b2", "iwarp": "d55e00", "udp": "009e73", "tcp": "cc79a7"}
import os
for path, min_bytes in ((sys.argv[1], 60000), (sys.argv[2], 20000)):
    size = os.path.getsize(path)
    w, h, hist = colours(path)
    white = hist.get(b"\xff\xff\xff", 0)
    inked = 1 - white / (w * h)
    print(f"    {os.path.basename(path)}: {w}x{h}, {size} bytes, {len(hist)} colours, "
          f"{inked:.1%} not white")
    if size < min_bytes:
        errors.append(f"{path}: only {size} bytes")
    if len(hist) < 50:
        errors.append(f"{path}: only {len(hist)} distinct colours")
    if inked < 0.02:
        errors.append(f"{path}: almost blank ({inked:.2%} not white)")
    for name, hexc in palette.items():
        n = hist.get(bytes.fromhex(hexc), 0)
        if n < 30:
            errors.append(f"{path}: colour of {name} (#{hexc}) on {n} pixels only")
for e in errors:
    print("    " + e)
sys.exit(1 if errors else 0)
EOF

echo "report in Chromium: $fail failures ($((SECONDS - t_start)) s)"
[ $fail -eq 0 ]
