# Managed by clusterctl: undo on this host what `clusterctl up` made, and nothing else.
set -u
# The kubelet first, so that it restarts nothing; then the pod routes.
systemctl disable --now kubelet.service >/dev/null 2>&1
# An external etcd member, run by clusterctl's unit.
if grep -qs 'Managed by clusterctl' /etc/systemd/system/etcd.service; then
  systemctl disable --now etcd.service >/dev/null 2>&1
  rm -f /etc/systemd/system/etcd.service
fi
rm -f /etc/kubernetes/etcd-initial.env
# The etcd member's scheduled snapshots: the timer stopped, its files removed.
if grep -qs 'Managed by clusterctl' {{q (index .Snapshots.Files 1)}}; then
  systemctl disable --now -q {{.Snapshots.Timer}} >/dev/null 2>&1
  systemctl stop {{.Snapshots.Service}} >/dev/null 2>&1
fi
rm -f {{args .Snapshots.Files}}
rmdir /usr/local/lib/clusterctl 2>/dev/null
{{- if .Snapshots.Dir}}
# reset --remove-snapshots: the snapshots (by their names: nothing else of the directory), then the directory
# if that left it empty.
snapshots={{q .Snapshots.Dir}}
if [ -d "$snapshots" ]; then
  ls -1a "$snapshots" | grep -E {{q .Snapshots.NamePattern}} | while read -r f; do rm -f "$snapshots/$f"; done
  rm -f "$snapshots"/.etcd-snapshot-*.part
  rmdir "$snapshots" 2>/dev/null
fi
{{- end}}
# Its routes are in its routes file (an older clusterctl wrote them in the unit itself).
routes=/etc/systemd/system/clusterctl-pod-routes.service
if [ -f $routes ]; then
  # Its links into networkd's drop-in directories (networkd, restarted below, forgets those routes) and
  # into NetworkManager's and ifupdown's hook directories.
  for l in /etc/systemd/network/*.network.d/50-clusterctl-pod-routes.conf; do [ -L "$l" ] && rm -f "$l" && rmdir "${l%/*}" 2>/dev/null; done
  for l in /etc/NetworkManager/dispatcher.d/50-clusterctl-pod-routes /etc/network/if-up.d/clusterctl-pod-routes; do [ -L "$l" ] && rm -f "$l"; done
  { sed -n 's/^route replace \([^ ]*\) .*/\1/p' /var/lib/clusterctl/pod-routes 2>/dev/null
    sed -n 's/^ExecStart=.*ip route replace \([^ ]*\) .*/\1/p' $routes; } | while read -r dst; do ip route del "$dst" 2>/dev/null; done
  # Its rules for untranslated Service addresses, one per rule line of the file.
  sed -n 's/^rule add priority \([0-9]*\) .*/\1/p' /var/lib/clusterctl/pod-routes 2>/dev/null | while read -r p; do ip rule del priority "$p" 2>/dev/null; done
  sed -n 's/^rule add priority \([0-9]*\) .*/\1/p' /var/lib/clusterctl/pod-rules6 2>/dev/null | while read -r p; do ip -6 rule del priority "$p" 2>/dev/null; done
  systemctl disable --now clusterctl-pod-routes.service >/dev/null 2>&1
fi
# systemd-networkd's drop-in (it left those routes alone): gone, and networkd, where it runs, without it.
if [ -f {{q .Net.Networkd}} ]; then
  rm -f {{q .Net.Networkd}}
  rmdir /etc/systemd/networkd.conf.d 2>/dev/null
  systemctl is-active -q systemd-networkd && systemctl restart systemd-networkd
fi
# Every container of containerd's Kubernetes namespace (the Pods, static ones included); first, those that
# clean up after themselves when they stop, interrupted (SIGINT: kube-network-policies catches that one,
# not SIGTERM) and given 10 s to.
if command -v ctr >/dev/null 2>&1 && ctr version >/dev/null 2>&1; then
{{- range .Net.Graceful}}
  for c in $(ctr -n k8s.io containers ls -q 'labels."io.kubernetes.container.name"=={{.}}' 2>/dev/null); do
    ctr -n k8s.io tasks kill -s SIGINT "$c" >/dev/null 2>&1 && g="${g:-} $c"
  done
{{- end}}
  running() { for c in ${g:-}; do ctr -n k8s.io tasks ls 2>/dev/null | grep -q "^$c .*RUNNING" && return 0; done; return 1; }
  end=$(( $(date +%s) + 10 ))
  while [ -n "${g:-}" ] && [ "$(date +%s)" -lt $end ] && running; do sleep 0.2; done
  for t in $(ctr -n k8s.io tasks ls -q); do ctr -n k8s.io tasks kill -a -s SIGKILL "$t" >/dev/null 2>&1; done
  i=0
  while [ $i -lt 20 ] && ctr -n k8s.io tasks ls 2>/dev/null | grep -q RUNNING; do sleep 0.5; i=$((i+1)); done
  for t in $(ctr -n k8s.io tasks ls -q); do ctr -n k8s.io tasks delete -f "$t" >/dev/null 2>&1; done
  for c in $(ctr -n k8s.io containers ls -q); do ctr -n k8s.io containers delete "$c" >/dev/null 2>&1; done
