{{- /* The kubelet requests a new serving certificate when it has none: remove it and restart the kubelet;
"started: " and the host's clock in seconds before the restart. */ -}}
rm -f {{q .File}} && echo "started: $(date +%s)" && systemctl restart kubelet
