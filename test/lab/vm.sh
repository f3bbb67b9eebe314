#!/usr/bin/env bash
# vm.sh — the lab's VM tier: Debian 13 virtual machines with a kernel of their own (QEMU, software
# emulation), for what the nspawn hosts cannot show: cgroup v2 under the guest's own systemd, systemd-networkd
# on eth0, the usual three SSH host keys, reboots.
#
#   test/lab/vm.sh image      build (once) the cached VM image: kernel, initrd and a qcow2 root disk
#
# lab.sh sources this file for `lab.sh up --vm` (and for down/list/kill of a VM lab): see vm_up below.
#
# Why TCG: /dev/kvm on these machines is PVM, and stock Debian kernels die in its instruction emulator
# (../../../shared/lab-notes.md, "Real VMs"). Under TCG a guest's CPU work is 10-16x slower than the
# machine's: every wait of a test on a VM comes from a flag a user has too.
set -euo pipefail

VM_CACHE=${CLUSTERCTL_LAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/clusterctl-lab}/vm
# Bump when the image's content changes, so that caches are rebuilt.
VM_REV=1
VM_IMAGE=$VM_CACHE/debian13-$VM_REV
VM_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# Guest size: two vCPUs (a one-CPU host fails kubeadm's NumCPU check, as it should) and 3 GiB, enough for a
# control plane with etcd.
VM_CPUS=${LAB_VM_CPUS:-2}
VM_MEMORY=${LAB_VM_MEMORY:-3072}
VM_DISK=16G

vm_die() { echo "vm: $*" >&2; exit 1; }

# ---- the image ----
vm_image() {
  [ -f "$VM_IMAGE/root.qcow2" ] && return 0
  for c in qemu-system-x86_64 qemu-img mkfs.ext4 debootstrap; do
    command -v "$c" >/dev/null || vm_die "$c is missing; run test/lab/deps.sh --vm"
  done
  RELEASE=trixie "$VM_HERE/rootfs.sh" base >&2
  local base
  base=$(RELEASE=trixie "$VM_HERE/rootfs.sh" paths | sed -n 's/^BASE=//p')
  local tmp=$VM_IMAGE.tmp start; start=$(date +%s)
  rm -rf "$tmp"
  mkdir -p "$tmp"
  echo "vm: building the Debian 13 VM image into $VM_IMAGE (once, ~5 min)" >&2
  cp -a "$base" "$tmp/root"
  # The kernel (and its initramfs, which has the virtio drivers), in a chroot of the copy, in a private mount
  # namespace so that nothing leaks if it fails.
  unshare --mount --propagation private bash -euc '
    root=$1
    for d in proc sys dev dev/pts; do mount --bind "/$d" "$root/$d"; done
    cp /etc/resolv.conf "$root/etc/resolv.conf"
    printf "#!/bin/sh\nexit 101\n" >"$root/usr/sbin/policy-rc.d"; chmod +x "$root/usr/sbin/policy-rc.d"
    chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      linux-image-amd64 initramfs-tools zstd e2fsprogs
    chroot "$root" apt-get clean
    rm -f "$root/usr/sbin/policy-rc.d" "$root/etc/resolv.conf"
    rm -rf "$root/var/lib/apt/lists/"*
  ' _ "$tmp/root" >"$VM_CACHE.log" 2>&1 || { tail -5 "$VM_CACHE.log" >&2; vm_die "installing the kernel failed; see $VM_CACHE.log"; }
  local root=$tmp/root
  cp "$(ls "$root"/boot/vmlinuz-* | sort -V | tail -1)" "$tmp/vmlinuz"
  cp "$(ls "$root"/boot/initrd.img-* | sort -V | tail -1)" "$tmp/initrd.img"
  # A VM, not a container: the nspawn host preparation has no place here.
  chroot "$root" systemctl disable lab-prepare.service >/dev/null 2>&1 || true
  rm -f "$root/etc/systemd/system/lab-prepare.service" "$root/usr/local/sbin/lab-prepare"
  printf 'LABEL=root / ext4 rw,errors=remount-ro 0 1\n' >"$root/etc/fstab"
  # As on many cloud images, nothing waits for the network at boot: network-online.target is reached before
  # networkd has configured eth0 (what clusterctl's pod routes unit must cope with).
  chroot "$root" systemctl mask systemd-networkd-wait-online.service >/dev/null 2>&1
  # Each VM's own settings come from its seed disk (vm_seed): copied over the root at every boot, before
  # networkd and sshd start.
  install -m 0755 /dev/stdin "$root/usr/local/sbin/lab-seed" <<'EOS'
#!/bin/sh
# lab-seed: copy this VM's own files (host name, SSH host keys, network, authorized keys) from its seed disk.
set -eu
mkdir -p /run/lab-seed
mount -o ro /dev/disk/by-label/labseed /run/lab-seed
cp -a /run/lab-seed/files/. /
umount /run/lab-seed
hostname "$(cat /etc/hostname)"
EOS
  cat >"$root/etc/systemd/system/lab-seed.service" <<'EOS'
[Unit]
Description=This lab VM's own settings, from its seed disk
DefaultDependencies=no
Requires=dev-disk-by\x2dlabel-labseed.device
After=dev-disk-by\x2dlabel-labseed.device local-fs.target
Before=network-pre.target ssh.service sysinit.target
Wants=network-pre.target

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/lab-seed

[Install]
WantedBy=sysinit.target
EOS
  chroot "$root" systemctl enable lab-seed.service >/dev/null 2>&1
  # A serial console for the log, and journald to it so that console.log says why a boot failed.
  mkdir -p "$root/etc/systemd/journald.conf.d"
  printf '[Journal]\nForwardToConsole=no\n' >"$root/etc/systemd/journald.conf.d/lab.conf"
  mkfs.ext4 -q -L root -d "$root" "$tmp/root.raw" "$VM_DISK" >/dev/null
  qemu-img convert -O qcow2 "$tmp/root.raw" "$tmp/root.qcow2"
  rm -rf "$tmp/root.raw" "$root"
  mv "$tmp" "$VM_IMAGE"
  echo "vm: image ready in $(( $(date +%s) - start ))s ($(du -sh "$VM_IMAGE" | cut -f1))" >&2
}