fi
# The kubelet's cgroup slices (systemd cgroup driver).
for s in $(systemctl list-units --all --plain --no-legend 'kubepods*' 2>/dev/null | awk '{print $1}'); do systemctl stop "$s" >/dev/null 2>&1; done
# Shims left running: a task ctr could not delete keeps its shim, and containerd's unit stops only the
# daemon (KillMode=process). Every shim of the Kubernetes namespace is killed, and awaited (5 s at most).
k8s_shims() {
  for p in /proc/[0-9]*; do
    case $(tr '\0' ' ' <"$p/cmdline" 2>/dev/null) in *containerd-shim*" -namespace k8s.io "*) echo "${p#/proc/}" ;; esac
  done
}
kill_shims() {
  pids=$(k8s_shims)
  [ -n "$pids" ] || return 0
  kill -KILL $pids 2>/dev/null
  i=0
  while [ $i -lt 25 ] && [ -n "$(k8s_shims)" ]; do sleep 0.2; i=$((i+1)); done
}
kill_shims
# Mounts the Pods left: volumes, sandboxes' network namespaces, runtime state.
awk '$2 ~ "^(/var/lib/kubelet/|/run/containerd/io.containerd|/run/netns/cni-|/var/run/netns/cni-)" {print $2}' /proc/mounts | sort -r |
  while read -r m; do umount -l "$m" 2>/dev/null; done
