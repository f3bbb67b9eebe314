# Managed by clusterctl: (re)start the pod routes unit when its routes (or the unit) changed. The unit comes
# with the node's other files, where systemd is reloaded: it is reloaded here only when it does not run
# the unit as it is on disk (one written by an older clusterctl, or by this step alone).
set -e
{{template "stamps.sh" .}}
if [ "$(systemctl show -p LoadState --value {{q .Name}})" != loaded ] || [ "$(systemctl show -p NeedDaemonReload --value {{q .Name}})" = yes ]; then
  quiet systemctl daemon-reload
fi
systemctl is-enabled -q {{q .Name}} 2>/dev/null || quiet systemctl enable --no-reload -q {{q .Name}}
if stale routes {{args .Inputs}}; then act "restart the pod routes" systemctl restart {{q .Name}}; commit routes; fi
