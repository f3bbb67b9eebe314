{{- /* Point the kubelet's current client pair at a new file beside it (a symlink replaced atomically), and
restart the kubelet. */ -}}
cd {{q .Dir}} && ln -sfn {{q .File}} .kubelet-client-current.tmp && mv -T .kubelet-client-current.tmp {{q .Link}} && systemctl restart kubelet
