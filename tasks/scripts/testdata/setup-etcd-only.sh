# Managed by clusterctl: apply what the host's files need (kernel modules and settings, units, the
# runtime's binaries and configuration, image archives not yet imported), each only when its files changed.
# A host that only runs an external etcd member (.EtcdOnly) has no runtime, kubelet or kernel settings.
set -e
stamps=/var/lib/clusterctl/applied
dry=
nl='
'
changed='
/etc/systemd/system/etcd.service
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

prestale units /etc/systemd/system/etcd.service
# One reload for every unit file that changed; enabling a unit then reloads nothing more (--no-reload: each
# reload takes seconds on a busy host). A node's pod routes unit is enabled (for boot) before that reload: the
# network step then starts it without one of its own, on a host whose kubelet is starting its first Pods
# (where the routes script took 10-15 s, its actions 2.5-5.5 s of it: the reload most of the rest).
# systemd 257 needs the reload after an enable, 252 does not.
reload=
if stale units /etc/systemd/system/etcd.service; then quiet systemctl daemon-reload; commit units
elif [ -n "$reload" ]; then quiet systemctl daemon-reload; fi
systemctl is-enabled -q etcd 2>/dev/null || act "enable etcd" systemctl enable --no-reload -q etcd
# A schedule of clusterctl's the inventory no longer has: its timer stopped and its files removed (the
# snapshots stay).
if grep -qs 'Managed by clusterctl' /etc/systemd/system/clusterctl-etcd-snapshot.timer; then
  act "stop the etcd snapshots' timer" systemctl disable --no-reload -q --now clusterctl-etcd-snapshot.timer
  quiet rm -f /etc/systemd/system/clusterctl-etcd-snapshot.service /etc/systemd/system/clusterctl-etcd-snapshot.timer /usr/local/lib/clusterctl/etcd-snapshot
  quiet systemctl daemon-reload
fi
