# Managed by clusterctl: (re)start the pod routes unit when its routes (or the unit) changed. The unit comes
# with the node's other files, where systemd is reloaded: it is reloaded here only when it does not run
# the unit as it is on disk (one written by an older clusterctl, or by this step alone), or the unit was
# just enabled (after the reload, not before: systemd would otherwise say the unit changed on disk).
set -e
{{template "stamps.sh" .}}
# systemd-networkd reads its drop-in only when it starts: restarted (where it runs) when the drop-in
# changed, before the routes are made, so that it leaves them alone from then on.
{{- if .Networkd}}
if stale networkd {{q .Networkd}}; then
  if systemctl is-active -q systemd-networkd; then act "restart systemd-networkd (it leaves foreign routes alone)" systemctl restart systemd-networkd; fi
  commit networkd
fi
{{- end}}
# One systemctl for what systemd knows of the unit (each start costs on a busy host).
load= reload= enabled=
while IFS== read -r k v; do case $k in LoadState) load=$v;; NeedDaemonReload) reload=$v;; UnitFileState) enabled=$v;; esac; done <<EOS
$(systemctl show -p LoadState -p NeedDaemonReload -p UnitFileState {{q .Name}})
EOS
[ "$enabled" = enabled ] || { quiet systemctl enable --no-reload -q {{q .Name}}; reload=yes; }
if [ "$load" != loaded ] || [ "$reload" = yes ]; then quiet systemctl daemon-reload; fi
if stale routes {{args .Inputs}}; then act "restart the pod routes" systemctl restart {{q .Name}}; commit routes; fi
