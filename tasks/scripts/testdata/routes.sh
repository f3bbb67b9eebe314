# Managed by clusterctl: (re)start the pod routes unit when its routes (or the unit) changed. The unit comes
# with the node's other files, where systemd is reloaded: it is reloaded here only when it does not run
# the unit as it is on disk (one written by an older clusterctl, or by this step alone), or the unit was
# just enabled (after the reload, not before: systemd would otherwise say the unit changed on disk).
set -e
stamps=/var/lib/clusterctl/applied
dry=
nl='
'
changed='
'
# stale NAME FILES...: the files differ from what NAME last applied, or are among those this run changes
# (their digest is then kept for commit).
stale() { n=$1; shift; s=
  for f in "$@"; do changes "$f" && s=1; done
  case $pre in *" $n="*) d=${pre#*" $n="}; d=${d%% *};; *) d=$(digests "$@" | sha256sum); d=${d%% *};; esac
  was=; [ -r "$stamps/$n" ] && read -r was < "$stamps/$n"
  [ -n "$s" ] || [ "$was" != "$d" ] || return 1
  [ -n "$dry" ] || { { [ -d "$stamps" ] || mkdir -p "$stamps"; } && echo "$d" > "$stamps/$n.next"; }; }
# prestale NAME FILES... [NAME FILES...]...: what stale NAME compares, for several stamps at once (each
# name followed by its files, every file an absolute path): one stat and two sha256sums for all of them,
# where each stale costs three processes. Only for files the script does not change before their stale;
# not in a dry run (it writes each stamp's digest lines, NAME.in, beside the stamps).
pre=
prestale() { [ -z "$dry" ] || return 0
  { [ -d "$stamps" ] || mkdir -p "$stamps"; } || return 0
  dg=$(for a in "$@"; do case $a in /*) printf '%s\n' "$a";; esac; done | { set --; while IFS= read -r a; do set -- "$@" "$a"; done; digests "$@"; })
  g= ins=
  for a in "$@"; do case $a in
    /*) while IFS= read -r l; do case $l in "$a "*) printf '%s\n' "$l" >> "$stamps/$g.in"; break;; esac; done <<EOS
$dg
EOS
      ;;
    *) g=$a; : > "$stamps/$g.in"; ins="$ins$stamps/$g.in$nl";;
  esac; done
  [ -n "$ins" ] || return 0 # (sha256sum of no file would read the script's own input)
  o=$IFS; IFS=$nl; set -f; sums=$(sha256sum -- $ins); set +f; IFS=$o
  while read -r h f; do g=${f##*/}; pre="$pre ${g%.in}=$h "; done <<EOS
$sums
EOS
}
# digests FILES...: "FILE DIGEST" of each file that exists, in order: its content's sha256sum ("HASH  -"),
# or for a file over 1 MiB (a binary, only ever replaced by a rename) its size, modification time and
# inode, which say as much without reading it. One stat and one sha256sum for all: on a busy host each
# process started costs more than the hashing.
digests() { st=$(stat -c '%s %Y %i %n' -- "$@" 2>/dev/null) || true
  set --; while read -r sz mt ino f; do [ -n "$f" ] && [ "$sz" -le 1048576 ] && set -- "$@" "$f"; done <<EOS
$st
EOS
  sums=; [ $# -gt 0 ] && sums=$(sha256sum -- "$@")
  while read -r sz mt ino f; do [ -n "$f" ] || continue
    if [ "$sz" -gt 1048576 ]; then printf '%s %s %s %s\n' "$f" "$sz" "$mt" "$ino"; continue; fi
    while read -r h g; do [ "$g" = "$f" ] && { printf '%s %s  -\n' "$f" "$h"; break; }; done <<EOS
$sums
EOS
  done <<EOS
$st
EOS
}
commit() { [ -n "$dry" ] || [ ! -f "$stamps/$1.next" ] || mv "$stamps/$1.next" "$stamps/$1"; }
# changes FILE: this run writes (or in a dry run would write) FILE.
changes() { case "$changed" in *"$nl$1$nl"*) return 0;; esac; return 1; }
# act WHAT COMMAND...: runs the command (its output discarded; in a dry run, not at all) and reports
# "action: WHAT".
act() { w=$1; shift; echo "action: $w"; [ -n "$dry" ] || "$@" >/dev/null; }
# quiet COMMAND...: runs the command, not in a dry run, and reports nothing.
quiet() { [ -n "$dry" ] || "$@"; }

