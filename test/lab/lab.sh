#!/usr/bin/env bash
# lab.sh — disposable, VM-like test hosts on this machine: systemd-nspawn containers that boot a real
# systemd and OpenSSH from the cached Debian root filesystem (rootfs.sh), each an overlay of its own, on a
# private bridge that only the lab uses.
#
#   test/lab/lab.sh up   --name NAME --dir DIR [--hosts N] [--control-planes K] [--layer node|bare|base]
#                        [--release bookworm|trixie]   (Debian 12, the default, or 13: bare and base only)
#                        [--vm]   (QEMU virtual machines of Debian 13, bare, with their own kernel: vm.sh)
#                        [--subnets S]   (1-4: hosts spread over S subnets joined by a router)
#                        [--ip 4|dual|6]   (the hosts' addresses: IPv4, both families, or IPv6 only)
#   test/lab/lab.sh down --name NAME | --all
#   test/lab/lab.sh list
#   test/lab/lab.sh kill --name NAME HOST         (the host loses power)
#   test/lab/lab.sh start --name NAME HOST...     (a host that lost power is switched on again)
#   test/lab/lab.sh reboot --name NAME HOST...    (each host reboots itself, as a machine does on ctrl-alt-del)
#   test/lab/lab.sh link --name NAME HOST up|down (the host's network cable: its veth on the bridge)
#
# up writes into DIR: hosts.yaml (a clusterctl inventory: the first K hosts control-plane, the rest workers),
# known_hosts, ssh_config (ssh -F DIR/ssh_config cp1), id_ed25519, and timings. down removes every host,
# cgroup, bridge and sysctl change the lab made; both are safe to run twice, and up first removes what a
# failed run of the same lab left behind. Addresses: 10.250.X.0/24 on bridge cclabX, the machine .1, hosts
# .10 and up; hosts have no default route and the machine does not forward.
#
# With --subnets S, subnet k (0..S-1) is 10.(250+k).X.0/24 on bridge cclabX (k=0) or cclabXsK, host i of N
# on subnet i*S/N (3 hosts on 2: cp1 and w1 on the first, w2 on the second). A router, a network namespace
# of the lab's own (cclabX-r) with .254 on every subnet, forwards between them, and each host routes the
# other subnets through its own subnet's .254: nodes reach each other only through a gateway, as in a VPC
# of several subnets. The machine holds .1 on every subnet (the workstation reaches every host directly).
#
# With --ip dual, each subnet also has the IPv6 ULA prefix fdcc:(250+k):(X+1)::/64 (the machine ::1, hosts
# ::10 and up, the router ::254), and hosts.yaml gives each host both addresses (internalAddress) and a
# dual-stack cluster (networking); with --ip 6, hosts have only the IPv6 address, which SSH uses too.
#
# Why each odd step is there: ../../../shared/lab-notes.md (the traps, numbered) and the comments below.
set -euo pipefail
exec 9>&-   # trap 8: never hand an inherited lock to long-running children

LAB_ROOT=${CLUSTERCTL_LAB_STATE:-/var/lib/clusterctl-lab}
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=vm.sh
. "$HERE/vm.sh"
CGROUP_PARENT=clusterctl-lab
SSH_TIMEOUT=${LAB_SSH_TIMEOUT:-90}

die() { echo "lab: $*" >&2; exit 1; }
log() { echo "lab: $*" >&2; }
now_ms() { date +%s%3N; }

require_root() {
  [ "$(id -u)" = 0 ] || die "must run as root (systemd-nspawn, bridges and cgroups need it)"
  for c in systemd-nspawn unshare ip ssh ssh-keygen mount flock; do
    command -v "$c" >/dev/null || die "$c is missing; run test/lab/deps.sh"
  done
}

lock() {
  mkdir -p "$LAB_ROOT/labs"
  exec 8>"$LAB_ROOT/lock"
  flock 8
}

