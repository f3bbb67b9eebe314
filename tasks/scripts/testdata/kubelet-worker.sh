# Managed by clusterctl: restart the kubelet when the files it starts with changed since it last started
# with them (or when told to), start it when it is not running, else leave it alone. Prints what it did:
# "action: restart kubelet", "action: start kubelet", or "running"; before a restart or start, "started: "
# and the host's clock in seconds (the kubelet's Node reports a status posted since then only once this
# kubelet runs: one posted before is its predecessor's).
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

# Before a restart, the static Pods a running kubelet is starting get their sandboxes (30 s at most): a
# kubelet stopped while containerd creates a sandbox cancels it, containerd 2 leaves the half-made sandbox
# recorded under the Pod's name beside the one made next, and at its next start (a reboot) refuses to
# start at all ("failed to recover state: failed to reserve sandbox name").
settle() {
  [ -z "$dry" ] && systemctl is-active -q kubelet && command -v crictl >/dev/null 2>&1 && crictl pods -q >/dev/null 2>&1 || return 0
  i=0
  while [ $i -lt 60 ]; do
    waiting=
    for f in /etc/kubernetes/manifests/*.yaml; do
      [ -f "$f" ] || continue
      uid=$(sed -n 's/^  uid: *//p' "$f" | head -n 1)
      case $uid in ''|*[!0-9a-f-]*) continue ;; esac
      [ -n "$(crictl pods --label "io.kubernetes.pod.uid=$uid" --state ready -q 2>/dev/null)" ] || waiting=1
    done
    [ -n "$waiting" ] || return 0
    sleep 0.5; i=$((i + 1))
  done
}
started() { [ -n "$dry" ] || echo "started: $(date +%s)"; }
if stale kubelet /var/lib/kubelet/config.yaml /usr/local/bin/kubelet; then settle; started; act "restart kubelet" systemctl restart kubelet; commit kubelet
elif systemctl is-active -q kubelet; then echo running
else started; act "start kubelet" systemctl start kubelet; fi
