# lablib.sh — sourced by the lab benchmarks (up.sh, addnode.sh, rotate.sh, rss.sh, upgrade.sh): the checks they share, a work directory
# $W, clusterctl built from this checkout into it, and the lab $lab removed on exit. The caller sets NAME
# (its name in messages, and the lab's). KEEP=1 keeps $W.
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
K8S_VERSION=${K8S_VERSION:-v1.37.2}
CACHE=${CLUSTERCTL_LAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/clusterctl-lab}
ART=$CACHE/$K8S_VERSION
export PATH=$PATH:/usr/local/go/bin
[ "$(id -u)" = 0 ] || { echo "$NAME: needs root (the lab)" >&2; exit 1; }
[ -f "$ART/manifest.json" ] || { echo "$NAME: no artifacts in $ART: make artifacts" >&2; exit 1; }
command -v jq >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq jq >/dev/null
[ -x /usr/bin/time ] || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq time >/dev/null

W=$(mktemp -d "/tmp/clusterctl-$NAME.XXXXXX")
lab=$NAME
# KEEP=1 keeps $W (each run's JSON events and stderr) for a closer look.
cleanup() {
  "$REPO/test/lab/lab.sh" down --name "$lab" >/dev/null 2>&1 || true
  if [ -n "${KEEP:-}" ]; then echo "$NAME: kept $W" >&2; else rm -rf "$W"; fi
}
trap cleanup EXIT
(cd "$REPO" && CGO_ENABLED=0 go build -trimpath -o "$W/clusterctl" ./cmd/clusterctl)

# build_base REV: the codes a benchmark runs, in codes: now, and with a REV (BASE=REV) base too, the code
# before a change, built from that commit into $W/clusterctl-base (a worktree removed after).
build_base() {
  codes=(now)
  [ -n "$1" ] || return 0
  codes+=(base)
  git -C "$REPO" worktree add -q --detach "$W/base-src" "$(git -C "$REPO" rev-parse --short "$1")"
  (cd "$W/base-src" && CGO_ENABLED=0 go build -trimpath -o "$W/clusterctl-base" ./cmd/clusterctl)
  git -C "$REPO" worktree remove --force "$W/base-src"
}
# bin now|base: the clusterctl of the code now, or of BASE.
bin() { if [ "$1" = base ]; then echo "$W/clusterctl-base"; else echo "$W/clusterctl"; fi; }

# lab_cluster SIZE DIR: lab hosts for a cluster of SIZE (CPS+WORKERS) in DIR, and its inventory for an
# air-gapped install there (DIR/cluster.yaml).
lab_cluster() {
  local cps=${1%+*} workers=${1#*+}
  mkdir -p "$2"
  "$REPO/test/lab/lab.sh" up --name "$lab" --dir "$2" --hosts $((cps + workers)) --control-planes "$cps" >/dev/null 2>&1
  lab_inventory "$2" >"$2/cluster.yaml"
}
# ms: the time now in milliseconds; median N...: the median of the numbers.
ms() { date +%s%3N; }
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# busy: CPU time (s) this machine spent so far, all of it (the lab's hosts are its containers): user, nice,
# system, irq, softirq, steal from /proc/stat. A run's share divided by the CPUs is the least wall time it
# could take here if every step overlapped perfectly.
busy() { awk -v hz="$(getconf CLK_TCK)" '/^cpu /{printf "%.2f\n", ($2+$3+$4+$7+$8+$9)/hz; exit}' /proc/stat; }

# cgcpu: the CPU time (ns) of every cgroup of the lab's hosts so far, one "HOST/PATH NS" line each (PATH "."
# the host's whole cgroup, else one under it: a unit of the host's systemd, its sessions, the kubelet's
# Pods), from cgroup v1's cpuacct hierarchy or cgroup v2's cpu.stat. Two of them, before and after a
# command, are what each host and each of its units spent on it (cgdiff).
cgcpu() {
  local root
  if [ -d "/sys/fs/cgroup/cpuacct/clusterctl-lab/$lab" ]; then
    root=/sys/fs/cgroup/cpuacct/clusterctl-lab/$lab
    grep -r --include=cpuacct.usage . "$root" 2>/dev/null | sed "s|^$root/||; s|/cpuacct.usage:| |; s|^cpuacct.usage:|. |"
  elif [ -d "/sys/fs/cgroup/clusterctl-lab/$lab" ]; then
    root=/sys/fs/cgroup/clusterctl-lab/$lab
    grep -r --include=cpu.stat '^usage_usec' "$root" 2>/dev/null | sed "s|^$root/||; s|/cpu.stat:usage_usec| |" | awk '{print $1, $2 * 1000}'
  fi | awk '{n=split($1, p, "/"); path=p[1] "/" (n > 1 ? substr($1, length(p[1]) + 2) : "."); print path, $2}'
}
# cgdiff BEFORE AFTER HOSTS...: what the hosts HOSTS spent between two cgcpu snapshots (files), in CPU
# seconds: their total, then by the cgroups two levels under each host (system.slice/ssh.service,
# user.slice/user-0.slice, kubepods...), summed over the hosts, largest first (the first 8).
cgdiff() {
  local before=$1 after=$2
  shift 2
  awk -v hosts="$*" 'BEGIN {n = split(hosts, hs, " "); for (i = 1; i <= n; i++) want[hs[i]] = 1}
    NR == FNR {b[$1] = $2; next}
    {split($1, p, "/"); if (!(p[1] in want)) next; d = ($2 - b[$1]) / 1e9; if (d < 0) d = 0
     rest = substr($1, length(p[1]) + 2)
     if (rest == ".") {total += d; next}
     if (split(rest, q, "/") == 2) by[rest] += d}
    END {printf "%.2f CPU-s on %d hosts (%.3f each):", total, n, total / n
      m = 0; for (k in by) m++
      for (i = 0; i < 8 && i < m; i++) {best = ""; for (k in by) if (best == "" || by[k] > by[best]) best = k
        printf " %s %.2f", best, by[best]; delete by[best]}
      print ""}' "$before" "$after"
}
# lab_inventory DIR: the inventory lab.sh wrote in DIR, for an air-gapped install from the artifacts.
lab_inventory() { sed "s|^  name: $lab\$|  name: $lab\n  kubernetesVersion: $K8S_VERSION\n  artifacts: $ART|" "$1/hosts.yaml"; }
