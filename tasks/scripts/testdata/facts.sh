export LC_ALL=C PATH="$PATH:/usr/local/sbin:/usr/local/bin:/usr/sbin:/sbin"
nl='
' ws=$IFS
fo=
f() { fo="$fo$1	$2$nl"; }
r() { v=; [ -r "$1" ] && read -r v < "$1"; f "$2" "$v"; }

printf 'clock\t%s\n' "$(date +%s.%N)"
r /proc/sys/kernel/hostname hostname; hn=$v
if [ -r /etc/os-release ]; then . /etc/os-release; f os "$ID"; f os_version "$VERSION_ID"; f os_pretty "$PRETTY_NAME"; fi
r /proc/sys/kernel/osrelease kernel; kr=$v
if [ -r /proc/sys/kernel/arch ]; then r /proc/sys/kernel/arch arch; else f arch "$(uname -m)"; fi
if [ -r /sys/fs/cgroup/cgroup.controllers ]; then f cgroupfs cgroup2fs; r /sys/fs/cgroup/cgroup.controllers cgroup_controllers
else f cgroupfs tmpfs; c=; for d in /sys/fs/cgroup/*/; do d=${d%/}; c="$c ${d##*/}"; done; f cgroup_controllers "$c"; fi
n=-1; while read -r l; do n=$((n+1)); done < /proc/swaps; f swap_devices $n
while read -r k v u; do case $k in MemTotal:) f mem_kb $v;; SwapTotal:) f swap_kb $v; break;; esac; done < /proc/meminfo
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
# Kernel modules the policy controller and kube-proxy's nftables mode need: loaded, built in, or installed
# (those not loaded are looked for by the sockets' grep, below).
md=/lib/modules/$kr miss=
if [ -d "$md" ]; then
  for m in nfnetlink_queue nft_queue nft_compat xt_NFQUEUE nf_tables; do if [ -d /sys/module/$m ]; then f kmod "$m"; else miss="$miss $m"; fi; done
  f kmods_known 1; fi
r /sys/class/dmi/id/product_uuid product_uuid
r /etc/machine-id machine_id
r /proc/sys/kernel/random/boot_id boot_id
set -- -e ' 0A ' -e ':192B 01 ' -e ':094B 01 ' -e ':094C 01 ' -e '^[-0-9 	]*$'
for m in $miss; do set -- "$@" -e "^[^:]*/$m\.ko"; done
set -- "$@" /proc/net/tcp /proc/net/tcp6
for k in ; do set -- "$@" "/proc/sys/$k"; done
[ -z "$miss" ] || set -- "$@" "$md/modules.builtin" "$md/modules.dep"
g=$(grep -Hs "$@"); IFS=$nl; set -f
for l in $g; do IFS=$ws; file=${l%%:*}; set -- ${l#*:}; case $file in
  /proc/net/*) case $4 in 0A) f listen "$2";; 01) f conn "$3";; esac;;
  /proc/sys/*) f kernel_setting "${file#/proc/sys/} $*";;
  *) for m in $miss; do case $1 in */$m.ko*) f kmod "$m";; esac; done;; esac; done
IFS=$ws; set +f
for c in ip kubelet; do command -v $c >/dev/null 2>&1 && f command "$c"; done
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
versions; IFS=$nl; set -f
for l in $vout; do f version "$l"; done; IFS=$ws; set +f
sock=/run/containerd/containerd.sock
if [ -S "$sock" ]; then f cri_socket yes
  if command -v crictl >/dev/null 2>&1; then crictl --runtime-endpoint "unix://$sock" --timeout 3s version >/dev/null 2>&1 && f cri_answers ok || f cri_answers fail
  elif command -v ctr >/dev/null 2>&1; then timeout 5 ctr --address "$sock" version >/dev/null 2>&1 && f cri_answers ok || f cri_answers fail
  else f cri_answers unknown; fi
else f cri_socket no; fi
if [ -r /proc/sys/net/bridge/bridge-nf-call-iptables ]; then f br_netfilter yes; r /proc/sys/net/bridge/bridge-nf-call-iptables bridge_nf_call; else f br_netfilter no; fi
r /proc/sys/net/ipv4/ip_forward ip_forward
r /proc/sys/net/ipv6/conf/default/forwarding ipv6_forward
running() { for d in /sys/fs/cgroup/system.slice /sys/fs/cgroup/systemd/system.slice; do
  v=; [ -r "$d/$1/cgroup.procs" ] && read -r v < "$d/$1/cgroup.procs" && [ -n "$v" ] && return 0; done; return 1; }
