#!/usr/bin/env bash
# deps.sh — install the Debian packages the lab needs, if any is missing. Safe to run every time.
#   test/lab/deps.sh [--vm]   (--vm: QEMU too, for the VM tier: vm.sh)
set -euo pipefail
pkgs=(systemd-container debootstrap bridge-utils openssh-client iproute2 iptables util-linux procps kmod
  gcc make libc6-dev bzip2 # these four build busybox for the conformance images (conformance.sh), and flanneld
  nftables) # nft: tests read a lab host's nftables tables from this machine (nsenter into its network)
[ "${1:-}" = --vm ] && pkgs+=(qemu-system-x86 qemu-utils e2fsprogs)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
[ "$(id -u)" = 0 ] || { echo "deps: need root to install: ${missing[*]}" >&2; exit 1; }
echo "deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
