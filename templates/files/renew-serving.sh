{{- /* The kubelet requests a new serving certificate when it has none: remove it and restart the kubelet. */ -}}
rm -f {{q .File}} && systemctl restart kubelet
