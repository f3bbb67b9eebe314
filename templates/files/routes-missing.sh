{{- /* routes_missing FILE [R4] sets rmiss to how many of the routes of the routes file FILE ("route replace DST
...", clusterctl's own file) the kernel's main table lacks: networkd's reconfigure (systemd 252 takes the
interface's address away, and the kernel every route through it), a DHCP client or a hand flushed them.
One ip per family the file has, nothing else started (called as it is, not in a command substitution: no
subshell); R4, when given, is the main IPv4 table as ip prints it, read already. */ -}}
routes_missing() { rmiss=0 rm4=${2-} rm4set=${2+1} rm6= rm6set=
  if [ -r "$1" ]; then
    while read -r c v d rest; do [ "$c $v" = "route replace" ] || continue
      case $d in
        *:*) [ -n "$rm6set" ] || { rm6=$(ip -6 route show 2>/dev/null) || true; rm6set=1; }; r=$rm6;;
        *) [ -n "$rm4set" ] || { rm4=$(ip -4 route show 2>/dev/null) || true; rm4set=1; }; r=$rm4;;
      esac
      case "$nl$r$nl" in *"$nl$d "*) ;; *) rmiss=$((rmiss+1));; esac
    done < "$1"
  fi; }
