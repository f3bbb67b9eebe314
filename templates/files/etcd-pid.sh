pgrep -x etcd || true
