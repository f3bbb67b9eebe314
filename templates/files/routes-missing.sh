{{- /* routes_missing FILE prints how many of the routes of the routes file FILE ("route replace DST ...",
clusterctl's own file) the kernel's main table lacks: networkd's reconfigure (systemd 252 takes the
interface's address away, and the kernel every route through it), a DHCP client or a hand flushed them.
One ip per family, nothing else started. */ -}}
routes_missing() { m=0; r4=; r6=
  if [ -r "$1" ]; then r4=$(ip -4 route show 2>/dev/null) || true; r6=$(ip -6 route show 2>/dev/null) || true
    while read -r c v d rest; do [ "$c $v" = "route replace" ] || continue
      case $d in *:*) r=$r6;; *) r=$r4;; esac
      case "$nl$r$nl" in *"$nl$d "*) ;; *) m=$((m+1));; esac
    done < "$1"
  fi
  echo $m; }
