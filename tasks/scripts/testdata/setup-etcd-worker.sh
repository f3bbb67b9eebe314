# Managed by clusterctl: apply what the host's files need (kernel modules and settings, units, the
# runtime's binaries and configuration, image archives not yet imported), each only when its files changed.
# A host that only runs an external etcd member (.EtcdOnly) has no runtime, kubelet or kernel settings.
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

prestale modules /etc/modules-load.d/kubernetes.conf sysctl /etc/sysctl.d/99-kubernetes.conf units /etc/systemd/system/kubelet.service /etc/systemd/system/kubelet.service.d/10-kubeadm.conf /etc/systemd/system/clusterctl-pod-routes.service /etc/systemd/system/etcd.service containerd /etc/containerd/config.toml
if stale modules /etc/modules-load.d/kubernetes.conf; then act "load kernel modules" modprobe -a overlay br_netfilter 2>/dev/null || true; commit modules; fi
if stale sysctl /etc/sysctl.d/99-kubernetes.conf; then
  # The values the kernel had before, kept the first time only: reset puts them back.
  before=/var/lib/clusterctl/sysctl-before
  if [ -z "$dry" ] && [ ! -e "$before" ]; then
    mkdir -p "${before%/*}"
    sed -n 's/^\([a-z0-9_.-]*\) *=.*/\1/p' /etc/sysctl.d/99-kubernetes.conf | while read -r k; do if v=$(sysctl -n "$k" 2>/dev/null); then echo "$k = $v"; fi; done >"$before.tmp"
    mv -f "$before.tmp" "$before"
  fi
  # Each setting whose value differs, and only those: a host whose /proc/sys is read-only (a container) may
  # have the kernel's already (preflight said which it lacks).
  apply_sysctl() { [ -r /etc/sysctl.d/99-kubernetes.conf ] || return 0; while read -r k eq v; do
      case $k in ''|'#'*) continue;; esac
      [ "$(sysctl -n "$k" 2>/dev/null)" = "$v" ] || sysctl -q -w "$k=$v" || { echo "kernel setting $k: cannot set it to $v" >&2; return 1; }
    done < /etc/sysctl.d/99-kubernetes.conf; }
  act "apply kernel settings" apply_sysctl; commit sysctl
fi
# One reload for every unit file that changed; enabling a unit then reloads nothing more (--no-reload: each
# reload takes seconds on a busy host). A node's pod routes unit is enabled (for boot) before that reload: the
# network step then starts it without one of its own, on a host whose kubelet is starting its first Pods
# (where the routes script took 10-15 s, its actions 2.5-5.5 s of it: the reload most of the rest).
# systemd 257 needs the reload after an enable, 252 does not.
reload=
if stale units /etc/systemd/system/kubelet.service /etc/systemd/system/kubelet.service.d/10-kubeadm.conf /etc/systemd/system/clusterctl-pod-routes.service /etc/systemd/system/etcd.service; then quiet systemctl daemon-reload; commit units
elif [ -n "$reload" ]; then quiet systemctl daemon-reload; fi
systemctl is-enabled -q etcd 2>/dev/null || act "enable etcd" systemctl enable --no-reload -q etcd
# A schedule of clusterctl's the inventory no longer has: its timer stopped and its files removed (the
# snapshots stay).
if grep -qs 'Managed by clusterctl' /etc/systemd/system/clusterctl-etcd-snapshot.timer; then
  act "stop the etcd snapshots' timer" systemctl disable --no-reload -q --now clusterctl-etcd-snapshot.timer
  quiet rm -f /etc/systemd/system/clusterctl-etcd-snapshot.service /etc/systemd/system/clusterctl-etcd-snapshot.timer /usr/local/lib/clusterctl/etcd-snapshot
  quiet systemctl daemon-reload
fi
# Running containers outlive a restart of containerd (its unit kills only the daemon).
if stale containerd /etc/containerd/config.toml; then
  if systemctl is-active -q containerd; then act "restart containerd" systemctl restart containerd; fi
  commit containerd
fi
if ! systemctl is-active -q containerd; then act "start containerd" systemctl enable --no-reload -q --now containerd
elif ! systemctl is-enabled -q containerd 2>/dev/null; then act "enable containerd" systemctl enable --no-reload -q containerd; fi
# The images containerd has, listed once (ctr is a Go program: each start costs 0.1-0.2 s on a busy host).
# The runtime may have just started: wait until it answers (at most 30 s).
i=0; until have=$(ctr -n k8s.io images ls -q 2>/dev/null); do i=$((i+1)); [ $i -lt 60 ] || { echo 'containerd does not answer' >&2; exit 1; }; sleep 0.5; done
# imported REF: containerd has the image REF.
imported() { case "$nl$have$nl" in *"$nl$1$nl"*) return 0;; esac; return 1; }
# Image archives are imported side by side (each unpacks its layers), then each import's status checked
# (ctr's error names the archive).
imports=
import_image() { echo "action: import image $1"; [ -n "$dry" ] || { ctr -n k8s.io images import "$2" >/dev/null & imports="$imports $!"; }; }
# The components' versions, for the facts script (while the imports run): asked only where the cache lacks one.
vc=/var/lib/clusterctl/versions
# versions: in vout a "NAME VERSION" line per installed component, from the cache where it holds the binary
# as it is, else asked; in vnew the cache as it should be; vmiss set when the cache lacked one.
# lookup NAME: in p, the first executable file NAME on the PATH, as command -v finds it (without a process).
lookup() { p=; lk_ifs=$IFS; IFS=:; for lk_d in $PATH; do [ -f "$lk_d/$1" ] && [ -x "$lk_d/$1" ] && { p=$lk_d/$1; break; }; done; IFS=$lk_ifs; [ -n "$p" ]; }
versions() { set --
  for c in kubelet containerd crictl runc; do lookup $c && set -- "$@" "$p"; done
  keys=; [ $# -eq 0 ] || keys=$(stat -L -c '%i %s %z %n' -- "$@" 2>/dev/null) || true
  vc_all=$nl; [ -n "$keys" ] && [ -r "$vc" ] && while IFS= read -r l; do vc_all="$vc_all$l$nl"; done < "$vc"
  vout= vnew= vmiss=
  for p in "$@"; do k= v= hit=
    x="$nl$keys$nl"; case $x in *" $p$nl"*) x=${x%%" $p$nl"*}; k="${x##*"$nl"} $p";; esac
    if [ -n "$k" ]; then case $vc_all in *"$nl$k	"*) v=${vc_all#*"$nl$k	"}; v=${v%%"$nl"*} hit=1;; esac; fi
    if [ -z "$hit" ]; then v=$("$p" --version 2>&1) || true; v=${v%%
*}; [ -z "$k" ] || vmiss=1; fi
    vout="$vout${p##*/} $v
"
    [ -z "$k" ] || vnew="$vnew$k	$v
"
  done; }
versions
[ -z "$vmiss" ] || [ ! -d "${vc%/*}" ] || { printf '%s' "$vnew" > "$vc.tmp" && mv -f "$vc.tmp" "$vc"; }
failed=; for p in $imports; do wait "$p" || failed=1; done
[ -z "$failed" ] || { echo "importing an image archive failed" >&2; exit 1; }
systemctl is-enabled -q kubelet 2>/dev/null || act "enable the kubelet" systemctl enable --no-reload -q kubelet
