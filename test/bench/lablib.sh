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

# lab_inventory DIR: the inventory lab.sh wrote in DIR, for an air-gapped install from the artifacts.
lab_inventory() { sed "s|^  name: $lab\$|  name: $lab\n  kubernetesVersion: $K8S_VERSION\n  artifacts: $ART|" "$1/hosts.yaml"; }
