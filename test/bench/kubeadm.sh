#!/usr/bin/env bash
# kubeadm.sh — clusterctl beside kubeadm itself (make bench-kubeadm): for each size, RUNS clusters made by
# `clusterctl up` and RUNS made by a scripted `kubeadm init` + `kubeadm join`, alternating, each on fresh
# lab hosts (the node layer: systemd, OpenSSH, the Debian runtime) with the same artifacts, until every
# Node is Ready and CoreDNS answers (dnsq, on the first node, asks the cluster's DNS Service for
# kubernetes.default). This script is the kubeadm side, written for this comparison only.
#
# The kubeadm path is kubeadm's documented one, made as fast as it honestly can be:
# - before its clock starts ("prep", reported apart), every host gets what an operator installs for
#   kubeadm: the runtime (containerd, runc, the CNI plugins), the kubelet with its unit and kubeadm's
#   drop-in, the kernel settings, and the images imported — all taken from a node clusterctl made in this
#   benchmark (the same binaries and runtime configuration), with kubeadm and kubectl of the artifacts;
# - then `kubeadm init` on cp1 with the same cluster settings (version, pod and Service ranges, the
#   systemd cgroup driver, failCgroupV1 false and the lab's eviction thresholds, kube-proxy in iptables mode
#   without touching conntrack limits) and a bootstrap token chosen up front; preflight errors are ignored,
#   as the lab's hosts are containers (kubeadm's kernel checks do not apply);
# - then at once: `kubeadm join` on every worker, and the pod network — the flannel objects clusterctl
#   applied in its cluster of the same size (the same DaemonSet, image and net-conf), and on each node the
#   bridge configuration with its range that clusterctl writes (flannel's own CNI plugin would write the
#   same from flanneld's subnet.env; the artifacts carry no image of it) once the node has its range;
# - then until every Node is Ready, and until CoreDNS answers.
# clusterctl's time is `clusterctl up` from the same hosts (it pushes the binaries and images itself: that
# is its job) with cni.plugin flannel, and then until CoreDNS answers.
#
#   SIZES="1+2 1+5" RUNS=5 test/bench/kubeadm.sh
#
# PREPARED=1 (the default) adds, after each pair, a third run: `clusterctl up` on hosts prepared as
# kubeadm's are (the same prep, not counted; the image archives left where clusterctl puts them), which
# then pushes and imports nothing: the two tools' own work beside each other, from the same state.
#
# VERBOSE=1 runs clusterctl with -vv: each remote command and upload with its host and time in its stderr
# (kept with KEEP=1, in the run's up.err); the debug log costs the runs a little time.
#
# It prints a line per run, then, last, one line per size: "bench-kubeadm: SIZE clusterctl median X s,
# kubeadm median Y s, ratio X/Y" and the median phases of each.
set -euo pipefail
exec 9>&-
SIZES=${SIZES:-"1+2 1+5"}
RUNS=${RUNS:-5}
PREPARED=${PREPARED:-1}
VV=()
[ -z "${VERBOSE:-}" ] || VV=(-vv)
NAME=benchkubeadm
# shellcheck source=lablib.sh
. "$(dirname "$0")/lablib.sh"

KUBEADM=$ART/tools/linux-amd64/kubeadm
[ -x "$KUBEADM" ] || { echo "$NAME: no kubeadm in $ART/tools: make artifacts" >&2; exit 1; }
(cd "$REPO" && CGO_ENABLED=0 go build -trimpath -o "$W/dnsq" ./test/bench/cmd/dnsq)
sec() { echo "$1" | awk '{printf "%.1f", $1/1000}'; }
on() { local dir=$1 host=$2; shift 2; ssh -F "$dir/ssh_config" "$host" "$@"; }
# waitall PID...: waits for each background job; the first that failed fails the benchmark.
waitall() { local p; for p in "$@"; do wait "$p" || exit 1; done; }
# The runtime, kubelet and images a node clusterctl made has (the paths TestKubeadm's prepareForKubeadm
# copies): what the kubeadm hosts are prepared with.
MODEL_PATHS="usr/local/bin/kubelet usr/local/bin/containerd usr/local/bin/containerd-shim-runc-v2 usr/local/bin/ctr usr/local/bin/crictl
usr/local/sbin/runc opt/cni/bin etc/systemd/system/containerd.service etc/systemd/system/kubelet.service
etc/systemd/system/kubelet.service.d etc/containerd/config.toml etc/crictl.yaml etc/sysctl.d/99-kubernetes.conf
etc/modules-load.d/kubernetes.conf var/lib/clusterctl/images"