# cgroup hierarchies (v1 controllers, the named systemd one, and cgroup2) a host is placed in.
hierarchies() {
  local d
  for d in /sys/fs/cgroup/*/; do
    d=${d%/}
    mountpoint -q "$d" && echo "$d"
  done
}

# ---- sysctls: saved once before the first lab changes them, restored when the last lab is gone ----
# fs.inotify.max_user_instances is shared by every host (trap 7). Kubelets set the vm/kernel values below
# at start and fail if they cannot; /proc/sys outside net.* is the machine's own, so the lab sets them for
# its lifetime instead of letting hosts write them.
LAB_SYSCTLS="fs.inotify.max_user_instances=8192 fs.inotify.max_user_watches=524288"
NODE_SYSCTLS="vm.overcommit_memory=1 kernel.panic=10 kernel.panic_on_oops=1"

set_sysctls() {
  local orig=$LAB_ROOT/sysctl.orig kv key
  for kv in "$@"; do
    key=${kv%%=*}
    grep -q "^$key=" "$orig" 2>/dev/null || echo "$key=$(sysctl -n "$key")" >>"$orig"
    sysctl -qw "$kv"
  done
}

restore_sysctls() {
  local orig=$LAB_ROOT/sysctl.orig kv
  [ -f "$orig" ] || return 0
  while read -r kv; do
    [ -n "$kv" ] && sysctl -qw "$kv" || true
  done <"$orig"
  rm -f "$orig"
}

# ---- up ----
cmd_up() {
  local name="" dir="" n=3 cps=1 layer=node release=bookworm vm=no subnets=1 ipfam=4
  while [ $# -gt 0 ]; do
    case $1 in
      --ip) ipfam=$2; shift 2 ;;
      --subnets) subnets=$2; shift 2 ;;
      --name) name=$2; shift 2 ;;
      --dir) dir=$2; shift 2 ;;
      --hosts) n=$2; shift 2 ;;
      --control-planes) cps=$2; shift 2 ;;
      --layer) layer=$2; shift 2 ;;
      --release) release=$2; shift 2 ;;
      --vm) vm=yes; shift ;;
      *) die "up: unknown argument $1" ;;
    esac
  done
  [[ $name =~ ^[a-z0-9]{1,12}$ ]] || die "up: --name must be 1-12 lower-case letters or digits"
  [ -n "$dir" ] || die "up: --dir is required"
  [[ $n =~ ^[0-9]+$ && $n -ge 1 && $n -le 200 ]] || die "up: --hosts must be 1..200"
  [[ $cps =~ ^[0-9]+$ && $cps -le $n ]] || die "up: --control-planes must be 0..--hosts"
  [[ $subnets =~ ^[1-4]$ && $subnets -le $n ]] || die "up: --subnets must be 1..4, at most --hosts"
  [ $vm = no ] || [ "$subnets" = 1 ] || die "up: --subnets is for container hosts, not --vm"
  case $ipfam in 4|dual|6) ;; *) die "up: --ip is 4, dual or 6" ;; esac
  [ $vm = no ] || [ "$ipfam" = 4 ] || die "up: --ip is for container hosts, not --vm"
  # node: the Debian node layer (containerd, runc, CNI plugins, haproxy, ...) over base. bare: base alone
  # (systemd, OpenSSH, sudo, iproute2, iptables), made ready to become a node, as a fresh VM is: clusterctl
  # installs the runtime. base: base alone, for tests that run no node.
  case $layer in node|bare|base) ;; *) die "up: --layer is node, bare or base" ;; esac
  case $release in bookworm) ;; trixie) [ "$layer" != node ] || die "up: trixie hosts are bare or base" ;; *) die "up: --release is bookworm or trixie" ;; esac
  if [ $vm = yes ]; then
    # A VM is a Debian 13 host with nothing but what its image has: a bare host.
    release=trixie layer=bare
    SSH_TIMEOUT=${LAB_SSH_TIMEOUT:-400}
  fi
  export RELEASE=$release
  require_root
  local t0; t0=$(now_ms)

  local lower
  if [ $vm = yes ]; then
    mkdir -p "$VM_CACHE"
    vm_image
  else
    "$HERE/rootfs.sh" "${layer/bare/base}" >&2
  fi
  eval "$("$HERE/rootfs.sh" paths)"
  if [ "$layer" = node ]; then lower=$NODE:$BASE; else lower=$BASE; fi

  mkdir -p "$dir"; dir=$(cd "$dir" && pwd)
  lock
  [ -d "$LAB_ROOT/labs/$name" ] && { log "removing what an earlier run of lab $name left"; down_locked "$name"; }
  # Labs whose hosts are all gone (a test killed before its cleanup ran) are removed too.
  local other alive p
  for other in "$LAB_ROOT"/labs/*/; do
    [ -d "$other" ] || continue
    alive=no
    for p in "$other"/hosts/*/pid; do
      [ -f "$p" ] && kill -0 "$(cat "$p")" 2>/dev/null && alive=yes
    done
    [ $alive = no ] && { log "removing stale lab $(basename "$other")"; down_locked "$(basename "$other")"; }
  done

  # A /24 no other lab and no route of this machine uses.
  local idx="" i
  for i in $(seq 0 199); do
    grep -qx "$i" "$LAB_ROOT"/labs/*/index 2>/dev/null && continue
    ip -4 route show | grep -Eq "^10\.25[0-3]\.$i\." && continue
    ip link show "cclab$i" >/dev/null 2>&1 && continue
    idx=$i; break
  done
  [ -n "$idx" ] || die "no free lab subnet"
  local state=$LAB_ROOT/labs/$name br=cclab$idx net=10.250.$idx
  mkdir -p "$state/hosts"
  echo "$idx" >"$state/index"
  echo "$dir" >"$state/dir"
  echo "$layer" >"$state/layer"
  [ $vm = yes ] && : >"$state/vm"

  set_sysctls $LAB_SYSCTLS
  [ "$layer" != base ] && [ $vm = no ] && set_sysctls $NODE_SYSCTLS

  echo "$subnets" >"$state/subnets"
  echo "$ipfam" >"$state/ip"
  ip link add "$br" type bridge
  ip addr add "$net.1/24" dev "$br"
  [ "$ipfam" = 4 ] || ip -6 addr add "$(subnet6_of "$idx" 0):1/64" dev "$br" nodad
  ip link set "$br" up
  [ "$subnets" -gt 1 ] && make_router "$idx" "$subnets" "$ipfam"

  rm -f "$dir/id_ed25519" "$dir/id_ed25519.pub"
  ssh-keygen -q -t ed25519 -N '' -C "clusterctl-lab-$name" -f "$dir/id_ed25519"
  : >"$dir/known_hosts"
  : >"$dir/ssh_config"
  local hostsfile; hostsfile=$(mktemp)
  printf '127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n' >"$hostsfile"

  local names=() h addr addr6
  for i in $(seq 1 "$n"); do
    if [ "$i" -le "$cps" ]; then h=cp$i; else h=w$((i - cps)); fi
    names+=("$h")
    [ "$ipfam" = 6 ] || echo "$(subnet_of "$idx" $(( (i - 1) * subnets / n ))).$((9 + i)) $h" >>"$hostsfile"
    [ "$ipfam" = 4 ] || echo "$(subnet6_of "$idx" $(( (i - 1) * subnets / n ))):$((9 + i)) $h" >>"$hostsfile"
  done

  local lab_uid lab_gid
  lab_uid=$(awk -F: '$1=="lab"{print $3}' "$BASE/etc/passwd")
  lab_gid=$(awk -F: '$1=="lab"{print $4}' "$BASE/etc/passwd")
  for i in "${!names[@]}"; do
    local k=$(( i * subnets / n ))
    h=${names[$i]}; addr=$(subnet_of "$idx" $k).$((10 + i)); addr6=$(subnet6_of "$idx" $k):$((10 + i))
    local hd=$state/hosts/$h up
    if [ $vm = yes ]; then
      mkdir -p "$hd"
      LAB_HOSTSFILE=$hostsfile vm_seed "$hd" "$h" "$addr" "$lab_uid" "$lab_gid" "$dir/id_ed25519.pub"
      for t in ed25519 ecdsa rsa; do
        echo "$h,$addr $(cut -d' ' -f1,2 "$hd/seed/files/etc/ssh/ssh_host_${t}_key.pub")" >>"$dir/known_hosts"
      done
      ssh-keygen -lf "$hd/seed/files/etc/ssh/ssh_host_ed25519_key.pub" | awk '{print $2}' >"$hd/hostkey"
      rm -f "$hd/seed/files/etc/ssh/ssh_host_"*_key
      write_ssh_config "$dir" "$h" "$addr"
      echo "$addr" >"$hd/address"
      vm_start "$name" "$idx" "$h" "$hd" "$br" "$((10 + i))"
      continue
    fi
    up=$hd/upper
    mkdir -p "$up/etc/ssh/sshd_config.d" "$up/etc/systemd/network" "$up/root/.ssh" "$up/home/lab/.ssh" "$hd/work" "$hd/root" \
      "$hd/containerd"
    echo "$h" >"$up/etc/hostname"
    cp "$hostsfile" "$up/etc/hosts"
    od -An -N16 -tx1 /dev/urandom | tr -d ' \n' >"$up/etc/machine-id"; echo >>"$up/etc/machine-id"
    ssh-keygen -q -t ed25519 -N '' -C "root@$h" -f "$up/etc/ssh/ssh_host_ed25519_key"
    local netfile=$up/etc/systemd/network/10-host0.network
    # IPv6 hosts have their link-local address, as every IPv6 host does: a host forwarding Pods' packets
    # asks for its neighbours' addresses from it (without one its neighbour solicitations are never sent).
    local ll=no; [ "$ipfam" = 4 ] || ll=ipv6
    printf '[Match]\nName=host0\n\n[Network]\nLinkLocalAddressing=%s\nIPv6AcceptRA=no\n' "$ll" >"$netfile"
    [ "$ipfam" = 4 ] || printf 'IPv6DuplicateAddressDetection=0\n' >>"$netfile"
    [ "$ipfam" = 6 ] || printf '\n[Address]\nAddress=%s/24\n' "$addr" >>"$netfile"
    # No duplicate address detection: the lab hands out each address once, and a tentative address
    # would hold sshd and the kubelet back for seconds at every boot.
    [ "$ipfam" = 4 ] || printf '\n[Address]\nAddress=%s/64\nDuplicateAddressDetection=none\n' "$addr6" >>"$netfile"
    local o
    for o in $(seq 0 $((subnets - 1))); do
      [ "$o" = "$k" ] && continue
      [ "$ipfam" = 6 ] || printf '\n[Route]\nDestination=%s.0/24\nGateway=%s.254\n' "$(subnet_of "$idx" "$o")" "$(subnet_of "$idx" "$k")" >>"$netfile"
      [ "$ipfam" = 4 ] || printf '\n[Route]\nDestination=%s:/64\nGateway=%s:254\n' "$(subnet6_of "$idx" "$o")" "$(subnet6_of "$idx" "$k")" >>"$netfile"
    done
    # An IPv6-only host is reached over IPv6.
    [ "$ipfam" = 6 ] && addr=$addr6
    [ "$ipfam" = dual ] && echo "$addr6" >"$hd/address6"
    # The boot-time preparation in use is this checkout's, whatever the cached rootfs holds.
    install -D -m 0755 "$HERE/files/lab-prepare" "$up/usr/local/sbin/lab-prepare"
    # A resolver, as every VM has: CoreDNS (dnsPolicy Default) refuses to start without a nameserver. The
    # host's own address answers nothing, so lookups of outside names fail fast and go nowhere.
    echo "nameserver $addr" >"$up/etc/resolv.conf"
    # sshd: only the ed25519 key this lab made, no DNS lookups.
    printf 'HostKey /etc/ssh/ssh_host_ed25519_key\nUseDNS no\n' >"$up/etc/ssh/sshd_config.d/lab.conf"
    install -m 0600 "$dir/id_ed25519.pub" "$up/root/.ssh/authorized_keys"
    install -m 0600 -o "$lab_uid" -g "$lab_gid" "$dir/id_ed25519.pub" "$up/home/lab/.ssh/authorized_keys"
    chmod 0700 "$up/root/.ssh"; chown "$lab_uid:$lab_gid" "$up/home/lab" "$up/home/lab/.ssh"; chmod 0700 "$up/home/lab/.ssh"
    echo "$h,$addr $(cut -d' ' -f1,2 "$up/etc/ssh/ssh_host_ed25519_key.pub")" >>"$dir/known_hosts"
    write_ssh_config "$dir" "$h" "$addr"
    echo "$addr" >"$hd/address"
    start_host "$name" "$idx" "$h" "$hd" "$lower" "$(bridge_of "$idx" "$k")"
  done
  rm -f "$hostsfile"
  write_inventory "$name" "$dir" "$cps" "${names[@]}"
  flock -u 8

  local t1; t1=$(now_ms)
  if ! wait_ssh "$dir" "${names[@]}"; then
    # Say why here: the caller (a test's cleanup) may remove the lab, console logs included.
    for h in "${names[@]}"; do
      ssh -F "$dir/ssh_config" -o ConnectTimeout=2 "$h" true >/dev/null 2>&1 && continue
      log "console of $h (last 25 lines):"; tail -n 25 "$state/hosts/$h/console.log" >&2 || true
    done
    log "hosts did not become reachable over SSH; logs in $state/hosts/*/console.log"; exit 1
  fi
  local t2; t2=$(now_ms)
  printf 'prepare_ms=%d boot_to_ssh_ms=%d total_ms=%d hosts=%d\n' $((t1 - t0)) $((t2 - t1)) $((t2 - t0)) "$n" | tee "$dir/timings" >&2
  log "lab $name: $n hosts up on $br ($net.0/24); try: ssh -F $dir/ssh_config ${names[0]}"
}

