for f in $(find /etc/kubernetes/pki -name '*.crt' 2>/dev/null | sort) /var/lib/kubelet/pki/kubelet-client-current.pem /var/lib/kubelet/pki/kubelet-server-current.pem; do
  [ -f "$f" ] || continue; echo "== $f"; sed -n '/BEGIN CERTIFICATE/,/END CERTIFICATE/p' "$f"; done
for f in /etc/kubernetes/admin.conf /etc/kubernetes/super-admin.conf /etc/kubernetes/controller-manager.conf /etc/kubernetes/scheduler.conf /etc/kubernetes/kubelet.conf; do
  [ -f "$f" ] || continue; echo "== $f"; grep -E '^ *client-certificate(-data)?:' "$f"; done
exit 0
