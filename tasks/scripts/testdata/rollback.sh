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

dir=/var/lib/clusterctl/rollback/v1.37.2/control-plane
[ -d "$dir" ] || { echo none; exit 0; }
except=/etc/kubernetes/manifests
find "$dir" -type f | sort | while IFS= read -r kept; do
  target=${kept#"$dir"}
  if [ -n "$except" ]; then case $target in "$except"/*) continue ;; esac; fi
  case $target in
    *.absent)
      target=${target%.absent}
      if [ -e "$target" ]; then echo "action: remove $target"; quiet rm -f "$target"; fi
      quiet rm -f "$kept" ;;
    /var/lib/clusterctl/images/*.tar)
      # an image archive: its image imported again (the kubelet may have removed the unused old image)
      echo "action: import image $target"
      [ -n "$dry" ] || { ctr -n k8s.io images import "$kept" >/dev/null && mkdir -p "${target%/*}" && mv -f "$kept" "$target"; } ;;
    *)
      echo "action: put back $target"
      [ -n "$dry" ] || { mkdir -p "${target%/*}" && mv -f "$kept" "$target"; } ;;
  esac
done
quiet systemctl daemon-reload
if stale containerd /etc/containerd/config.toml /etc/systemd/system/containerd.service /usr/local/bin/containerd; then
  if systemctl is-active -q containerd; then act "restart containerd" systemctl restart containerd; fi
  commit containerd
fi
