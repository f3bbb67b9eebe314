{{- /* A host's addresses, default routes, and its links' MACs and MTUs (facts.sh, netfacts.sh); two processes. */ -}}
ip -o addr show 2>/dev/null | while read -r i iface fam cidr rest; do f addr "$iface $cidr"; done
{{- /* The main IPv4 table once (r4, for the routes the stamp's check counts too): the default routes are its
lines from "default" on, with their nexthop lines. */}}
r4=$(ip -4 route show 2>/dev/null) || true
dr=; while read -r l; do case $l in default*) dr=1; f default_route "$l";; nexthop*) [ -z "$dr" ] || f default_route "$l";; *) dr=;; esac; done <<EOR
$r4
EOR
for d in /sys/class/net/*; do [ -r "$d/address" ] && read -r m < "$d/address" && f mac "${d##*/} $m"
  [ -r "$d/mtu" ] && read -r m < "$d/mtu" && f mtu "${d##*/} $m"; done
