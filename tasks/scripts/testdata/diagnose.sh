echo "== kubelet: $(systemctl is-active kubelet)"; journalctl -u kubelet -n 25 --no-pager 2>&1 | cut -c1-300
for c in etcd kube-apiserver; do for f in /var/log/pods/kube-system_${c}-*/${c}/*.log; do [ -e "$f" ] || continue; echo "== $f"; tail -n 15 "$f" | cut -c1-300; done; done
