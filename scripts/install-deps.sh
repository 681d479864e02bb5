#!/usr/bin/env bash
# Installs what softrdma needs to build and test on Debian 12. Run as root (or with sudo).
set -euo pipefail
pkgs=(build-essential cmake pkg-config libibverbs-dev librdmacm-dev tshark clang clang-format
	libclang-rt-14-dev valgrind iproute2 ibverbs-utils perftest rdmacm-utils chromium
	infiniband-diags ucx-utils openmpi-bin libopenmpi-dev)
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
