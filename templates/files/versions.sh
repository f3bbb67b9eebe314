{{- /* The components' versions (the first line of kubelet's, containerd's, crictl's and runc's --version) cost
a Go program's start each (0.1-0.3 s on a busy host). On a host clusterctl manages, the setup script keeps
them in a cache (.VersionCache) by each binary's inode, size and change time (ctime, which no rename or utime
can set back), all four read by one stat; the facts script only reads it, so that neither a dry run nor a
re-run writes anything there. It fails on nothing (the setup script runs under set -e). */ -}}
vc={{q .VersionCache}}
# versions: in vout a "NAME VERSION" line per installed component, from the cache where it holds the binary
# as it is, else asked; in vnew the cache as it should be; vmiss set when the cache lacked one.
# lookup NAME: in p, the first executable file NAME on the PATH, as command -v finds it (without a process).
lookup() { p=; lk_ifs=$IFS; IFS=:; for lk_d in $PATH; do [ -f "$lk_d/$1" ] && [ -x "$lk_d/$1" ] && { p=$lk_d/$1; break; }; done; IFS=$lk_ifs; [ -n "$p" ]; }
versions() { set --
  for c in kubelet containerd crictl runc; do lookup $c && set -- "$@" "$p"; done
  keys=; [ $# -eq 0 ] || keys=$(stat -L -c '%i %s %z %n' -- "$@" 2>/dev/null) || true
  {{- /* The cache read once ("KEY<TAB>VERSION" lines; sh's read takes a byte per system call), then looked
  up in, as the keys are, with the shell's own patterns. */}}
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
