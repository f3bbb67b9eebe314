# Managed by clusterctl: (re)start the pod routes unit when its routes (or the unit) changed. The unit comes
# with the node's other files, where systemd is reloaded: it is reloaded here only when it does not run
# the unit as it is on disk (one written by an older clusterctl, or by this step alone).
set -e
{{template "stamps.sh" .}}
# One systemctl for what systemd knows of the unit (each start costs on a busy host).
load= reload= enabled=
while IFS== read -r k v; do case $k in LoadState) load=$v;; NeedDaemonReload) reload=$v;; UnitFileState) enabled=$v;; esac; done <<EOS
$(systemctl show -p LoadState -p NeedDaemonReload -p UnitFileState {{q .Name}})
EOS
if [ "$load" != loaded ] || [ "$reload" = yes ]; then quiet systemctl daemon-reload; fi
[ "$enabled" = enabled ] || quiet systemctl enable --no-reload -q {{q .Name}}
if stale routes {{args .Inputs}}; then act "restart the pod routes" systemctl restart {{q .Name}}; commit routes; fi