# hosts DIR: "name address" of each host lab.sh made in DIR.
hosts() { awk '/^  - name: /{n=$3} /^    address: /{print n, $2}' "$1/hosts.yaml"; }

# fresh SIZE DIR: new lab hosts for SIZE in DIR, dnsq on cp1.
fresh() {
  local cps=${1%+*} workers=${1#*+}
  "$REPO/test/lab/lab.sh" down --name "$lab" >/dev/null 2>&1 || true
  mkdir -p "$2"
  "$REPO/test/lab/lab.sh" up --name "$lab" --dir "$2" --hosts $((cps + workers)) --control-planes "$cps" >/dev/null 2>&1
  on "$2" cp1 'cat >/usr/local/sbin/dnsq && chmod 0755 /usr/local/sbin/dnsq' <"$W/dnsq"
}

# clusterctl_run SIZE DIR [prepared]: one clusterctl run; sets total (ms) and phases. With prepared, on
# hosts prepared as kubeadm's are (prepare: not counted, prep set as for kubeadm).
clusterctl_run() {
  local dir=$2 t0 t1 t2 b0
  fresh "$1" "$dir"
  if [ -n "${3:-}" ]; then t0=$(ms); prepare "$dir" clusterctl; prep=$(($(ms) - t0)); fi
  lab_inventory "$dir" | sed "s|^  name: $lab\$|  name: $lab\n  cni:\n    plugin: flannel|" >"$dir/cluster.yaml"
  b0=$(busy) t0=$(ms)
  "$W/clusterctl" up "${VV[@]}" -i "$dir/cluster.yaml" -o json >"$dir/up.json" 2>"$dir/up.err" || { tail -5 "$dir/up.err" >&2; exit 1; }
  t1=$(ms)
  on "$dir" cp1 dnsq >/dev/null || { echo "$NAME: CoreDNS does not answer in clusterctl's cluster" >&2; exit 1; }
  t2=$(ms) cpu=$(echo "$(busy) - $b0" | bc -l)
  total=$((t2 - t0))
  phases="$(jq -r 'select(.type=="up_result") | [.phases[] | select(.duration_ms >= 50) | "\(.name)=\(.duration_ms/100|round/10)"] | join(" ")' "$dir/up.json") dns=$(sec $((t2 - t1)))"
  [ -f "$W/model.tar" ] || [ -n "${3:-}" ] && return 0
  # The model for the kubeadm hosts: cp1's runtime, kubelet and images, flannel's objects, the bridge
  # configuration.
  # shellcheck disable=SC2086
  on "$dir" cp1 "tar -C / -cf - $(tr '\n' ' ' <<<"$MODEL_PATHS")" >"$W/model.tar"
  on "$dir" cp1 'cat /etc/cni/net.d/10-clusterctl-flannel.conflist' >"$W/conflist"
  on "$dir" cp1 'kubectl --kubeconfig /etc/kubernetes/admin.conf get -o json namespace/kube-flannel serviceaccount/flannel -n kube-flannel clusterrole/flannel clusterrolebinding/flannel configmap/kube-flannel-cfg daemonset/kube-flannel-ds' |
    jq 'del(.items[].status) | del(.items[].metadata | .uid, .resourceVersion, .creationTimestamp, .generation, .managedFields, .annotations) | del(.items[].spec.finalizers)' >"$W/flannel.json"
  mkdir -p "$W/tools/usr/local/bin"
  cp "$KUBEADM" "$ART/bin/linux-amd64/kubectl" "$W/tools/usr/local/bin/"
}

# kubeadm_config CPADDR TOKEN: kubeadm's configuration for cp1, the same cluster settings as clusterctl's.
kubeadm_config() {
  cat <<EOF
apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
bootstrapTokens:
- token: "$2"
  ttl: 1h0m0s
localAPIEndpoint:
  advertiseAddress: $1
nodeRegistration:
  name: cp1
  criSocket: unix:///run/containerd/containerd.sock
  kubeletExtraArgs:
  - {name: node-ip, value: $1}
  - {name: eviction-hard, value: "memory.available<100Mi,nodefs.available<1Gi,imagefs.available<1Gi"}
  ignorePreflightErrors: [all]
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: $K8S_VERSION
clusterName: $lab
networking:
  podSubnet: 10.244.0.0/16
  serviceSubnet: 10.96.0.0/12
---
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: systemd
failCgroupV1: false
---
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
conntrack:
  maxPerCore: 0
EOF
}

# join_config NAME ADDR CPADDR TOKEN HASH: kubeadm's join configuration for a worker.
join_config() {
  cat <<EOF
apiVersion: kubeadm.k8s.io/v1beta4
kind: JoinConfiguration
discovery:
  bootstrapToken:
    apiServerEndpoint: $3:6443
    token: "$4"
    caCertHashes: ["$5"]
nodeRegistration:
  name: $1
  criSocket: unix:///run/containerd/containerd.sock
  kubeletExtraArgs:
  - {name: node-ip, value: $2}
  - {name: eviction-hard, value: "memory.available<100Mi,nodefs.available<1Gi,imagefs.available<1Gi"}
  ignorePreflightErrors: [all]
EOF
}

# cni DIR NAME: once the Node NAME has its range, its bridge configuration (clusterctl's, with the range).
cni() {
  local dir=$1 cidr="" i=0
  while [ -z "$cidr" ]; do
    cidr=$(on "$dir" cp1 "kubectl --kubeconfig /etc/kubernetes/admin.conf get node $2 -o jsonpath={.spec.podCIDR} 2>/dev/null" || true)
    [ -n "$cidr" ] || sleep 0.2
    i=$((i + 1)); [ $i -lt 1500 ] || { echo "$NAME: node $2 got no pod range" >&2; exit 1; }
  done
  sed -E "s|\"subnet\": \"[^\"]+\"|\"subnet\": \"$cidr\"|" "$W/conflist" | on "$dir" "$2" 'cat >/etc/cni/net.d/10-flannel.conflist'
}

# prepare DIR FOR [TOKEN]: every host of DIR given what an operator installs for kubeadm (the model's
# runtime, kubelet, unit files, kernel settings and images, imported), kubeadm and kubectl, and the route to
# the Service range. FOR kubeadm: clusterctl's files go once imported, and cp1 gets its kubeadm
# configuration and flannel's objects, the workers their join configuration (TOKEN); FOR clusterctl: the
# image archives stay where the model had them, as clusterctl would have pushed them (it then finds them
# imported and pushes nothing it finds there).
prepare() {
  local dir=$1 for=$2 token=${3:-} cp name addr keep pids=()
  cp=$(hosts "$dir" | awk '$1=="cp1"{print $2}')
  keep='rm -rf /var/lib/clusterctl &&'
  [ "$for" = kubeadm ] || keep=
  while read -r name addr; do
    (
      on "$dir" "$name" 'tar -C / -xf -' <"$W/model.tar"
      tar -C "$W/tools" -cf - usr | on "$dir" "$name" 'tar -C / -xf -'
      # The lab's hosts have no default route, which kubeadm's documentation requires: the route to the
      # Service range clusterctl gives such a host instead.
      on "$dir" "$name" "sysctl -q --system >/dev/null 2>&1; systemctl daemon-reload && systemctl enable -q containerd kubelet && systemctl restart containerd &&
        for f in /var/lib/clusterctl/images/*.tar; do ctr -n k8s.io images import \"\$f\" >/dev/null 2>/tmp/import.err || { cat /tmp/import.err >&2; exit 1; }; done &&
        $keep ip route replace 10.96.0.0/12 dev \$(ip -o -4 addr show | awk '\$4 ~ /^$addr\// {print \$2; exit}')"
      [ "$for" = kubeadm ] || exit 0
      if [ "$name" = cp1 ]; then
        kubeadm_config "$cp" "$token" | on "$dir" cp1 'cat >/root/kubeadm.yaml'
        on "$dir" cp1 'cat >/root/flannel.json' <"$W/flannel.json"
      else
        join_config "$name" "$addr" "$cp" "$token" "HASH" | on "$dir" "$name" 'cat >/root/join.yaml'
      fi
    ) &
    pids+=($!)
  done < <(hosts "$dir")
  waitall "${pids[@]}"
}

# kubeadm_run SIZE DIR: one kubeadm run; sets total (ms), phases and prep (ms).
kubeadm_run() {
  local dir=$2 t0 t1 t2 t3 t4 b0 token hash cp name addr r pids=()
  fresh "$1" "$dir"
  cp=$(hosts "$dir" | awk '$1=="cp1"{print $2}')
  r=$(od -An -N11 -tx1 /dev/urandom | tr -d ' \n')
  token=${r:0:6}.${r:6:16}
  t0=$(ms)
  prepare "$dir" kubeadm "$token"
  prep=$(($(ms) - t0))

  b0=$(busy) t0=$(ms)
  on "$dir" cp1 'kubeadm init --config /root/kubeadm.yaml' >"$dir/init.log" 2>&1 || { tail -20 "$dir/init.log" >&2; exit 1; }
  t1=$(ms)
  hash=$(grep -o 'sha256:[0-9a-f]\{64\}' "$dir/init.log" | head -1)
  [ -n "$hash" ] || { echo "$NAME: no CA hash in kubeadm init's output" >&2; exit 1; }
  : >"$dir/joined"
  (on "$dir" cp1 'kubectl --kubeconfig /etc/kubernetes/admin.conf apply -f /root/flannel.json' >/dev/null && cni "$dir" cp1) &
  pids+=($!)
  while read -r name addr; do
    [ "$name" = cp1 ] && continue
    (
      on "$dir" "$name" "sed -i 's/HASH/$hash/' /root/join.yaml && kubeadm join --config /root/join.yaml" >"$dir/join-$name.log" 2>&1 || { tail -20 "$dir/join-$name.log" >&2; exit 1; }
      echo "$(ms)" >>"$dir/joined"
      cni "$dir" "$name"
    ) &
    pids+=($!)
  done < <(hosts "$dir")
  waitall "${pids[@]}"
  t2=$(sort -n "$dir/joined" | tail -1)
  t3=$(ms)
  local n want
  want=$(hosts "$dir" | wc -l)
  n=0
  until [ "$n" = "$want" ]; do
    n=$(on "$dir" cp1 'kubectl --kubeconfig /etc/kubernetes/admin.conf get nodes --no-headers' | awk '$2=="Ready"' | wc -l)
    [ "$n" = "$want" ] || sleep 0.2
    [ $(($(ms) - t0)) -lt 600000 ] || { echo "$NAME: kubeadm's nodes not Ready in 10 minutes" >&2; exit 1; }
  done
  t4=$(ms)
  on "$dir" cp1 dnsq >/dev/null || { echo "$NAME: CoreDNS does not answer in kubeadm's cluster" >&2; exit 1; }
  total=$(($(ms) - t0)) cpu=$(echo "$(busy) - $b0" | bc -l)
  phases="init=$(sec $((t1 - t0))) join=$(sec $((t2 - t1))) network=$(sec $((t3 - t1))) ready=$(sec $((t4 - t3))) dns=$(sec $((t0 + total - t4)))"
}

# The CPU column is what the whole machine spent during the run (the hosts are its containers), in CPU-s:
# divided by the CPUs, the least wall time the run could take here.
printf '%-5s %-10s %4s %8s %6s  %s\n' size tool run total_s cpu_s "phases (s)"
declare -A totals=() phaselog=()
for size in $SIZES; do
  rm -f "$W/model.tar"
  for run in $(seq 1 "$RUNS"); do
    clusterctl_run "$size" "$W/$size-$run-clusterctl"
    printf '%-5s %-10s %4s %8s %6.1f  %s\n' "$size" clusterctl "$run" "$(sec "$total")" "$cpu" "$phases"
    totals[$size/clusterctl]+="$total "
    phaselog[$size/clusterctl]+="$phases"$'\n'
    kubeadm_run "$size" "$W/$size-$run-kubeadm"
    printf '%-5s %-10s %4s %8s %6.1f  %s (prep, not counted: %s s)\n' "$size" kubeadm "$run" "$(sec "$total")" "$cpu" "$phases" "$(sec "$prep")"
    totals[$size/kubeadm]+="$total "
    phaselog[$size/kubeadm]+="$phases"$'\n'
    [ "$PREPARED" = 1 ] || continue
    clusterctl_run "$size" "$W/$size-$run-prepared" prepared
    printf '%-5s %-10s %4s %8s %6.1f  %s (prep, not counted: %s s)\n' "$size" prepared "$run" "$(sec "$total")" "$cpu" "$phases" "$(sec "$prep")"
    totals[$size/prepared]+="$total "
    phaselog[$size/prepared]+="$phases"$'\n'
  done
  "$REPO/test/lab/lab.sh" down --name "$lab" >/dev/null 2>&1
done
# medians PHASELOG: each phase's median over the runs (a run without it counting 0), "name=s ...", in the
# order of the first run.
medians() {
  local p out=""
  for p in $(head -1 <<<"$1" | tr ' ' '\n' | cut -d= -f1); do
    # shellcheck disable=SC2046
    out+="$p=$(median $(awk -v p="$p" '{v = 0; for (i = 1; i <= NF; i++) {split($i, kv, "="); if (kv[1] == p) v = kv[2]} print v}' <<<"${1%$'\n'}")) "
  done
  echo "${out% }"
}
for size in $SIZES; do
  [ "$PREPARED" = 1 ] || break
  # shellcheck disable=SC2086
  c=$(median ${totals[$size/prepared]}) k=$(median ${totals[$size/kubeadm]})
  printf 'bench-kubeadm-prepared: %s clusterctl on hosts prepared as kubeadm'"'"'s median %s s, kubeadm median %s s, ratio %s (clusterctl: %s)\n' "$size" "$(sec "$c")" "$(sec "$k")" \
    "$(echo "$c $k" | awk '{printf "%.2f", $1/$2}')" "$(medians "${phaselog[$size/prepared]}")"
done
for size in $SIZES; do
  # shellcheck disable=SC2086
  c=$(median ${totals[$size/clusterctl]}) k=$(median ${totals[$size/kubeadm]})
  printf 'bench-kubeadm: %s clusterctl median %s s, kubeadm median %s s, ratio %s (clusterctl: %s; kubeadm: %s)\n' "$size" "$(sec "$c")" "$(sec "$k")" \
    "$(echo "$c $k" | awk '{printf "%.2f", $1/$2}')" "$(medians "${phaselog[$size/clusterctl]}")" "$(medians "${phaselog[$size/kubeadm]}")"
done
