[ -x /usr/local/bin/etcdutl ] || echo "no etcdutl at "/usr/local/bin/etcdutl
[ -e /etc/kubernetes/manifests/etcd.yaml ] || [ -e /var/lib/clusterctl/etcd-restore/held/etcd.yaml ] || echo "no etcd manifest ("/etc/kubernetes/manifests/etcd.yaml"): not a control-plane node of this cluster"
true
