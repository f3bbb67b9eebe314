[ -x /usr/local/bin/etcdutl ] || echo "no etcdutl at "/usr/local/bin/etcdutl
[ -e /etc/systemd/system/etcd.service ] || echo "no etcd unit ("/etc/systemd/system/etcd.service"): not an etcd host of this cluster"
true
