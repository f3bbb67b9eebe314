# Managed by clusterctl: (re)start the pod routes unit when its file changed.
set -e
{{template "stamps.sh" .}}
if stale routes {{q .Unit}}; then quiet systemctl daemon-reload; quiet systemctl enable -q {{q .Name}}; act "restart the pod routes" systemctl restart {{q .Name}}; commit routes; fi
