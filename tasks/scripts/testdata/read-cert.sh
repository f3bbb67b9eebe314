[ -e /var/lib/kubelet/pki/kubelet-server-current.pem ] && sed -n '/BEGIN CERTIFICATE/,/END CERTIFICATE/p' /var/lib/kubelet/pki/kubelet-server-current.pem; true
