cd /var/lib/kubelet/pki && ln -sfn kubelet-client-2026-11-23-15-40-00.pem .kubelet-client-current.tmp && mv -T .kubelet-client-current.tmp kubelet-client-current.pem
