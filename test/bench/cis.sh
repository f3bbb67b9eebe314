#!/usr/bin/env bash
# cis.sh — the CIS benchmark run (make bench-cis): on a 1+2 lab cluster made by clusterctl up with
# cluster.security.profile cis, then with the defaults, kube-bench (test/lab/kube-bench.sh) runs the CIS
# Kubernetes Benchmark v1.12's checks on the control-plane node (master, etcd, controlplane, node) and a
# worker (node): per section, automated checks passed and failed, manual ones passed and not, and the ids
# of every check not passed. With it, what the profile costs: up's time, and the API server's memory (RSS)
# a minute after up. The lab's hosts share this machine's kernel: for the profile its kernel gets the
# settings the kubelets protect, and its own back after.
#
#   PROFILES="cis default" RUNS=1 test/bench/cis.sh
set -euo pipefail
exec 9>&-
PROFILES=${PROFILES:-"cis default"}
RUNS=${RUNS:-1}
NAME=benchcis
# shellcheck source=lablib.sh
. "$(dirname "$0")/lablib.sh"
KB=$("$REPO/test/lab/kube-bench.sh")

# The kernel settings the profile's kubelets protect (tasks/kubelet.KernelDefaults), and this machine's own.
settings="vm.overcommit_memory=1 vm.panic_on_oom=0 kernel.panic=10 kernel.panic_on_oops=1 kernel.keys.root_maxkeys=1000000 kernel.keys.root_maxbytes=25000000"
saved=
for s in $settings; do saved="$saved ${s%%=*}=$(sysctl -n "${s%%=*}")"; done
restore() { for s in $saved; do sysctl -q -w "$s"; done; cleanup; }
trap restore EXIT

# bench HOST TARGETS DIR: kube-bench's JSON report of HOST in DIR/HOST.json.
bench() {
  tar -C "$KB" -cf - kube-bench cfg | ssh -F "$3/ssh_config" "$1" 'rm -rf /root/kube-bench && mkdir -p /root/kube-bench && tar -C /root/kube-bench -xf -'
  ssh -F "$3/ssh_config" "$1" "/root/kube-bench/kube-bench run --config-dir /root/kube-bench/cfg --config /root/kube-bench/cfg/config.yaml --benchmark cis-1.12 --targets $2 --json 2>/dev/null" >"$3/$1.json"
}
# summary FILE: a line per section.
summary() {
  jq -r '.Controls[] | .id as $s | [.tests[].results[]] |
    "  section \($s): automated \([.[] | select(.scored and .status=="PASS")] | length) passed, \([.[] | select(.scored and .status!="PASS")] | length) failed; manual \([.[] | select((.scored|not) and .status=="PASS")] | length) passed, \([.[] | select((.scored|not) and .status!="PASS")] | length) not; not passed: \([.[] | select(.status!="PASS") | "\(.test_number)\(if .scored then "" else "m" end)"] | join(" "))"' "$1"
}

for run in $(seq 1 "$RUNS"); do
  for profile in $PROFILES; do
    dir=$W/$profile-$run
    if [ "$profile" = cis ]; then for s in $settings; do sysctl -q -w "$s"; done; else for s in $saved; do sysctl -q -w "$s"; done; fi
    lab_cluster 1+2 "$dir"
    [ "$profile" = default ] || sed -i "s|^  artifacts: \(.*\)\$|  artifacts: \1\n  security:\n    profile: $profile|" "$dir/cluster.yaml"
    "$W/clusterctl" up -i "$dir/cluster.yaml" -o json >"$dir/up.json" 2>"$dir/up.err" || { tail -5 "$dir/up.err" >&2; exit 1; }
    up=$(jq -r 'select(.type=="up_result") | .duration_ms/1000' "$dir/up.json")
    sleep 60
    rss=$(ssh -F "$dir/ssh_config" cp1 'ps -o rss= -C kube-apiserver' | awk '{s+=$1} END {printf "%d", s/1024}')
    bench cp1 master,etcd,controlplane,node "$dir"
    bench w1 node "$dir"
    echo "profile $profile, run $run: up ${up} s, the API server's RSS a minute after ${rss} MiB"
    echo " cp1 (master,etcd,controlplane,node):"; summary "$dir/cp1.json"
    echo " w1 (node):"; summary "$dir/w1.json"
    "$REPO/test/lab/lab.sh" down --name "$lab" >/dev/null 2>&1
  done
done
