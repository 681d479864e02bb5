#!/usr/bin/env bash
# Fuzz smoke test: builds every fuzz/fuzz_*.c as a libFuzzer target (clang, ASan + UBSan,
# UB aborts) linked with src/wire/**/*.c, src/util/*.c and the sans-I/O MPA handshake machine
# src/engine/iw_conn.c (which needs only src/wire), the tools' JSON parser, HTML report and
# compare control protocol, and runs each for 15 seconds.
# Fails on any crash, sanitizer report, leak, timeout or out-of-memory; skips (exit 77) when
# clang with libFuzzer is not available. Usage: test_fuzz_smoke.sh [build-dir (unused)]
# Environment: FUZZ_CC (default clang), FUZZ_SECONDS (default 15).
set -u
cd "$(dirname "$0")/../.." || exit 1
cc=${FUZZ_CC:-clang}
secs=${FUZZ_SECONDS:-15}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/softrdma-fuzz.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

# libFuzzer present? (Debian: clang + libclang-rt-dev / the compiler-rt that comes with clang)
printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' \
	>"$tmp/probe.c"
if ! command -v "$cc" >/dev/null 2>&1 ||
	! "$cc" -fsanitize=fuzzer,address,undefined "$tmp/probe.c" -o "$tmp/probe" >/dev/null 2>&1; then
	echo "SKIP: $cc with libFuzzer (-fsanitize=fuzzer) not available"
	exit 77
fi

