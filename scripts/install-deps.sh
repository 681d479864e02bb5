#!/usr/bin/env bash
# Installs what softrdma needs to build and test on Debian 12. Run as root (or with sudo).
set -euo pipefail
pkgs=(build-essential cmake pkg-config libibverbs-dev librdmacm-dev tshark clang clang-format
	libclang-rt-14-dev valgrind iproute2 ibverbs-utils perftest rdmacm-utils chromium
	python3-pyverbs infiniband-diags ucx-utils openmpi-bin libopenmpi-dev qperf
	libfabric1 libfabric-bin)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "installing: ${missing[*]}"
	SUDO=""
	[ "$(id -u)" -ne 0 ] && SUDO=sudo
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# rdma-core's own test suite (tests/e2e/test_pyverbs.sh) is in python3-pyverbs, under
# /usr/share/doc/rdma-core/tests. Where dpkg leaves /usr/share/doc out (minimal and container
# images), take it from the package itself (Debian's archive, as above).
suite=/usr/share/doc/rdma-core/tests cache=/var/cache/softrdma/rdma-core-tests
if [ ! -e "$suite/run_tests.py" ] && [ ! -e "$cache/run_tests.py" ]; then
	echo "unpacking rdma-core's tests from python3-pyverbs into $cache"
	SUDO=""
	[ "$(id -u)" -ne 0 ] && SUDO=sudo
	tmp=$(mktemp -d)
	if (cd "$tmp" && apt-get download -qq python3-pyverbs) && dpkg-deb -x "$tmp"/python3-pyverbs_*.deb "$tmp/x" &&
		[ -e "$tmp/x$suite/run_tests.py" ]; then
		$SUDO mkdir -p "$(dirname "$cache")"
		$SUDO cp -r "$tmp/x$suite" "$cache"
	else
		echo "could not unpack python3-pyverbs: tests/e2e/test_pyverbs.sh will skip"
	fi
	rm -rf "$tmp"
fi