# subnet_of IDX K: the first three octets of lab IDX's subnet K; subnet6_of IDX K: its IPv6 prefix, to
# which ":N" adds a host part; bridge_of IDX K: its bridge.
subnet_of() { echo "10.$((250 + $2)).$1"; }
# The third group is the lab's index plus one: never 0, so that every address is written as OpenSSH
# and Go print it (RFC 5952), which known_hosts must match.
subnet6_of() { echo "fdcc:$((250 + $2)):$(($1 + 1)):"; }
bridge_of() { if [ "$2" = 0 ]; then echo "cclab$1"; else echo "cclab$1s$2"; fi; }

# make_router IDX S: bridges for subnets 1..S-1 (the machine .1 on each), and the router: a network
# namespace with a veth on every subnet's bridge at .254, forwarding between them (its own sysctl; the
# machine's stays off).
make_router() {
  local idx=$1 s=$2 ipfam=${3:-4} k br ns=cclab$1-r
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip netns exec "$ns" sysctl -qw net.ipv4.ip_forward=1
  [ "$ipfam" = 4 ] || ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.forwarding=1
  for k in $(seq 0 $((s - 1))); do
    br=$(bridge_of "$idx" "$k")
    if [ "$k" != 0 ]; then
      ip link add "$br" type bridge
      ip addr add "$(subnet_of "$idx" "$k").1/24" dev "$br"
      [ "$ipfam" = 4 ] || ip -6 addr add "$(subnet6_of "$idx" "$k"):1/64" dev "$br" nodad
      ip link set "$br" up
    fi
    ip link add "rt$idx-$k" type veth peer name "r$k" netns "$ns"
    ip link set "rt$idx-$k" master "$br" up
    ip -n "$ns" addr add "$(subnet_of "$idx" "$k").254/24" dev "r$k"
    [ "$ipfam" = 4 ] || ip -n "$ns" -6 addr add "$(subnet6_of "$idx" "$k"):254/64" dev "r$k" nodad
    ip -n "$ns" link set "r$k" up
  done
}

