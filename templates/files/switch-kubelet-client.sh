{{- /* Point the kubelet's current client pair at a new file beside it (a symlink replaced atomically), and,
unless the caller restarts it itself, restart the kubelet; "started: " and the host's clock in seconds
before the restart. */ -}}
cd {{q .Dir}} && ln -sfn {{q .File}} .kubelet-client-current.tmp && mv -T .kubelet-client-current.tmp {{q .Link}}{{if .Restart}} && echo "started: $(date +%s)" && systemctl restart kubelet{{end}}