prestale networkd /etc/systemd/networkd.conf.d/clusterctl.conf routes /etc/systemd/system/clusterctl-pod-routes.service /var/lib/clusterctl/pod-routes networkd-routes /var/lib/clusterctl/pod-routes.networkd
# systemd-networkd owns the same routes through a drop-in of them, linked into the drop-in directory of
# the .network file of the interface that holds the node's address (when networkd manages it, and the node
# has routes): it puts them back whenever it configures the interface. Elsewhere NetworkManager's and
# ifupdown's hooks restart the unit when an interface comes up.
nf= link= relink=
set -f; set -- $(ip -o addr show to 10.0.0.10 2>/dev/null); set +f
if [ -n "${2:-}" ] && [ -r "/sys/class/net/$2/ifindex" ] && read -r idx < "/sys/class/net/$2/ifindex" && [ -r "/run/systemd/netif/links/$idx" ]; then
  while IFS== read -r k v; do [ "$k" = NETWORK_FILE ] && nf=$v; done < "/run/systemd/netif/links/$idx"
fi
case $nf in /etc/systemd/network/*.network|/run/systemd/network/*.network|/usr/lib/systemd/network/*.network|/lib/systemd/network/*.network|/usr/local/lib/systemd/network/*.network) ;; *) nf=;; esac
dest=; [ -r /var/lib/clusterctl/pod-routes.networkd ] && while IFS= read -r l; do case $l in Destination=*) dest=1; break;; esac; done < /var/lib/clusterctl/pod-routes.networkd
if [ -n "$nf" ] && [ -n "$dest" ]; then
  link=/etc/systemd/network/${nf##*/}.d/50-clusterctl-pod-routes.conf
  if ! [ -L "$link" ] || ! [ "$link" -ef /var/lib/clusterctl/pod-routes.networkd ]; then
    quiet mkdir -p "${link%/*}"; act "let systemd-networkd keep the pod routes (${nf##*/})" ln -sfn /var/lib/clusterctl/pod-routes.networkd "$link"; relink=1
  fi
fi
for l in /etc/systemd/network/*.network.d/50-clusterctl-pod-routes.conf; do
  if [ -L "$l" ] && [ "$l" != "$link" ]; then act "remove systemd-networkd's pod routes from ${l%/*}" rm -f "$l"; relink=1; fi
done
# systemd-networkd reads its drop-in only when it starts: restarted (where it runs) when the drop-in
# changed, before the routes are made, so that it leaves them alone from then on. A node's push restarts it
# (the same stamp); here only a node whose push did not (one outside the run, its files older). Its routes'
# link is made before: the restart reads them too, and no reload follows.
restarted=
if stale networkd /etc/systemd/networkd.conf.d/clusterctl.conf; then
  if systemctl is-active -q systemd-networkd; then act "restart systemd-networkd (it leaves foreign routes alone)" systemctl restart systemd-networkd; restarted=1; fi
  commit networkd
fi
# One systemctl for what systemd knows of the unit (each start costs on a busy host).
load= reload= enabled=
while IFS== read -r k v; do case $k in LoadState) load=$v;; NeedDaemonReload) reload=$v;; UnitFileState) enabled=$v;; esac; done <<EOS
$(systemctl show -p LoadState -p NeedDaemonReload -p UnitFileState clusterctl-pod-routes.service)
EOS
[ "$enabled" = enabled ] || { quiet systemctl enable --no-reload -q clusterctl-pod-routes.service; reload=yes; }
if [ "$load" != loaded ] || [ "$reload" = yes ]; then quiet systemctl daemon-reload; fi
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
if stale routes /etc/systemd/system/clusterctl-pod-routes.service /var/lib/clusterctl/pod-routes; then act "restart the pod routes" systemctl restart clusterctl-pod-routes.service; commit routes
elif routes_missing /var/lib/clusterctl/pod-routes && [ "$rmiss" -gt 0 ]; then act "put back $rmiss pod routes missing from the kernel" systemctl restart clusterctl-pod-routes.service; fi
if stale networkd-routes /var/lib/clusterctl/pod-routes.networkd || [ -n "$relink" ]; then
  if [ -z "$restarted" ] && { [ -n "$link" ] || [ -n "$relink" ]; } && systemctl is-active -q systemd-networkd; then
    act "reload systemd-networkd (its pod routes changed)" networkctl reload
  fi
  commit networkd-routes
fi
for l in /etc/NetworkManager/dispatcher.d/50-clusterctl-pod-routes /etc/network/if-up.d/clusterctl-pod-routes; do
  if [ -d "${l%/*}" ] && { ! [ -L "$l" ] || ! [ "$l" -ef /var/lib/clusterctl/pod-routes-hook ]; }; then act "put the pod routes back when an interface comes up (${l%/*})" ln -sfn /var/lib/clusterctl/pod-routes-hook "$l"; fi
done