if running kubelet.service; then f unit_Id kubelet.service; f unit_ActiveState active
  running firewalld.service && { f unit_Id firewalld.service; f unit_ActiveState active; }
elif command -v systemctl >/dev/null 2>&1; then u=$(systemctl show -p Id -p ActiveState -p UnitFileState firewalld.service kubelet.service 2>/dev/null)
  IFS=$nl; set -f; for l in $u; do f "unit_${l%%=*}" "${l#*=}"; done; IFS=$ws; set +f; fi
for v in HTTP_PROXY HTTPS_PROXY NO_PROXY http_proxy https_proxy no_proxy; do
  eval "val=\${$v:-}"
  if [ -z "$val" ] && [ -r /etc/environment ]; then
    while IFS== read -r k x; do [ "$k" = "$v" ] && val=$x; done < /etc/environment
    val=${val#\"}; val=${val%\"}
  fi
  [ -n "$val" ] && f proxy "$v $val"
done
for p in /etc/kubernetes/kubelet.conf; do [ -e "$p" ] && f file "$p"; done
for d in /var/lib/etcd; do [ -d "$d" ] || continue; n=0; for e in "$d"/* "$d"/.[!.]*; do [ -e "$e" ] && n=$((n+1)); done; f dir "$d $n"; done
ca=; while read -r k v rest; do case $k in Uid:) f uid "$v";; Cpus_allowed_list:) ca=$v; break;; esac; done < /proc/self/status
if [ -n "$ca" ]; then n=0; o=$IFS; IFS=,; for c in $ca; do case $c in *-*) n=$((n + ${c#*-} - ${c%-*} + 1));; *) n=$((n + 1));; esac; done; IFS=$o; f cpus $n
else f cpus "$(nproc 2>/dev/null)"; fi
hr=; set -f; if [ -r /etc/hosts ]; then while read -r a names; do case $a in ''|'#'*) continue;; esac
  for nm in $names; do case $nm in '#'*) break;; "$hn") hr=1;; esac; done; done < /etc/hosts; fi; set +f
if [ -n "$hr" ] || getent hosts "$hn" >/dev/null 2>&1; then f hostname_resolves yes; fi
[ -r /run/systemd/container ] && r /run/systemd/container virt
if [ -d /run/systemd/system ]; then f init systemd; else r /proc/1/comm init; fi
r /etc/kubernetes/clusterctl-cluster member
[ -z "$v" ] && [ -r /etc/kubernetes/pki/ca.crt ] && while read -r l; do f ca_cert "$l"; done < /etc/kubernetes/pki/ca.crt
# The etcd user and group (profile cis runs etcd as them), and the highest system ID (100-999) no user or
# group has, for making them.
ids=' '
while IFS=: read -r n x u g rest; do [ "$n" = etcd ] && f etcd_user "$u"; ids="$ids$u "; done < /etc/passwd
while IFS=: read -r n x g rest; do [ "$n" = etcd ] && f etcd_group "$g"; ids="$ids$g "; done < /etc/group
i=999; while [ $i -ge 100 ]; do case "$ids" in *" $i "*) i=$((i-1));; *) f free_system_id $i; break;; esac; done
# Whether the kernel settings kubelets protecting the kernel's defaults check (read by the grep) can be
# changed here.
[ -w /proc/sys/kernel/panic ] && f sysctl_rw yes
for d in /opt/cni/bin; do [ -x "$d/bridge" ] && { f cni_bin_dir "$d"; break; }; done
st=/var/lib/clusterctl/stamp
# stamp_format: how stat prints the state of a file a stamp lists: its inode, size and times (a file
# rewritten, replaced, touched or removed since prints otherwise).
stamp_format='%n %i %s %y %z'
# stamp_hash PATHS: in h, the digest of what stat prints (errors included) for the files PATHS lists one per
# line. The facts script prints that output itself, and facts.ParseFacts takes the same digest of it.
stamp_hash() { set -f; o=$IFS; IFS='
'; h=$(stat -c "$stamp_format" -- $1 2>&1 | sha256sum); IFS=$o; set +f; h=${h%% *}; }

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
if [ -s "$st" ]; then { IFS= read -r l; set --; while IFS= read -r p; do [ -z "$p" ] || set -- "$@" "$p"; done; } < "$st"; f stamp "$l"
  s=$(stat -c "$stamp_format" -- "$@" 2>&1); fo="${fo}stamp_stat_begin$nl$s${nl}stamp_stat_end$nl"
  set -f; set -- $l; set +f; rt=${4-}; [ -z "$rt" ] || [ "$rt" = - ] || { routes_missing "$rt" "$r4"; f routes_missing "$rmiss"; }; fi
printf %s "$fo"
exit 0
