#!/usr/bin/env bash
# softrdma run's device view (src/tools/view.c): under `softrdma run` a program finds softrdma's
# devices where the kernel shows RDMA devices. Checked as root (a mount namespace) and as an
# unprivileged user (uid and gid 4242, through setpriv: a user namespace too):
#  - view_probe (tests/e2e/view_probe.c, built against rdma-core's libibverbs, so that the
#    drop-in replaces it) finds dev_name / dev_path / ibdev_path = uverbs<n> and the sysfs
#    paths, /dev/infiniband/uverbs<n> an accessible character device, and every sysfs file it
#    reads (node_type, node_guid, port state, link layer, gids, gid_attrs/types and ndevs,
#    device/net) agreeing with verbs;
#  - files read by name (UCX's gid_attrs/types/0 "RoCE v2", ndevs/0 "lo", device/net/lo,
#    infiniband_verbs/abi_version), the host's other entries still there (/sys/class/net,
#    /dev/null, /dev/shm), /sys/class read-only, the program's ids and working directory its
#    own, its exit status passed on;
#  - ibstat (libibumad: sysfs only) shows roce_lo active, if infiniband-diags is installed;
#  - nothing leaks to the host (no view mount outside, /sys/class/infiniband as before);
#  - --no-view and SOFTRDMA_VIEW=0: no view; a nested softrdma run keeps the outer view;
#  - where the view cannot be made (as root: no CAP_SYS_ADMIN and user namespaces disabled,
#    emulated in a user namespace whose max_user_namespaces is 0), a one-line warning and the
#    program runs, without the view.
# Parts the platform disallows are skipped with a note (exit 77 if nothing could run).
set -u
build=$(cd "${1:?build directory}" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
command -v cc >/dev/null || { echo "SKIP: no C compiler"; exit 77; }
[ -e /usr/include/infiniband/verbs.h ] || { echo "SKIP: no rdma-core headers"; exit 77; }
if grep -q "SOFTRDMA_SANITIZE:BOOL=ON" "$build/CMakeCache.txt" 2>/dev/null; then
	export LD_PRELOAD="$(gcc -print-file-name=libasan.so)"
	export ASAN_OPTIONS=detect_leaks=0:abort_on_error=1
fi
unset SOFTRDMA_VIEW
R=$build/softrdma
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
chmod 755 "$dir"
cc -O1 -o "$dir/view_probe" "$src/tests/e2e/view_probe.c" -libverbs || { echo "FAIL: cannot build view_probe"; exit 1; }
fail=0 ran=0
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }
host_ib=$([ -e /sys/class/infiniband ] && echo yes || echo no)

# What the program sees, one key=value per line (run inside the view).
cat >"$dir/inside.sh" <<'EOF'
p=/sys/class/infiniband/roce_lo
echo "id=$(id -u):$(id -g)"
echo "pwd=$(pwd)"
echo "type0=$(cat $p/ports/1/gid_attrs/types/0 2>&1)"
echo "ndev0=$(cat $p/ports/1/gid_attrs/ndevs/0 2>&1)"
echo "gid0=$(cat $p/ports/1/gids/0 2>&1)"
echo "net=$(ls $p/device/net 2>&1 | tr '\n' ' ')"
echo "state=$(cat $p/ports/1/state 2>&1)"
echo "abi=$(cat /sys/class/infiniband_verbs/abi_version 2>&1)"
echo "uverbs0=$(cat /sys/class/infiniband_verbs/uverbs0/ibdev 2>&1)"
echo "chr=$([ -c /dev/infiniband/uverbs0 ] && [ -r /dev/infiniband/uverbs0 ] && [ -w /dev/infiniband/uverbs0 ] && echo yes || echo no)"
echo "hostnet=$([ -e /sys/class/net/lo/address ] && echo yes || echo no)"
echo "null=$(echo x >/dev/null && [ -c /dev/null ] && echo yes || echo no)"
echo "shm=$([ -d /dev/shm ] && echo yes || echo no)"
echo "ro=$(touch /sys/class/infiniband/x 2>/dev/null && echo writable || echo read-only)"
"$PROBE" | sed 's/^/probe: /'
echo "probe=${PIPESTATUS[0]}"
exit 7
EOF
chmod 644 "$dir/inside.sh"

# $1: label, rest: how to become the user (empty as oneself). Runs inside.sh in the view.
check_view() {
	local label=$1
	shift
	local me out rc
	me=$("$@" sh -c 'echo "$(id -u):$(id -g)"')
	out=$(cd "$dir" && PROBE="$dir/view_probe" "$@" timeout 60 "$R" run -- bash "$dir/inside.sh" 2>&1)
	rc=$?
	ran=$((ran + 1))
	echo "$out" | sed "s/^/  [$label] /"
	val() { echo "$out" | sed -n "s/^$1=//p" | head -1; }
	[ $rc -eq 7 ] || bad "$label: the program's exit status 7 came back as $rc"
	[ "$(val id)" = "$me" ] || bad "$label: ids in the view $(val id), outside $me"
	[ "$(val pwd)" = "$dir" ] || bad "$label: working directory $(val pwd), not $dir"
	[ "$(val type0)" = "RoCE v2" ] || bad "$label: gid_attrs/types/0 is '$(val type0)'"
	[ "$(val ndev0)" = "lo" ] || bad "$label: gid_attrs/ndevs/0 is '$(val ndev0)'"
	[[ $(val gid0) =~ ^0000:0000:0000:0000:0000:ffff:7f00:0001$ ]] || bad "$label: gids/0 is '$(val gid0)'"
	[ "$(val net)" = "lo " ] || bad "$label: device/net holds '$(val net)'"
	[ "$(val state)" = "4: ACTIVE" ] || bad "$label: ports/1/state is '$(val state)'"
	[ "$(val abi)" = "6" ] || bad "$label: infiniband_verbs/abi_version is '$(val abi)'"
	[ "$(val uverbs0)" = "roce_lo" ] || bad "$label: uverbs0/ibdev is '$(val uverbs0)'"
	for k in chr hostnet null shm; do
		[ "$(val $k)" = "yes" ] || bad "$label: $k is '$(val $k)'"
	done
	[ "$(val ro)" = "read-only" ] || bad "$label: /sys/class/infiniband is writable"
	[ "$(val probe)" = "0" ] || bad "$label: view_probe found mismatches"
	echo "$out" | grep -q "warning" && bad "$label: softrdma run warned"
}

