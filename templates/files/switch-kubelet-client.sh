{{- /* Point the kubelet's current client pair at a new file beside it (a symlink replaced atomically), and
restart the kubelet; "started: " and the host's clock in seconds before the restart. */ -}}
cd {{q .Dir}} && ln -sfn {{q .File}} .kubelet-client-current.tmp && mv -T .kubelet-client-current.tmp {{q .Link}} && echo "started: $(date +%s)" && systemctl restart kubelet
