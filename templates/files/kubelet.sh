# Managed by clusterctl: restart the kubelet when the files it starts with changed since it last started
# with them (or when told to), start it when it is not running, else leave it alone. Prints what it did:
# "action: restart kubelet", "action: start kubelet", or "running".
set -e
{{template "stamps.sh" .}}
if stale kubelet {{args .Inputs}}{{if .Restart}} || true{{end}}; then act "restart kubelet" systemctl restart kubelet; commit kubelet
elif systemctl is-active -q kubelet; then echo running
else act "start kubelet" systemctl start kubelet; fi