for n in /run/netns/cni-*; do [ -e "$n" ] && ip netns delete "${n##*/}" 2>/dev/null; done
{{- range .Net.Links}}
ip link delete {{q .}} 2>/dev/null
{{- end}}
# kube-proxy's and the kubelet's iptables chains (KUBE-*), the pod network's, and the rules of other chains
# that jump to them,
# removed by name in one delta per table (iptables-restore --noflush commits it atomically): nothing else of
# the tables is touched, and no rule is written back.
for cmd in iptables ip6tables; do
  command -v $cmd-save >/dev/null 2>&1 || continue
  for t in nat filter mangle raw; do
    delta=$($cmd-save -t $t 2>/dev/null | awk '
      /^:({{.Chains}})/ { n++; chain[n] = substr($1, 2) }
      /^-A / && $2 !~ /^({{.Chains}})/ && / -[jg] ({{.Chains}})/ { print "-D" substr($0, 3) }
      END { for (i = 1; i <= n; i++) print "-F " chain[i]; for (i = 1; i <= n; i++) print "-X " chain[i] }')
    if [ -n "$delta" ]; then printf '*%s\n%s\nCOMMIT\n' "$t" "$delta" | $cmd-restore --noflush; fi
  done
done
# kube-proxy's nftables mode: its table of each family, by name (nothing else of nftables is touched).
if command -v nft >/dev/null 2>&1; then
  for family in ip ip6; do nft delete table $family kube-proxy 2>/dev/null; done
fi
# clusterctl's files, and the kubelet's and etcd's state.
rm -f /etc/kubernetes/manifests/etcd.yaml /etc/kubernetes/manifests/kube-apiserver.yaml \
  /etc/kubernetes/manifests/kube-controller-manager.yaml /etc/kubernetes/manifests/kube-scheduler.yaml /etc/kubernetes/manifests/clusterctl-apiserver-proxy.yaml \
  /etc/kubernetes/clusterctl-apiserver-proxy.cfg \
  /etc/kubernetes/admin.conf /etc/kubernetes/super-admin.conf /etc/kubernetes/kubelet.conf \
  /etc/kubernetes/bootstrap-kubelet.conf /etc/kubernetes/controller-manager.conf /etc/kubernetes/scheduler.conf \
  /etc/kubernetes/clusterctl-cluster
rm -rf /etc/kubernetes/pki /var/lib/kubelet /var/lib/etcd /var/lib/etcd.before-restore /var/lib/etcd.restoring
# The API server's configuration (the encryption keys among it) and its audit log.
rm -rf /etc/kubernetes/apiserver /var/log/kubernetes/audit
rmdir /var/log/kubernetes 2>/dev/null
# Profile cis: etcd's copies of its keys, and the etcd user and group if up made them.
rm -rf /etc/kubernetes/etcd-keys
if [ -e /var/lib/clusterctl/etcd-user-made ]; then userdel etcd 2>/dev/null; getent group etcd >/dev/null && groupdel etcd 2>/dev/null; fi
# The pod networks' directories; the CNI IP stores and results of the Pods' sandboxes (the pod network's,
# and the loopback containerd sets up in each of them), and the Pods' logs (the kubelet's).
{{- range .Net.Dirs}}
rm -rf {{q .}}
{{- end}}
{{- range .Net.Networks}}
rm -rf /var/lib/cni/networks/{{q .}}
rm -f /var/lib/cni/results/{{q .}}-*
{{- end}}
rm -f /var/lib/cni/results/cni-loopback-*
rmdir /var/lib/cni/results /var/lib/cni/networks /var/lib/cni 2>/dev/null
rm -rf /var/log/pods /var/log/containers
rmdir /etc/kubernetes/manifests /etc/kubernetes 2>/dev/null
systemctl disable --now clusterctl-apiserver-proxy.service >/dev/null 2>&1
rm -f /etc/haproxy/clusterctl-apiserver.cfg /etc/systemd/system/clusterctl-apiserver-proxy.service
rm -f{{range .Net.Files}} {{q .}}{{end}} $routes /etc/systemd/system/kubelet.service \
  /etc/systemd/system/kubelet.service.d/10-kubeadm.conf /etc/sysctl.d/99-kubernetes.conf /etc/modules-load.d/kubernetes.conf
rmdir /etc/systemd/system/kubelet.service.d 2>/dev/null
{{- if .Binaries}}
rm -f {{args .Binaries}}
{{- end}}
config=/etc/containerd/config.toml
if [ -f $config ] && grep -q 'Managed by clusterctl' $config; then
  rm -f $config
fi
{{- if .Runtime}}
# The runtime clusterctl installed: stopped, its unit, binaries and state (images included) removed.
systemctl disable --now containerd.service >/dev/null 2>&1
awk '$2 ~ "^(/var/lib/containerd/|/run/containerd/)" {print $2}' /proc/mounts | sort -r |
  while read -r m; do umount -l "$m" 2>/dev/null; done
# The directory itself stays: it may be a mount point.
[ -d /var/lib/containerd ] && find /var/lib/containerd -mindepth 1 -maxdepth 1 -exec rm -rf {} +
rm -rf /run/containerd /opt/containerd
rm -f {{args .Runtime}}
kill_shims
{{- end}}
# The host's own files that up replaced, kept aside at the first replacement, put back; where a marker says
# there was none, up's file is removed.
backup={{q .Backup}}
if [ -d $backup ]; then
  find $backup -type f | while IFS= read -r kept; do
    target=${kept#$backup}
    case $target in
      *{{.Absent}}) rm -f "${target%{{.Absent}}}" ;;
      *) mkdir -p "${target%/*}" && mv -f "$kept" "$target" ;;
    esac
  done
fi
# The kernel settings up applied, back to the values they had before it (kept when it first applied them).
[ -f {{q .SysctlBefore}} ] && sysctl -q -p {{q .SysctlBefore}} >/dev/null 2>&1
rm -rf /var/lib/clusterctl
rmdir /etc/containerd/certs.d/* /etc/containerd/certs.d 2>/dev/null
rmdir /opt/cni/bin /opt/cni /etc/cni/net.d /etc/cni /etc/containerd 2>/dev/null
{{- if .Runtime}}
systemctl daemon-reload
# A containerd of the host's own, its unit in charge again, runs again if it is enabled.
systemctl is-enabled -q containerd.service 2>/dev/null && systemctl start containerd.service
{{- else}}
# The CRI plugin forgets the deleted sandboxes only when it restarts; it also reads its configuration again.
systemctl is-active -q containerd && systemctl restart containerd
systemctl daemon-reload
{{- end}}
exit 0
