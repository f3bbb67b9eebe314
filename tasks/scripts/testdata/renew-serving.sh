rm -f /var/lib/kubelet/pki/kubelet-server-current.pem && systemctl restart kubelet
