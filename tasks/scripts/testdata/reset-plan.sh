# Managed by clusterctl: what `clusterctl reset` would undo on this host, read only ("action: " lines).
set -u
systemctl is-active -q kubelet.service && echo "action: stop and disable the kubelet"
grep -qs 'Managed by clusterctl' /etc/systemd/system/etcd.service && echo "action: stop and remove the etcd member's unit (external etcd)"
[ -f /etc/systemd/system/clusterctl-pod-routes.service ] && echo "action: remove the pod routes and the Service rule, and their unit"
grep -qs 'Managed by clusterctl' /etc/systemd/system/clusterctl-etcd-snapshot.timer && echo "action: stop and remove the etcd snapshots' timer, its service and script"
n=$(ls -1a /var/lib/etcd-snapshots 2>/dev/null | grep -Ec '^etcd-snapshot-[0-9]{8}T[0-9]{6}Z\.db$')
[ "$n" -gt 0 ] && echo "action: remove the $n etcd snapshots in /var/lib/etcd-snapshots"
[ -f /etc/systemd/networkd.conf.d/clusterctl.conf ] && echo "action: remove systemd-networkd's drop-in /etc/systemd/networkd.conf.d/clusterctl.conf"
if command -v ctr >/dev/null 2>&1 && ctr version >/dev/null 2>&1; then
  n=$(ctr -n k8s.io containers ls -q 2>/dev/null | grep -c .)
  [ "$n" -gt 0 ] && echo "action: kill and delete the $n containers of containerd's k8s.io namespace"
fi
for cmd in iptables ip6tables; do
  command -v $cmd-save >/dev/null 2>&1 || continue
  n=$($cmd-save 2>/dev/null | grep -Ec '^:(KUBE-|FLANNEL-)')
  [ "$n" -gt 0 ] && echo "action: remove $n chains (KUBE-|FLANNEL-) of $cmd and the rules jumping to them"
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
[ -e /etc/cni/net.d/10-clusterctl-bridge.conflist ] && echo "action: remove /etc/cni/net.d/10-clusterctl-bridge.conflist"
[ -e /etc/cni/net.d/10-clusterctl-flannel.conflist ] && echo "action: remove /etc/cni/net.d/10-clusterctl-flannel.conflist"
[ -e /etc/systemd/system/clusterctl-pod-routes.service ] && echo "action: remove /etc/systemd/system/clusterctl-pod-routes.service"
[ -e /var/lib/clusterctl/pod-routes ] && echo "action: remove /var/lib/clusterctl/pod-routes"
[ -e /run/flannel ] && echo "action: remove /run/flannel"
[ -e /sys/class/net/cni0 ] && echo "action: delete the network link cni0"
[ -e /sys/class/net/flannel.1 ] && echo "action: delete the network link flannel.1"
[ -e /usr/local/bin/kubelet ] && echo "action: remove /usr/local/bin/kubelet"
backup=/var/lib/clusterctl/backup
[ -d $backup ] && echo "action: put back the host's own files up replaced: $(find $backup -type f | wc -l)"
[ -f /var/lib/clusterctl/sysctl-before ] && echo "action: put the kernel settings back as they were before up"
exit 0
