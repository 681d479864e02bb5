#!/usr/bin/env bash
# `cmake --install` into a temporary prefix P: the CLI in P/bin, libsoftrdma (shared and
# static), softrdma.h and softrdma.pc in the usual places, the drop-in libibverbs.so.1 /
# librdmacm.so.1 in P/lib/softrdma only (never next to the system's libraries); the installed
# `softrdma --version` prints the version, `softrdma run -- ibv_devices` finds the drop-in from
# the installed layout and lists roce_lo, and a small verbs program compiles and links against
# the installed pkg-config file (shared, and statically against libsoftrdma.a) and runs.
# Skips (77) without ibv_devices, pkg-config or a C compiler.
set -u
build=${1:?build directory}
for p in ibv_devices pkg-config cc; do
	command -v "$p" >/dev/null || { echo "SKIP: $p not installed (scripts/install-deps.sh)"; exit 77; }
done
# A sanitizer build's library runs under ASan (preloaded into the programs that load it; not
# into cmake or the compiler: cmake hangs at exit with it).
asan=()
sanitize=()
if grep -q "SOFTRDMA_SANITIZE:BOOL=ON" "$build/CMakeCache.txt" 2>/dev/null; then
	asan=(env LD_PRELOAD="$(gcc -print-file-name=libasan.so)" ASAN_OPTIONS=detect_leaks=0:abort_on_error=1)
	sanitize=(-fsanitize=address,undefined)
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
P=$dir/prefix
fail=0
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }

if ! timeout 120 cmake --install "$build" --prefix "$P" >"$dir/install.log" 2>&1; then
	cat "$dir/install.log"
	echo "FAIL: cmake --install"
	exit 1
fi
# The library directory: lib, or lib/<multiarch> when configured for /usr.
pc=$(find "$P" -name softrdma.pc -path '*/pkgconfig/*' | head -1)
[ -n "$pc" ] || { find "$P" | sed "s|^$P|  P|"; echo "FAIL: no softrdma.pc installed"; exit 1; }
libdir=$(dirname "$(dirname "$pc")")
echo "installed: $(cd "$P" && find . -type f -o -type l | sort | tr '\n' ' ')"
for f in "$P/bin/softrdma" "$libdir/libsoftrdma.so" "$libdir/libsoftrdma.a" \
	"$P/include/softrdma.h" "$libdir/softrdma/libibverbs.so.1" "$libdir/softrdma/librdmacm.so.1"; do
	[ -e "$f" ] || bad "missing ${f#"$P"/}"
done
[ -x "$P/bin/softrdma" ] || bad "bin/softrdma is not executable"
soname=$(readelf -d "$libdir/libsoftrdma.so" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ -e "$libdir/$soname" ] || bad "libsoftrdma's soname '$soname' is not installed"
# The drop-ins stay private: nothing named libibverbs / librdmacm outside lib/softrdma, and
# no development symlink that -libverbs would pick up there either.
stray=$(find "$P" -name 'libibverbs*' -o -name 'librdmacm*' | grep -v "^$libdir/softrdma/")
[ -z "$stray" ] || bad "drop-in libraries outside lib/softrdma: $stray"
[ ! -e "$libdir/softrdma/libibverbs.so" ] || bad "lib/softrdma/libibverbs.so (a link-time name) installed"
# Nothing of the build tree leaks into the installed files' run paths.
for f in "$P/bin/softrdma" "$libdir/libsoftrdma.so" "$libdir/softrdma/librdmacm.so.1"; do
	if readelf -d "$f" 2>/dev/null | grep -E 'R(UN)?PATH' | grep -qF "$build"; then
		bad "${f#"$P"/} has a run path into the build tree"
	fi
done

v=$("${asan[@]}" "$P/bin/softrdma" --version 2>&1)
echo "--version: $v"
[[ $v =~ ^softrdma\ [0-9]+\.[0-9]+\.[0-9]+ ]] || bad "softrdma --version printed '$v'"
[ "$("${asan[@]}" "$P/bin/softrdma" version 2>&1)" = "$v" ] || bad "softrdma version differs from --version"

# softrdma run from the installed prefix: its libdir search finds P/lib/softrdma.
out=$("${asan[@]}" timeout 30 "$P/bin/softrdma" run -v -- ibv_devices 2>&1)
rc=$?
echo "$out" | sed 's/^/  run: /'
[ $rc -eq 0 ] || bad "softrdma run -- ibv_devices exited $rc"
echo "$out" | grep -q "LD_LIBRARY_PATH=$libdir/softrdma" ||
	echo "$out" | grep -q "LD_LIBRARY_PATH=$(readlink -f "$libdir/softrdma")" ||
	bad "softrdma run did not use the installed lib/softrdma"
echo "$out" | grep -qw roce_lo || bad "ibv_devices under the installed softrdma run shows no roce_lo"

# A program built against the installed pkg-config file.
cat >"$dir/tiny.c" <<'EOF'
#include <infiniband/verbs.h>
#include <softrdma.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
	int n, found = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	for (int i = 0; list && i < n; i++) {
		if (strcmp(ibv_get_device_name(list[i]), "roce_lo"))
			continue;
		struct ibv_context *ctx = ibv_open_device(list[i]);
		struct softrdma_counter c[4];
		if (ctx && softrdma_query_counters(ctx, c, 4) >= 0)
			found = 1;
		if (ctx)
			ibv_close_device(ctx);
	}
	if (list)
		ibv_free_device_list(list);
	printf("tiny: roce_lo %s\n", found ? "opened" : "missing");
	return found ? 0 : 1;
}
EOF
export PKG_CONFIG_PATH="$libdir/pkgconfig"
echo "pkg-config: $(pkg-config --modversion softrdma) $(pkg-config --cflags --libs softrdma)"
[ "$(pkg-config --modversion softrdma)" = "$(echo "$v" | awk '{print $2}')" ] ||
	bad "softrdma.pc's version is not the CLI's"
# shellcheck disable=SC2046
if cc "${sanitize[@]}" -o "$dir/tiny" "$dir/tiny.c" $(pkg-config --cflags --libs softrdma) \
	-Wl,-rpath,"$libdir" 2>"$dir/cc.log"; then
	ldd "$dir/tiny" | grep -q "$libdir/libsoftrdma.so" || bad "tiny is not linked with the installed libsoftrdma.so"
	ldd "$dir/tiny" | grep -q "libibverbs" && bad "tiny pulls in a libibverbs as well"
	"${asan[@]}" timeout 30 "$dir/tiny" || bad "tiny (shared) failed"
else
	cat "$dir/cc.log"
	bad "cannot compile against the installed softrdma.pc"
fi
# shellcheck disable=SC2046
if cc "${sanitize[@]}" -o "$dir/tiny_static" "$dir/tiny.c" $(pkg-config --cflags softrdma) \
	"$libdir/libsoftrdma.a" $(pkg-config --static --libs-only-other softrdma) 2>"$dir/cc.log"; then
	"${asan[@]}" timeout 30 "$dir/tiny_static" || bad "tiny (static) failed"
else
	cat "$dir/cc.log"
	bad "cannot link statically against the installed libsoftrdma.a"
fi

[ $fail -eq 0 ] && echo "PASS" || echo "$fail failure(s)"
[ $fail -eq 0 ]
