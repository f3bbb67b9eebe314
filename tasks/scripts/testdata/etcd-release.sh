set -eu
for f in etcd.yaml; do
  if [ -e /var/lib/clusterctl/etcd-restore/held/"$f" ]; then mv -f /var/lib/clusterctl/etcd-restore/held/"$f" /etc/kubernetes/manifests/"$f" && echo "released $f"; fi
done
rmdir /var/lib/clusterctl/etcd-restore/held 2>/dev/null || true