write_ssh_config() {
  local dir=$1 h=$2 addr=$3
  cat >>"$dir/ssh_config" <<EOC
Host $h
  HostName $addr
  User root
  IdentityFile $dir/id_ed25519
  IdentitiesOnly yes
  UserKnownHostsFile $dir/known_hosts
  StrictHostKeyChecking yes
  BatchMode yes
  ConnectTimeout 5

EOC
}

# start_host runs one host: in a private mount namespace (trap 2: its own tmpfs on /run, and the overlay root
# and bind mounts vanish with it), in cgroups of its own in every hierarchy (trap 3), booting systemd.
start_host() {
  local lab=$1 idx=$2 h=$3 hd=$4 lower=$5 br=$6 cg
  # What start needs to switch the host on again after kill.
  printf '%s\n' "$idx" "$lower" "$br" "$RELEASE" >"$hd/boot"
  for cg in $(hierarchies); do
    mkdir -p "$cg/$CGROUP_PARENT/$lab/$h"
    if [ -f "$cg/cpuset.cpus" ]; then
      for f in cpuset.cpus cpuset.mems; do
        cat "$cg/$f" >"$cg/$CGROUP_PARENT/$f" 2>/dev/null || true
        cat "$cg/$f" >"$cg/$CGROUP_PARENT/$lab/$f" 2>/dev/null || true
        cat "$cg/$f" >"$cg/$CGROUP_PARENT/$lab/$h/$f"
      done
    fi
  done
  # The host's end of its veth is named after the machine. A lab just removed with the same index may
  # still be tearing its network namespaces down: wait for (or remove) a link left with this name, or
  # nspawn fails "Failed to add new veth interfaces: File exists".
  local veth="vb-c$idx-$h" i
  veth=${veth:0:15}
  for i in $(seq 1 50); do
    ip link show "$veth" >/dev/null 2>&1 || break
    ip link delete "$veth" 2>/dev/null || true
    sleep 0.2
  done
  # Debian 13's systemd (257) refuses to boot on cgroup v1 (this machine's, trap 3) unless told to, on its
  # command line: in a container, init's arguments are its kernel command line.
  local init_args=""
  [ "$RELEASE" = trixie ] && init_args="SYSTEMD_CGROUP_ENABLE_LEGACY_FORCE=1"
  # shellcheck disable=SC2016
  INIT_ARGS=$init_args setsid unshare --mount --propagation private bash -c '
    set -e
    hd=$1 lower=$2 machine=$3 br=$4 h=$5 lab=$6 parent=$7; shift 7
    for cg in "$@"; do echo $$ >"$cg/$parent/$lab/$h/cgroup.procs"; done
    mount -t overlay overlay -o "lowerdir=$lower,upperdir=$hd/upper,workdir=$hd/work" "$hd/root"
    # A host that reboots itself (systemctl reboot: nspawn exits 133) boots again, with its disk (the
    # overlay) and a fresh /run, as a machine does; any other end is the host switched off.
    while :; do
      # A machine boots with no cgroups of its last boot: on cgroup v1 the host'"'"'s controller hierarchies
      # are this machine'"'"'s, and what its last boot made there (the kubelet'"'"'s kubepods.slice, a cgroup per
      # container) outlives it; the kubelet'"'"'s cAdvisor then spent ~3 s on each at its start (90 s after a
      # reboot). Each emptied one is removed, deepest first, before the host boots.
      for cg in "$@"; do
        find "$cg/$parent/$lab/$h" -mindepth 1 -depth -type d -exec rmdir {} + 2>/dev/null || true
      done
      mount -t tmpfs -o mode=0755 tmpfs /run
      rc=0
      systemd-nspawn --quiet --boot --directory="$hd/root" --machine="$machine" --hostname="$h" \
        --register=no --keep-unit --network-bridge="$br" --capability=all --system-call-filter=@keyring \
        --bind="$hd/containerd:/var/lib/containerd" --resolv-conf=off --timezone=off --link-journal=no \
        --console=read-only $INIT_ARGS || rc=$?
      umount -l /run
      [ "$rc" = 133 ] || exit "$rc"
      echo "lab: $h rebooted itself: booting it again" >&2
    done
  ' _ "$hd" "$lower" "c$idx-$h" "$br" "$h" "$lab" "$CGROUP_PARENT" $(hierarchies) \
    </dev/null >"$hd/console.log" 2>&1 8>&- &
  echo $! >"$hd/pid"
}