if [ "$(id -u)" -eq 0 ]; then
	check_view root
	# A numeric uid with no passwd entry: in the view it must still be 4242, not the overflow
	# id (nobody's 65534 would hide a missing map).
	nobody=(setpriv --reuid=4242 --regid=4242 --clear-groups)
	# Another user's softrdma processes may hold UDP 4791 (SO_REUSEPORT is per uid).
	export SOFTRDMA_UDP_PORT=$((30000 + RANDOM % 10000))
	if ! "${nobody[@]}" true 2>/dev/null; then
		echo "NOTE: cannot become uid 4242 here: unprivileged part skipped"
	elif ! "${nobody[@]}" unshare -U true 2>/dev/null; then
		echo "NOTE: unprivileged user namespaces are disabled here: checking the fallback instead"
		out=$("${nobody[@]}" timeout 30 "$R" run -- sh -c 'ls /sys/class/infiniband >/dev/null 2>&1; echo "seen=$?"' 2>&1)
		echo "$out" | grep -q "warning: no device view" || bad "uid 4242: no warning without user namespaces"
	else
		check_view "uid 4242" "${nobody[@]}"
	fi
	unset SOFTRDMA_UDP_PORT
else
	echo "NOTE: not root: the root part is skipped"
	if unshare -U true 2>/dev/null; then
		check_view "uid $(id -u)"
	else
		echo "NOTE: unprivileged user namespaces are disabled here: view part skipped"
	fi
fi

# libibumad reads the view too: ibstat (infiniband-diags) lists roce_lo from sysfs alone.
if command -v ibstat >/dev/null; then
	out=$(timeout 30 "$R" run -- ibstat roce_lo 2>&1)
	echo "$out" | grep -q "State: Active" && echo "$out" | grep -q "Link layer: Ethernet" ||
		bad "ibstat roce_lo in the view: $out"
fi

# Nothing of it outside.
grep -q softrdma-view /proc/self/mountinfo && bad "a view mount leaked to the host"
[ "$([ -e /sys/class/infiniband ] && echo yes || echo no)" = "$host_ib" ] ||
	bad "/sys/class/infiniband changed on the host"

# Switched off: no view (the library's paths lead nowhere), the program runs.
for how in "--no-view" "env"; do
	if [ "$how" = env ]; then
		out=$(SOFTRDMA_VIEW=0 timeout 30 "$R" run -- "$dir/view_probe" 2>&1)
	else
		out=$(timeout 30 "$R" run --no-view -- "$dir/view_probe" 2>&1)
	fi
	echo "$out" | grep -q "dev_name is 'softrdma_" || bad "$how: the view was made anyway: $out"
	echo "$out" | grep -q warning && bad "$how: softrdma run warned"
done

# Nested: the inner run keeps the outer view.
out=$(timeout 30 "$R" run -- "$R" run -v -- "$dir/view_probe" 2>&1)
echo "$out" | grep -q "in a device view already" || bad "nested: the inner run did not see the view: $out"
echo "$out" | grep -q "roce_lo OK" || bad "nested: view_probe failed: $out"

# No view possible: as root without CAP_SYS_ADMIN (a container's root) and with user
# namespaces disabled (max_user_namespaces 0 in a user namespace of ours).
if [ "$(id -u)" -eq 0 ] && unshare -U -r true 2>/dev/null && command -v setpriv >/dev/null; then
	out=$(unshare -U -r sh -c 'echo 0 > /proc/sys/user/max_user_namespaces &&
		exec setpriv --bounding-set -sys_admin --inh-caps -sys_admin "$0" run -- sh -c "ls -d /sys/class/infiniband_verbs 2>/dev/null; exit 5"' \
		"$R" 2>&1)
	rc=$?
	echo "$out" | sed 's/^/  [no userns] /'
	[ $rc -eq 5 ] || bad "no userns: the program's status 5 came back as $rc"
	echo "$out" | grep -q "softrdma run: warning: no device view" || bad "no userns: no warning"
	[ "$(echo "$out" | grep -c warning)" -eq 1 ] || bad "no userns: not one warning line"
	echo "$out" | grep -q "^/sys/class/infiniband_verbs" && bad "no userns: a view appeared"
	# The same root without CAP_SYS_ADMIN, user namespaces allowed: the view, through one.
	out=$(setpriv --bounding-set -sys_admin --inh-caps -sys_admin timeout 30 "$R" run -- "$dir/view_probe" 2>&1)
	echo "$out" | grep -q "roce_lo OK" || bad "root without CAP_SYS_ADMIN: no view: $out"
else
	echo "NOTE: cannot emulate a platform without user namespaces: fallback part skipped"
fi

[ $ran -gt 0 ] || { echo "SKIP: no part of the view could be checked here"; exit 77; }
[ $fail -eq 0 ] && echo "PASS" || echo "$fail failure(s)"
[ $fail -eq 0 ]