# vm_seed DIR HOST ADDRESS LABUID LABGID PUBKEY: the seed disk of one VM, DIR/seed.img, and its host keys
# (all three types, as a Debian host has) in DIR/keys.
vm_seed() {
  local hd=$1 h=$2 addr=$3 uid=$4 gid=$5 pub=$6 f=$1/seed/files t
  rm -rf "$hd/seed" "$hd/seed.img"
  mkdir -p "$f/etc/ssh" "$f/etc/systemd/network" "$f/root/.ssh" "$f/home/lab/.ssh"
  echo "$h" >"$f/etc/hostname"
  cp "$LAB_HOSTSFILE" "$f/etc/hosts"
  for t in rsa ecdsa ed25519; do
    ssh-keygen -q -t $t -N '' -C "root@$h" -f "$f/etc/ssh/ssh_host_${t}_key"
  done
  # networkd on eth0, matched by name (a match on Type=ether would take over every CNI veth).
  printf '[Match]\nName=eth0\n\n[Network]\nAddress=%s/24\nLinkLocalAddressing=no\nIPv6AcceptRA=no\n' "$addr" \
    >"$f/etc/systemd/network/10-eth0.network"
  echo "nameserver $addr" >"$f/etc/resolv.conf"
  install -m 0600 "$pub" "$f/root/.ssh/authorized_keys"
  install -m 0600 -o "$uid" -g "$gid" "$pub" "$f/home/lab/.ssh/authorized_keys"
  chmod 0700 "$f/root/.ssh" "$f/root"; chown "$uid:$gid" "$f/home/lab" "$f/home/lab/.ssh"; chmod 0700 "$f/home/lab/.ssh"
  mkfs.ext4 -q -L labseed -d "$hd/seed" "$hd/seed.img" 8M >/dev/null
}

# vm_start LAB IDX HOST DIR BRIDGE: boot one VM from a copy-on-write overlay of the image, on a tap of the
# lab's bridge, its serial console in DIR/console.log.
vm_start() {
  local lab=$1 idx=$2 h=$3 hd=$4 br=$5 n=$6
  local tap="tv$idx-$h"; tap=${tap:0:15}
  ip link del "$tap" 2>/dev/null || true
  ip tuntap add dev "$tap" mode tap
  ip link set "$tap" master "$br" up
  echo "$tap" >"$hd/tap"
  [ -f "$hd/disk.qcow2" ] || qemu-img create -q -f qcow2 -b "$VM_IMAGE/root.qcow2" -F qcow2 "$hd/disk.qcow2"
  qemu-system-x86_64 -name "$lab-$h" \
    -accel tcg,thread=multi,tb-size=256 -cpu max -m "$VM_MEMORY" -smp "$VM_CPUS" \
    -kernel "$VM_IMAGE/vmlinuz" -initrd "$VM_IMAGE/initrd.img" \
    -append "root=/dev/vda rw console=ttyS0 net.ifnames=0 quiet" \
    -drive "file=$hd/disk.qcow2,if=virtio,format=qcow2,discard=unmap" \
    -drive "file=$hd/seed.img,if=virtio,format=raw,readonly=on" \
    -netdev "tap,id=n0,ifname=$tap,script=no,downscript=no" \
    -device "virtio-net-pci,netdev=n0,mac=52:54:00:fa:$(printf %02x "$idx"):$(printf %02x "$n")" \
    -device virtio-rng-pci \
    -display none -monitor none -serial "file:$hd/console.log" \
    -daemonize -pidfile "$hd/pid" </dev/null >"$hd/qemu.log" 2>&1 8>&- \
    || vm_die "qemu of $h did not start: $(cat "$hd/qemu.log")"
}

# vm_stop DIR: power the VM off (qemu ends at once; the disk is a throwaway overlay).
vm_stop() {
  local hd=$1 pid deadline
  pid=$(cat "$hd/pid" 2>/dev/null || true)
  [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null || true
  deadline=$(( $(date +%s) + 10 ))
  while [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.2; done
  [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null || true
  [ -f "$hd/tap" ] && ip link del "$(cat "$hd/tap")" 2>/dev/null || true
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  case ${1:-} in
    image) [ "$(id -u)" = 0 ] || vm_die "must run as root"; mkdir -p "$VM_CACHE"; vm_image ;;
    paths) echo "VM_IMAGE=$VM_IMAGE" ;;
    *) echo "usage: $0 image|paths" >&2; exit 2 ;;
  esac
fi
