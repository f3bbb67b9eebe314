#!/usr/bin/env bash
# rootfs.sh — build (once) the cached Debian root filesystem layers the lab's hosts boot from.
#
#   RELEASE=bookworm|trixie test/lab/rootfs.sh [base|node|e2e]   (default: node, which needs base; bookworm)
#
# bookworm is Debian 12; trixie (Debian 13) has a base layer only: its hosts are bare hosts.
# base: debootstrap --variant=minbase bookworm with systemd, dbus, OpenSSH, iproute2, iptables and sudo;
#       no host keys and an empty machine-id (each host gets its own), systemd-networkd enabled, a user
#       "lab" with password-less sudo.
# node: a layer over base with what a Kubernetes node needs from Debian: containerd, runc, the CNI plugins,
#       haproxy (the node-local API server proxy of multi-control-plane clusters),
#       conntrack, socat, ethtool, ebtables, nft (kube-proxy's nftables mode; reset removes its tables); modprobe of built-in modules made to work (see lab-notes).
# e2e:  a layer over base with the Debian programs the conformance suite's images run (dig and
#       nslookup, curl, nc, socat, nginx): test/lab/conformance.sh packs the images from it.
# Layers live in $CACHE/rootfs/<layer> ($CACHE: $CLUSTERCTL_LAB_CACHE, else ~/.cache/clusterctl-lab) and are
# built in a temporary directory and renamed into place, so an interrupted build leaves nothing half made.
set -euo pipefail
exec 9>&-

CACHE=${CLUSTERCTL_LAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/clusterctl-lab}
ROOTFS=$CACHE/rootfs
LAB=$(cd "$(dirname "$0")" && pwd)
# Bump when the content of a layer changes, so that caches are rebuilt.
BASE_REV=1
NODE_REV=3
RELEASE=${RELEASE:-bookworm}
case $RELEASE in
  bookworm) BASE=$ROOTFS/base-$BASE_REV ;;
  trixie) BASE=$ROOTFS/base-trixie-$BASE_REV ;;
  *) echo "rootfs: RELEASE is bookworm or trixie, not $RELEASE" >&2; exit 2 ;;
esac
NODE=$ROOTFS/node-$BASE_REV.$NODE_REV
E2E_REV=2
E2E=$ROOTFS/e2e-$BASE_REV.$E2E_REV

mirror() {
  # The machine's own Debian mirror, as apt is configured here.
  local uri
  uri=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
  [ -n "$uri" ] || uri=$(awk '/^deb /{print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
  echo "${uri:-http://deb.debian.org/debian}"
}

build_base() {
  [ -d "$BASE" ] && return 0
  command -v debootstrap >/dev/null || { echo "rootfs: debootstrap is missing (test/lab/deps.sh installs it)" >&2; exit 1; }
  mkdir -p "$ROOTFS"
  local tmp=$BASE.tmp start=$(date +%s)
  rm -rf "$tmp"
  echo "rootfs: debootstrap $RELEASE into $BASE (once, ~2 min)"
  debootstrap --variant=minbase \
    --include=systemd,systemd-sysv,dbus,libpam-systemd,openssh-server,iproute2,iptables,sudo,kmod,procps,ca-certificates \
    "$RELEASE" "$tmp" "$(mirror)" >"$ROOTFS/debootstrap-$RELEASE.log" 2>&1 \
    || { echo "rootfs: debootstrap failed; see $ROOTFS/debootstrap-$RELEASE.log" >&2; tail -5 "$ROOTFS/debootstrap-$RELEASE.log" >&2; exit 1; }
  rm -f "$tmp"/etc/ssh/ssh_host_* "$tmp"/var/lib/dbus/machine-id
  : >"$tmp/etc/machine-id"
  if [ "$RELEASE" = bookworm ]; then
    cp /etc/apt/sources.list.d/debian.sources "$tmp/etc/apt/sources.list.d/" 2>/dev/null && rm -f "$tmp/etc/apt/sources.list" || true
  fi
  chroot "$tmp" systemctl enable systemd-networkd >/dev/null 2>&1
  chroot "$tmp" systemctl mask systemd-resolved console-getty.service getty@tty1.service >/dev/null 2>&1 || true
  chroot "$tmp" useradd --create-home --shell /bin/bash lab
  echo 'lab ALL=(ALL) NOPASSWD:ALL' >"$tmp/etc/sudoers.d/lab"
  chmod 0440 "$tmp/etc/sudoers.d/lab"
  install -m 0755 "$LAB/files/lab-prepare" "$tmp/usr/local/sbin/lab-prepare"
  install -m 0644 "$LAB/files/lab-prepare.service" "$tmp/etc/systemd/system/lab-prepare.service"
  chroot "$tmp" systemctl enable lab-prepare.service >/dev/null 2>&1
  chroot "$tmp" apt-get clean
  mv "$tmp" "$BASE"
  echo "rootfs: base ready in $(( $(date +%s) - start ))s ($(du -sh "$BASE" | cut -f1))"
}

# layer DIR NAME PACKAGE...: a layer over base with Debian packages, in DIR.
layer() {
  [ "$RELEASE" = bookworm ] || { echo "rootfs: the $2 layer is Debian 12's only; $RELEASE hosts are bare" >&2; exit 2; }
  build_base
  local dir=$1 name=$2; shift 2
  [ -d "$dir" ] && return 0
  local tmp=$dir.tmp start=$(date +%s)
  rm -rf "$tmp"
  mkdir -p "$tmp/upper" "$tmp/work" "$tmp/merged"
  echo "rootfs: $name layer ($*) into $dir"
  # apt-get runs in a chroot of base+layer, in a private mount namespace so nothing leaks if it fails.
  unshare --mount --propagation private bash -euc '
    tmp=$1 base=$2; shift 2
    mount -t overlay overlay -o "lowerdir=$base,upperdir=$tmp/upper,workdir=$tmp/work" "$tmp/merged"
    for d in proc sys dev dev/pts; do mount --bind "/$d" "$tmp/merged/$d"; done
    cp /etc/resolv.conf "$tmp/merged/etc/resolv.conf"
    printf "#!/bin/sh\nexit 101\n" >"$tmp/merged/usr/sbin/policy-rc.d"; chmod +x "$tmp/merged/usr/sbin/policy-rc.d"
    chroot "$tmp/merged" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    chroot "$tmp/merged" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
    chroot "$tmp/merged" apt-get clean
    rm -f "$tmp/merged/usr/sbin/policy-rc.d" "$tmp/merged/etc/resolv.conf"
    rm -rf "$tmp/merged/var/lib/apt/lists/"*
  ' _ "$tmp" "$BASE" "$@" >"$ROOTFS/$name.log" 2>&1 \
    || { echo "rootfs: building the $name layer failed; see $ROOTFS/$name.log" >&2; tail -5 "$ROOTFS/$name.log" >&2; exit 1; }
  mv "$tmp/upper" "$dir.layer"
  rm -rf "$tmp"
  mv "$dir.layer" "$dir"
  echo "rootfs: $name layer ready in $(( $(date +%s) - start ))s ($(du -sh "$dir" | cut -f1))"
}

case ${1:-node} in
  base) build_base ;;
  node) layer "$NODE" node containerd runc containernetworking-plugins conntrack socat ethtool ebtables ipset util-linux haproxy nftables ;;
  e2e) layer "$E2E" e2e bind9-dnsutils curl netcat-openbsd socat nginx-light ;;
  paths) echo "BASE=$BASE"; echo "NODE=$NODE"; echo "E2E=$E2E" ;;
  *) echo "usage: $0 [base|node|e2e|paths]" >&2; exit 2 ;;
esac
