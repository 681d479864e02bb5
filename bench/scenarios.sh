#!/usr/bin/env bash
# The full sweep of softrdma's fabric scenarios (softrdma compare --scenario, src/tools/scenario.c),
# long and separate from the tests (CI runs tests/e2e/test_scenario.sh: one second per row):
#   incast with 2 and with 4 senders, victim with 2 senders, loss at 0.1 %, 1 % and 5 %,
# each row (fabric configuration) for --seconds, each scenario's JSON into the output directory
# with its terminal table and log, then one HTML page of them all (softrdma report).
# Needs root (network namespaces, TUN devices) and a built softrdma.
set -u
usage() {
	cat <<'TXT'
Usage: bench/scenarios.sh [--seconds S] [--out DIR]

Runs every fabric scenario of `softrdma compare --scenario` (incast with 2 and 4 senders,
victim with 2, loss at 0.1 %, 1 % and 5 %) and writes, into DIR:
  NAME.json   the result (the format is documented in src/tools/report.h)
  NAME.txt    the terminal table, the summary and the progress
  report.html one page of all of them (softrdma report)
  --seconds S  traffic time of each row (default 10; 24 rows in all, each S plus a few
               seconds of set-up: about 6 minutes at the default)
  --out DIR    where the files go (default results/scenarios-<UTC time> in the repository)
  -h, --help   this text
Uses ./build/softrdma, or $SOFTRDMA_BIN. Needs root. Exit status: 0 every row measured,
1 some were not (their errors are in the report), 2 bad usage.
TXT
}
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=10 out=""
while [ $# -gt 0 ]; do
	case "$1" in
	--seconds)
		[ $# -ge 2 ] || { echo "scenarios.sh: --seconds needs a number" >&2; exit 2; }
		seconds=$2; shift 2 ;;
	--out)
		if [ $# -lt 2 ] || [ -z "$2" ]; then
			echo "scenarios.sh: --out needs a directory" >&2
			exit 2
		fi
		out=$2; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	*) echo "scenarios.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
	esac
done
if ! [[ $seconds =~ ^[0-9]+([.][0-9]+)?$ ]] ||
	! awk -v s="$seconds" 'BEGIN { exit !(s >= 0.2 && s <= 600) }'; then
	echo "scenarios.sh: bad --seconds '$seconds' (0.2 to 600)" >&2
	exit 2
fi
if [ "$(id -u)" != 0 ]; then
	echo "scenarios.sh: needs root (network namespaces, TUN devices for the switch): run it" \
		"with sudo" >&2
	exit 1
fi
bin=${SOFTRDMA_BIN:-$root/build/softrdma}
if [ ! -x "$bin" ]; then
	echo "scenarios.sh: no softrdma at $bin: build it (cmake -S . -B build && cmake --build" \
		"build) or set SOFTRDMA_BIN" >&2
	exit 1
fi
[ -n "$out" ] || out=$root/results/scenarios-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out" || { echo "scenarios.sh: cannot make $out" >&2; exit 1; }

# name, rows, arguments
runs=(
	"incast-2 5 --scenario incast --senders 2"
	"incast-4 5 --scenario incast --senders 4"
	"victim-2 5 --scenario victim --senders 2"
	"loss-0.1pct 3 --scenario loss --loss 0.1%"
	"loss-1pct 3 --scenario loss --loss 1%"
	"loss-5pct 3 --scenario loss --loss 5%"
)
# The progress lines ("[2/5] RoCEv2, PFC, 10 s...") and rows not measured that softrdma wrote
# to file $1 since the last call.
shown=0
show_new() {
	local n
	[ -f "$1" ] || return 0 # not yet made by the job just started
	n=$(wc -l <"$1")
	if [ "$n" -gt "$shown" ]; then
		sed -n "$((shown + 1)),${n}p" "$1" | grep -E '^\[[0-9]+/[0-9]+\]|not measured' |
			sed 's/^/    /'
		shown=$n
	fi
}
# ^C: softrdma (in the background, where the shell's SIGINT does not reach it) is told, and
# removes its namespaces and devices before it exits; the sweep stops there.
stopped=0 pid=""
trap 'stopped=1; [ -z "$pid" ] || kill -INT "$pid" 2>/dev/null' INT TERM
status=0
jsons=()
start=$(date +%s)
for i in "${!runs[@]}"; do
	[ $stopped = 0 ] || break
	read -r name rows args <<<"${runs[$i]}"
	# Each row: the traffic, then up to 40 s for the programs to finish, and the switch.
	limit=$(awk -v s="$seconds" -v r="$rows" 'BEGIN { printf "%d", r * (s + 60) + 60 }')
	echo "[$((i + 1))/${#runs[@]}] $name: softrdma compare $args --seconds $seconds" \
		"($rows rows, at most ${limit} s)"
	rm -f "$out/$name.json"
	# shellcheck disable=SC2086
	timeout -s INT -k 30 "$limit" "$bin" compare $args --seconds "$seconds" \
		--json "$out/$name.json" >"$out/$name.txt" 2>&1 &
	pid=$! shown=0
	while kill -0 "$pid" 2>/dev/null; do
		show_new "$out/$name.txt"
		sleep 1
	done
	wait "$pid"
	rc=$?
	pid=""
	show_new "$out/$name.txt"
	if [ $rc -ne 0 ]; then
		status=1
		echo "    exit status $rc (see $out/$name.txt)"
	fi
	if [ -s "$out/$name.json" ]; then
		jsons+=("$out/$name.json")
	else
		echo "    no result written"
	fi
done
if [ $stopped = 1 ]; then
	echo "scenarios.sh: interrupted; the results so far are in $out"
	status=1
fi
if [ ${#jsons[@]} -gt 0 ]; then
	if timeout 60 "$bin" report "${jsons[@]}" -o "$out/report.html" 2>"$out/report.err"; then
		rm -f "$out/report.err"
	else
		echo "scenarios.sh: the report failed: $(cat "$out/report.err")" >&2
		status=1
	fi
fi
echo "done in $(($(date +%s) - start)) s: ${#jsons[@]} of ${#runs[@]} results in $out"
[ -f "$out/report.html" ] && echo "report: $out/report.html"
exit $status