shopt -s nullglob globstar
targets=(fuzz/fuzz_*.c)
# and what reads untrusted input in the tools: a result file (`softrdma report`), the control
# protocol of `compare --server`.
libsrc=(src/wire/**/*.c src/util/*.c src/engine/iw_conn.c src/tools/json.c src/tools/report.c
	src/tools/util.c src/tools/compare_remote.c)
if [ ${#targets[@]} -eq 0 ]; then
	echo "no fuzz/fuzz_*.c targets"
	exit 1
fi

flags=(-g -O1 -fno-omit-frame-pointer -fno-sanitize-recover=all -Isrc -Iinclude)
# The library, instrumented for coverage, as an archive: each target pulls what it uses.
mkdir -p "$tmp/obj"
i=0
for src in "${libsrc[@]}"; do
	i=$((i + 1))
	if ! "$cc" "${flags[@]}" -fsanitize=fuzzer-no-link,address,undefined -c "$src" \
		-o "$tmp/obj/$i.o" 2>"$tmp/cc.log"; then
		echo "FAIL: cannot compile $src:"
		cat "$tmp/cc.log"
		exit 1
	fi
done
ar rcs "$tmp/libsoftrdma_fuzz.a" "$tmp"/obj/*.o || exit 1

# Seeds: valid inputs so that a few seconds reach deep states (iwarp.md 2.5 and 6.5 vectors).
hexfile() { # file, hex...
	local f=$1
	shift
	printf '%s' "$*" | tr -d ' \n' | sed 's/../\\x&/g' | xargs -0 printf '%b' >"$f"
}
seed() { # target-name, seed-name, hex
	mkdir -p "$tmp/corpus/$1"
	hexfile "$tmp/corpus/$1/$2" "$3"
}
w='001b c140 00001234 00007f0000001000 48656c6c6f2c20695741525021 000000 c49234ca'
s='0022 4143 00000000 00000000 00000001 00000000 73656e642d7061796c6f61642d313621 448d5700'
t='002a 4147 00000000 00000002 00000001 00000000 1201c000 0010 4143 00000000 00000005 00000007 00000000 e63f5369'
r='002e 4141 00000000 00000001 00000001 00000000 00005678 00007f0000002000 00000040 00001234 00007f0000001000 00000000'
seed fuzz_iw_stream crc "01 0000 02 05 40 $w $s $t"
seed fuzz_iw_stream nocrc "00 ffff 00 $r $s"
seed fuzz_mpa req1 "01 4d504120494420526571204672616d65 40 01 0008 636c69656e742121 $w"
seed fuzz_mpa req2 "01 4d504120494420526571204672616d65 10 02 000c 0010 0010 636c69656e742121"
seed fuzz_mpa rep2p2p "02 4d504120494420526570204672616d65 50 02 0004 8001 8001 $s"
# fuzz_iw_conn: byte 0 mode, 13 configuration bytes per machine (see the target's header), then
# pair mode: corruption (4) + chunk sizes; single mode: time step + chunk sizes + the peer's stream
ci='00 00 10 10 00 00 0008 00 00 0000 00' # initiator: Rev 2, IRD/ORD 16, 8 bytes of pd
cr='00 00 00 00 00 00 0000 10 10 0004 00' # responder: accepts with IRD/ORD 16, 4 bytes of pd
ip='10 02 10 10 00 00 0000 00 00 0000 00' # initiator: P2P offering a Read RTR
rp='04 02 00 00 00 00 0000 10 10 0000 00' # responder: CRC required, accepts Read RTRs
rtr='002e 4141 00000000 00000001 00000001 00000000 00000000 0000000000000000 00000000 00000001 0000000000000000 ba10e3c9'
seed fuzz_iw_conn pair "01 $ci $cr 00000000 02 0600"
seed fuzz_iw_conn pair_p2p_read "01 $ip $rp 00000000 02 0600"
seed fuzz_iw_conn resp_siw "04 00 00 00 00 00 00 0000 80 80 0000 00 00 00 4d504120494420526571204672616d65 10 02 0004 00000000 $s"
seed fuzz_iw_conn init_siw_crc "00 04 00 80 80 00 00 0000 00 00 0000 00 00 00 4d504120494420526570204672616d65 50 02 0004 00010001 $s"
seed fuzz_iw_conn resp_p2p_read "04 $rp 00 00 4d504120494420526571204672616d65 10 02 0004 8010 4010 $rtr"
# fuzz_cm_mad: rxe's REQ (rxe_rdmacm_rping.pcap frame 3), a SIDR_REP (udaddy) and a REJ with ARI
z() { printf "%0$(($1 * 2))d" 0; } # n zero bytes, as hex
mad='01070203 00000000 00000002 0c6a8a74'
seed fuzz_cm_mad req "$mad 00100000 00000000 748a6a0c 00000000 0000000001061c06 505400fffe770011 $(z 8) 00005001 00000001 000000a0 d3af94a7 ffff37f0 ffffffff $(z 10) ffff0a4d000b $(z 10) ffff0a4d000c 0326c000 00400098 $(z 44) 004084da $(z 12) 0a4d000b $(z 12) 0a4d000c $(z 56)"
seed fuzz_cm_mad sidr_rep "$mad 00180000 00000000 778a6a0c 00000000 00004c00 0000000001111c06 01234567 $(z 208)"
seed fuzz_cm_mad rej "$mad 00120000 00000000 9396b1f8 748a6a0c 0020 001c 0123456789abcdef $(z 212)"
# fuzz_compare_ctl: sessions as a client speaks them; fuzz_report: a small result of every kind,
# and a scenario result (softrdma compare --scenario; one row not measured)
tseed() { # target-name, seed-name, text
	mkdir -p "$tmp/corpus/$1"
	printf '%b' "$3" >"$tmp/corpus/$1/$2"
}
tseed fuzz_compare_ctl session 'HELLO 2 0123456789abcdef\nSTART lat - 0 0 18601 0 10\nWAIT 12.5\nSTART floor udp-lat 0 0 18602 0 10\nSTART setup - 1 0 18603 20 10\nSTART setup - 0 1 18604 5 10\nBYE\n'
tseed fuzz_report result '{"tool":"softrdma compare","schema":1,"started":"2026-12-02T19:30:00Z","duration_s":95.2,"host":{"name":"box","kernel":"6.1","cpus":2,"cpu_model":"x"},"mode":"loopback","quick":true,"server":"127.0.0.1","transports":[{"id":"roce","label":"RoCEv2","kind":"rdma","device":"roce_lo"},{"id":"tcp","label":"TCP (floor)","kind":"floor"}],"latency":{"size":100,"what":"rt","series":[{"transport":"roce","samples":3,"min_us":12.1,"p50_us":16.3,"p90_us":20.0,"p99_us":80.2,"p999_us":190.4,"max_us":900.0,"mean_us":18.0,"stdev_us":9.5,"jitter_us":63.9,"cdf":[[12.1,0.0],[16.3,0.5],[900.0,1.0]]},{"transport":"tcp","error":"<b>x</b>"}]},"bandwidth":{"what":"w","series":[{"transport":"roce","points":[{"size":8,"gbps":0.05,"mpps":0.8},{"size":65536,"error":"e"}]}]},"cpu":{"what":"c","series":[{"transport":"roce","test":"latency 100 B","client_us_per_msg":9.8,"server_us_per_msg":9.7}]},"setup":{"series":[{"transport":"roce","p50_ms":0.3}]},"loss":{"skipped":"needs root"},"summary":["a \\u00e9 \\"q\\""],"errors":[]}'

tseed fuzz_report scenario '{"tool":"softrdma compare --scenario","schema":1,"started":"2026-12-07T17:08:17Z","duration_s":19,"scenario":"loss","senders":1,"rate_bps":200000000,"seconds":5,"message_bytes":65536,"probe_bytes":100,"loss":0.01,"rows":[{"id":"roce","label":"RoCEv2, go-back-N","ok":true,"throughput_gbps":0.165891,"shares_gbps":[0.165891],"app_shares_gbps":[0.083634],"jain":1.0,"goodput_gbps":0.083634,"lost":340,"probe_p50_us":640.98,"probe_p99_us":70834.06,"drops":0,"marks":0,"cnps":0,"pauses":0,"pause_ms":0.0,"queue_max_kib":40.7,"resent":14956,"sr_resent":0,"sacks":0},{"id":"roce_sr","label":"RoCEv2, selective repeat","ok":false,"error":"<script>x</script>"},{"id":"iwarp","label":"iWARP","ok":true,"throughput_gbps":0.19,"shares_gbps":[0.19],"app_shares_gbps":[0.19],"jain":1.0,"goodput_gbps":0.19,"lost":232,"probe_p50_us":717.0,"probe_p99_us":209690.0,"drops":0,"marks":12,"cnps":0,"pauses":0,"pause_ms":0.0,"queue_max_kib":400.0}]}'
fail=0
for src in "${targets[@]}"; do
	name=$(basename "$src" .c)
	bin="$tmp/$name"
	if ! "$cc" "${flags[@]}" -fsanitize=fuzzer,address,undefined "$src" "$tmp/libsoftrdma_fuzz.a" \
		-o "$bin" -pthread 2>"$tmp/cc.log"; then
		echo "FAIL: cannot build $src:"
		cat "$tmp/cc.log"
		fail=1
		continue
	fi
	mkdir -p "$tmp/corpus/$name" "$tmp/artifacts"
	echo "== $name: ${secs}s"
	if ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:quarantine_size_mb=64 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2560 -print_final_stats=1 \
		-artifact_prefix="$tmp/artifacts/$name-" "$tmp/corpus/$name" >"$tmp/$name.log" 2>&1; then
		grep -E '^stat::(number_of_executed_units|new_units_added|peak_rss_mb)' "$tmp/$name.log"
		grep -E '^#[0-9]+[[:space:]]+DONE' "$tmp/$name.log" | tail -1 | sed 's/ *lim:.*//'
	else
		echo "FAIL: $name crashed; log tail:"
		tail -40 "$tmp/$name.log"
		for a in "$tmp/artifacts/$name-"*; do
			echo "reproducer ($a), base64:"
			base64 -w0 "$a"
			echo
		done
		fail=1
	fi
done
exit $fail
