# Managed by clusterctl: (re)start the pod routes unit when its routes (or the unit) changed. The unit comes
# with the node's other files, where systemd is reloaded: it is reloaded here only when it does not run
# the unit as it is on disk (one written by an older clusterctl, or by this step alone), or the unit was
# just enabled (after the reload, not before: systemd would otherwise say the unit changed on disk).
set -e
{{template "stamps.sh" .}}
prestale{{if .Networkd}} networkd {{q .Networkd}}{{end}} routes {{args .Inputs}}{{if .Owned}} networkd-routes {{q .Owned}}{{end}}
{{- if .Owned}}
# systemd-networkd owns the same routes through a drop-in of them, linked into the drop-in directory of
# the .network file of the interface that holds the node's address (when networkd manages it, and the node
# has routes): it puts them back whenever it configures the interface. Elsewhere NetworkManager's and
# ifupdown's hooks restart the unit when an interface comes up.
nf= link= relink=
set -f; set -- $(ip -o addr show to {{q .Addr}} 2>/dev/null); set +f
if [ -n "${2:-}" ] && [ -r "/sys/class/net/$2/ifindex" ] && read -r idx < "/sys/class/net/$2/ifindex" && [ -r "/run/systemd/netif/links/$idx" ]; then
  while IFS== read -r k v; do [ "$k" = NETWORK_FILE ] && nf=$v; done < "/run/systemd/netif/links/$idx"
fi
case $nf in /etc/systemd/network/*.network|/run/systemd/network/*.network|/usr/lib/systemd/network/*.network|/lib/systemd/network/*.network|/usr/local/lib/systemd/network/*.network) ;; *) nf=;; esac
dest=; [ -r {{q .Owned}} ] && while IFS= read -r l; do case $l in Destination=*) dest=1; break;; esac; done < {{q .Owned}}
if [ -n "$nf" ] && [ -n "$dest" ]; then
  link=/etc/systemd/network/${nf##*/}.d/50-clusterctl-pod-routes.conf
  {{- /* test's -ef (dash, bash and busybox have it): the link leads to the drop-in, and no readlink runs. */}}
  if ! [ -L "$link" ] || ! [ "$link" -ef {{q .Owned}} ]; then
    quiet mkdir -p "${link%/*}"; act "let systemd-networkd keep the pod routes (${nf##*/})" ln -sfn {{q .Owned}} "$link"; relink=1
  fi
fi
for l in /etc/systemd/network/*.network.d/50-clusterctl-pod-routes.conf; do
  if [ -L "$l" ] && [ "$l" != "$link" ]; then act "remove systemd-networkd's pod routes from ${l%/*}" rm -f "$l"; relink=1; fi
done
{{- end}}
# systemd-networkd reads its drop-in only when it starts: restarted (where it runs) when the drop-in
# changed, before the routes are made, so that it leaves them alone from then on. A node's push restarts it
# (the same stamp); here only a node whose push did not (one outside the run, its files older). Its routes'
# link is made before: the restart reads them too, and no reload follows.
restarted=
{{- if .Networkd}}
if stale networkd {{q .Networkd}}; then
  if systemctl is-active -q systemd-networkd; then act "restart systemd-networkd (it leaves foreign routes alone)" systemctl restart systemd-networkd; restarted=1; fi
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
{{template "routes-missing.sh" -}}
if stale routes {{args .Inputs}}; then act "restart the pod routes" systemctl restart {{q .Name}}; commit routes
elif routes_missing {{q .RoutesFile}} && [ "$rmiss" -gt 0 ]; then act "put back $rmiss pod routes missing from the kernel" systemctl restart {{q .Name}}; fi
{{- if .Owned}}
if stale networkd-routes {{q .Owned}} || [ -n "$relink" ]; then
  if [ -z "$restarted" ] && { [ -n "$link" ] || [ -n "$relink" ]; } && systemctl is-active -q systemd-networkd; then
    act "reload systemd-networkd (its pod routes changed)" networkctl reload
  fi
  commit networkd-routes
fi
for l in /etc/NetworkManager/dispatcher.d/50-clusterctl-pod-routes /etc/network/if-up.d/clusterctl-pod-routes; do
  if [ -d "${l%/*}" ] && { ! [ -L "$l" ] || ! [ "$l" -ef {{q .Hook}} ]; }; then act "put the pod routes back when an interface comes up (${l%/*})" ln -sfn {{q .Hook}} "$l"; fi
done
{{- end}}
