{{- /* A host's addresses, default routes, and its links' MACs and MTUs (facts.sh, netfacts.sh): one process, ip
with a batch of two commands (two ips where it has no batch mode). Its lines "N: IFACE FAMILY CIDR ..." are
the addresses, the others the main IPv4 table (-o: a multipath route's nexthops on its line), kept in r4 for
the routes the stamp's check counts too. */ -}}
nets=$(ip -o -batch - 2>/dev/null <<EOB
addr show
route show
EOB
) || nets=$(ip -o addr show 2>/dev/null; ip -o route show 2>/dev/null) || true
r4=; IFS=$nl; set -f
for l in $nets; do IFS=$ws; i=${l%%[ 	]*}; case $i in
  ''|*[!0-9:]*) r4="$r4$l$nl"; case $i in default) f default_route "$l";; esac;;
  *:) set -- $l; f addr "$2 $4";; esac; done
IFS=$ws; set +f
for d in /sys/class/net/*; do [ -r "$d/address" ] && read -r m < "$d/address" && f mac "${d##*/} $m"
  [ -r "$d/mtu" ] && read -r m < "$d/mtu" && f mtu "${d##*/} $m"; done
