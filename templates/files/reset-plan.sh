# Managed by clusterctl: what `clusterctl reset` would undo on this host, read only ("action: " lines).
set -u
systemctl is-active -q kubelet.service && echo "action: stop and disable the kubelet"
grep -qs 'Managed by clusterctl' /etc/systemd/system/etcd.service && echo "action: stop and remove the etcd member's unit (external etcd)"
[ -f /etc/systemd/system/clusterctl-pod-routes.service ] && echo "action: remove the pod routes and the Service rule, and their unit"
grep -qs 'Managed by clusterctl' {{q (index .Snapshots.Files 1)}} && echo "action: stop and remove the etcd snapshots' timer, its service and script"
{{- if .Snapshots.Dir}}
n=$(ls -1a {{q .Snapshots.Dir}} 2>/dev/null | grep -Ec {{q .Snapshots.NamePattern}})
[ "$n" -gt 0 ] && echo "action: remove the $n etcd snapshots in {{.Snapshots.Dir}}"
{{- end}}
[ -f {{q .Net.Networkd}} ] && echo "action: remove systemd-networkd's drop-in {{.Net.Networkd}}"
if command -v ctr >/dev/null 2>&1 && ctr version >/dev/null 2>&1; then
  n=$(ctr -n k8s.io containers ls -q 2>/dev/null | grep -c .)
  [ "$n" -gt 0 ] && echo "action: kill and delete the $n containers of containerd's k8s.io namespace"
fi
for cmd in iptables ip6tables; do
  command -v $cmd-save >/dev/null 2>&1 || continue
  n=$($cmd-save 2>/dev/null | grep -Ec '^:({{.Chains}})')
  [ "$n" -gt 0 ] && echo "action: remove $n chains ({{.Chains}}) of $cmd and the rules jumping to them"
done
if command -v nft >/dev/null 2>&1; then
  for family in ip ip6; do
    nft list table $family kube-proxy >/dev/null 2>&1 && echo "action: remove kube-proxy's nftables table ($family kube-proxy)"
  done
fi
for p in /etc/kubernetes/pki /etc/kubernetes/apiserver /etc/kubernetes/etcd-keys /var/log/kubernetes/audit /etc/kubernetes/manifests /var/lib/kubelet /var/lib/etcd /var/lib/etcd.before-restore /var/log/pods \
  /etc/systemd/system/kubelet.service /etc/containerd/config.toml /var/lib/clusterctl; do
  [ -e "$p" ] && echo "action: remove $p"
done
[ -e /var/lib/clusterctl/etcd-user-made ] && echo "action: remove the user and group etcd"
{{- range .Net.Files}}
[ -e {{q .}} ] && echo "action: remove {{.}}"
{{- end}}
{{- range .Net.Dirs}}
[ -e {{q .}} ] && echo "action: remove {{.}}"
{{- end}}
{{- range .Net.Links}}
[ -e /sys/class/net/{{q .}} ] && echo "action: delete the network link {{.}}"
{{- end}}
{{- range .Binaries}}
[ -e {{q .}} ] && echo "action: remove {{.}}"
{{- end}}
{{- if .Runtime}}
[ -f /etc/systemd/system/containerd.service ] && echo "action: stop containerd, remove its unit, binaries and state (images included)"
{{- end}}
backup={{q .Backup}}
[ -d $backup ] && echo "action: put back the host's own files up replaced: $(find $backup -type f | wc -l)"
[ -f {{q .SysctlBefore}} ] && echo "action: put the kernel settings back as they were before up"
exit 0