wait_ssh() {
  local dir=$1; shift
  local deadline=$(( $(date +%s) + SSH_TIMEOUT )) h pending=("$@") left
  while [ ${#pending[@]} -gt 0 ]; do
    left=()
    for h in "${pending[@]}"; do
      ssh -F "$dir/ssh_config" -o ConnectTimeout=2 "$h" true >/dev/null 2>&1 || left+=("$h")
    done
    pending=("${left[@]+"${left[@]}"}")
    [ ${#pending[@]} -eq 0 ] && return 0
    [ "$(date +%s)" -ge "$deadline" ] && { log "not reachable after ${SSH_TIMEOUT}s: ${pending[*]}"; return 1; }
    sleep 0.3
  done
}

write_inventory() {
  local lab=$1 dir=$2 cps=$3; shift 3
  local state=$LAB_ROOT/labs/$lab h role
  if [ -f "$state/vm" ]; then write_vm_inventory "$@"; return; fi
  {
    echo "# clusterctl inventory of lab $lab, written by test/lab/lab.sh."
    echo "cluster:"
    echo "  name: $lab"
    case $(cat "$state/ip" 2>/dev/null) in
      dual) printf '  networking:\n    podSubnet: 10.244.0.0/16,fd00:10:244::/56\n    serviceSubnet: 10.96.0.0/12,fd00:10:96::/112\n' ;;
      6) printf '  networking:\n    podSubnet: fd00:10:244::/56\n    serviceSubnet: fd00:10:96::/112\n' ;;
    esac
    echo "  kubelet:"
    # The hosts share this machine's disk, mostly not theirs: kubelets evict Pods when 1 GiB is left, not
    # at the default 10-15% of the whole disk (which a machine with big build caches is always under).
    echo "    extraArgs:"
    echo "      eviction-hard: memory.available<100Mi,nodefs.available<1Gi,imagefs.available<1Gi"
    if [ "$(stat -fc %T /sys/fs/cgroup)" != cgroup2fs ]; then
      echo "    # This machine's hosts use cgroup v1: kubelets from v1.35 run on it only with failCgroupV1 false."
      echo "    failCgroupV1: false"
    fi
    echo "ssh:"
    echo "  user: root"
    echo "  identityFiles: [$dir/id_ed25519]"
    echo "  knownHosts: [$dir/known_hosts]"
    echo "hosts:"
    for h in "$@"; do
      role=worker
      [[ $h == cp* ]] && role=control-plane
      echo "  - name: $h"
      echo "    address: $(cat "$state/hosts/$h/address")"
      [ -f "$state/hosts/$h/address6" ] && echo "    internalAddress: [$(cat "$state/hosts/$h/address"), \"$(cat "$state/hosts/$h/address6")\"]"
      echo "    roles: [$role]"
    done
  } >"$dir/hosts.yaml"
}

# write_vm_inventory: VMs are used with the inventory's defaults (cgroup v2, no eviction override), each
# host's key pinned by its ED25519 fingerprint, as ssh-keyscan | ssh-keygen -lf - prints it first.
write_vm_inventory() {
  {
    echo "# clusterctl inventory of lab $lab (VMs), written by test/lab/lab.sh."
    echo "cluster:"
    echo "  name: $lab"
    echo "ssh:"
    echo "  user: root"
    echo "  identityFiles: [$dir/id_ed25519]"
    echo "hosts:"
    for h in "$@"; do
      role=worker
      [[ $h == cp* ]] && role=control-plane
      echo "  - name: $h"
      echo "    address: $(cat "$state/hosts/$h/address")"
      echo "    roles: [$role]"
      echo "    ssh:"
      echo "      hostKey: $(cat "$state/hosts/$h/hostkey")"
    done
  } >"$dir/hosts.yaml"
}

# ---- down ----
cmd_down() {
  require_root
  lock
  case ${1:-} in
    --all) local d; for d in "$LAB_ROOT"/labs/*/; do [ -d "$d" ] && down_locked "$(basename "$d")"; done ;;
    --name) [ -n "${2:-}" ] || die "down: --name NAME"; down_locked "$2" ;;
    *) die "down: --name NAME or --all" ;;
  esac
  # Nothing left: put the machine's sysctls back.
  if ! compgen -G "$LAB_ROOT/labs/*/" >/dev/null; then restore_sysctls; fi
}

down_locked() {
  local lab=$1 state=$LAB_ROOT/labs/$1 h pid cg deadline
  [ -d "$state" ] || { log "lab $lab is not up"; return 0; }
  if [ -f "$state/vm" ]; then
    for hd in "$state"/hosts/*/; do vm_stop "$hd"; done
  fi
  # Ask every host to power off (nspawn turns SIGTERM into a clean shutdown), then kill what is left.
  for hd in "$state"/hosts/*/; do
    pid=$(cat "$hd/pid" 2>/dev/null || true)
    [ -n "$pid" ] && kill -TERM "$pid" 2>/dev/null || true
  done
  deadline=$(( $(date +%s) + 10 ))
  for hd in "$state"/hosts/*/; do
    pid=$(cat "$hd/pid" 2>/dev/null || true)
    while [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && [ "$(date +%s)" -lt "$deadline" ]; do sleep 0.2; done
  done
  for cg in $(hierarchies); do
    [ -d "$cg/$CGROUP_PARENT/$lab" ] || continue
    for _ in 1 2 3 4 5; do
      local procs
      procs=$(find "$cg/$CGROUP_PARENT/$lab" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u)
      [ -z "$procs" ] && break
      kill -KILL $procs 2>/dev/null || true
      sleep 0.3
    done
  done
  for cg in $(hierarchies); do
    [ -d "$cg/$CGROUP_PARENT/$lab" ] && find "$cg/$CGROUP_PARENT/$lab" -depth -type d -exec rmdir {} + 2>/dev/null || true
    rmdir "$cg/$CGROUP_PARENT" 2>/dev/null || true
  done
  local idx dir
  idx=$(cat "$state/index" 2>/dev/null || true)
  if [ -n "$idx" ]; then
    for hd in "$state"/hosts/*/; do
      h=$(basename "$hd"); v="vb-c$idx-$h"; ip link del "${v:0:15}" 2>/dev/null || true
    done
    ip link del "cclab$idx" 2>/dev/null || true
    local k
    for k in 1 2 3; do
      ip link del "rt$idx-$k" 2>/dev/null || true
      ip link del "cclab${idx}s$k" 2>/dev/null || true
    done
    ip link del "rt$idx-0" 2>/dev/null || true
    ip netns del "cclab$idx-r" 2>/dev/null || true
  fi
  dir=$(cat "$state/dir" 2>/dev/null || true)
  if [ -n "$dir" ] && [ -d "$dir" ]; then
    rm -f "$dir/hosts.yaml" "$dir/known_hosts" "$dir/ssh_config" "$dir/id_ed25519" "$dir/id_ed25519.pub" "$dir/timings"
  fi
  # Overlays and binds lived in the hosts' own mount namespaces; if any host survived, say so, keep state.
  if grep -qs " $state/" /proc/mounts; then
    die "mounts under $state remain; not removing it"
  fi
  rm -rf "$state"
  log "lab $lab removed"
}

cmd_list() {
  local d
  for d in "$LAB_ROOT"/labs/*/; do
    [ -d "$d" ] || continue
    echo "$(basename "$d") 10.250.$(cat "$d/index").0/24 $(ls "$d/hosts" | tr '\n' ' ')"
  done
}

# kill --name LAB HOST: the host loses power: every process in its cgroups is killed at once (tests of a
# node failure). down still cleans up after it.
cmd_kill() {
  require_root
  [ "${1:-}" = --name ] && [ -n "${2:-}" ] && [ -n "${3:-}" ] || die "kill: --name LAB HOST"
  local lab=$2 h=$3 cg procs
  [ -d "$LAB_ROOT/labs/$lab/hosts/$h" ] || die "kill: lab $lab has no host $h"
  kill -KILL "$(cat "$LAB_ROOT/labs/$lab/hosts/$h/pid" 2>/dev/null)" 2>/dev/null || true
  for _ in 1 2 3 4 5; do
    procs=$(for cg in $(hierarchies); do find "$cg/$CGROUP_PARENT/$lab/$h" -name cgroup.procs -exec cat {} + 2>/dev/null; done | sort -u)
    [ -z "$procs" ] && break
    kill -KILL $procs 2>/dev/null || true
    sleep 0.3
  done
  log "host $h of lab $lab killed"
}

# start --name LAB HOST...: hosts that lost power (kill) are switched on again: they boot from their disks
# (the overlays kept), with the addresses they had.
cmd_start() {
  require_root
  [ "${1:-}" = --name ] && [ -n "${2:-}" ] && [ -n "${3:-}" ] || die "start: --name LAB HOST..."
  local lab=$2 h hd idx lower br; shift 2
  RELEASE=bookworm
  lock
  for h in "$@"; do
    hd=$LAB_ROOT/labs/$lab/hosts/$h
    [ -f "$hd/boot" ] || die "start: lab $lab has no host $h"
    # Running: its wrapper still has nspawn (a killed wrapper may linger as a zombie until it is reaped).
    if pgrep -P "$(cat "$hd/pid" 2>/dev/null)" -x systemd-nspawn >/dev/null 2>&1; then log "host $h of lab $lab is running"; continue; fi
    { read -r idx; read -r lower; read -r br; read -r RELEASE; } <"$hd/boot"
    start_host "$lab" "$idx" "$h" "$hd" "$lower" "$br"
    log "host $h of lab $lab switched on"
  done
  flock -u 8
}

# reboot --name LAB HOST...: each host reboots itself, as a machine does on ctrl-alt-del: its systemd gets
# SIGINT, stops its units and reboots, and the host boots again (start_host's loop). It returns at once;
# the caller waits for SSH and a new boot ID.
cmd_reboot() {
  require_root
  [ "${1:-}" = --name ] && [ -n "${2:-}" ] && [ -n "${3:-}" ] || die "reboot: --name LAB HOST..."
  local lab=$2 h pid init; shift 2
  for h in "$@"; do
    pid=$(cat "$LAB_ROOT/labs/$lab/hosts/$h/pid" 2>/dev/null) || die "reboot: lab $lab has no host $h"
    # The host's init: the systemd that nspawn (the wrapper's child) started.
    init=$(pgrep -P "$(pgrep -P "$pid" -x systemd-nspawn | head -n 1)" -x systemd | head -n 1) || true
    [ -n "$init" ] || die "reboot: host $h of lab $lab is not running"
    kill -INT "$init"
    log "host $h of lab $lab rebooting"
  done
}

# link --name LAB HOST up|down: the host's link to the bridge (its veth's end on the machine) goes down or
# up: packets to and from it are lost, as with a cut cable, while the host itself runs on (fault tests).
cmd_link() {
  require_root
  [ "${1:-}" = --name ] && [ -n "${2:-}" ] && [ -n "${3:-}" ] && [[ ${4:-} =~ ^(up|down)$ ]] || die "link: --name LAB HOST up|down"
  local lab=$2 h=$3 state=$4 idx v
  [ -d "$LAB_ROOT/labs/$lab/hosts/$h" ] || die "link: lab $lab has no host $h"
  idx=$(cat "$LAB_ROOT/labs/$lab/index")
  v="vb-c$idx-$h"
  ip link set "${v:0:15}" "$state"
  log "host $h of lab $lab: link $state"
}

case ${1:-} in
  up) shift; cmd_up "$@" ;;
  link) shift; cmd_link "$@" ;;
  down) shift; cmd_down "$@" ;;
  kill) shift; cmd_kill "$@" ;;
  start) shift; cmd_start "$@" ;;
  reboot) shift; cmd_reboot "$@" ;;
  list) cmd_list ;;
  *) echo "usage: $0 up|down|kill|start|reboot|link|list (see the header of this file)" >&2; exit 2 ;;
esac
