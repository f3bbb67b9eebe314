{{- /* A host's addresses, default routes, and its links' MACs and MTUs (facts.sh, netfacts.sh). */ -}}
ip -o addr show 2>/dev/null | while read -r i iface fam cidr rest; do f addr "$iface $cidr"; done
ip route show default 2>/dev/null | while read -r l; do f default_route "$l"; done
for d in /sys/class/net/*; do [ -r "$d/address" ] && read -r m < "$d/address" && f mac "${d##*/} $m"
  [ -r "$d/mtu" ] && read -r m < "$d/mtu" && f mtu "${d##*/} $m"; done
