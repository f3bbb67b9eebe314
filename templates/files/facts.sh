{{- /* One fact per line, "key<TAB>value", under sh (dash or bash) as root, reading /proc and /sys with shell
builtins wherever it can: on a host, each process it starts costs more than everything else, so it starts
five on a running node (date for the clock; ip; one grep for the sockets, the kernel settings and the
modules not loaded; stat for the versions, and for the stamp), and where needed systemctl (no kubelet
running), ip for IPv6 pod routes, getent (/etc/hosts lacks the hostname), the version of each installed
Kubernetes component that the setup script's cache lacks, crictl (the runtime is the host's own); no
subshell without a process. A missing tool leaves its fact empty. */ -}}
{{template "facthead.sh" -}}
{{- /* The host's clock first, in one write (printf's): GatherFacts times its arrival. */}}
printf 'clock\t%s\n' "$(date +%s.%N)"
r /proc/sys/kernel/hostname hostname; hn=$v
if [ -r /etc/os-release ]; then . /etc/os-release; f os "$ID"; f os_version "$VERSION_ID"; f os_pretty "$PRETTY_NAME"; fi
r /proc/sys/kernel/osrelease kernel; kr=$v
{{- /* The machine's name as uname -m prints it: the kernel's sysctl (Linux 6.1 on), else uname. */}}
if [ -r /proc/sys/kernel/arch ]; then r /proc/sys/kernel/arch arch; else f arch "$(uname -m)"; fi
if [ -r /sys/fs/cgroup/cgroup.controllers ]; then f cgroupfs cgroup2fs; r /sys/fs/cgroup/cgroup.controllers cgroup_controllers
else f cgroupfs tmpfs; c=; for d in /sys/fs/cgroup/*/; do d=${d%/}; c="$c ${d##*/}"; done; f cgroup_controllers "$c"; fi
n=-1; while read -r l; do n=$((n+1)); done < /proc/swaps; f swap_devices $n
while read -r k v u; do case $k in MemTotal:) f mem_kb $v;; SwapTotal:) f swap_kb $v; break;; esac; done < /proc/meminfo
{{template "netlinks.sh" -}}
# Kernel modules the policy controller and kube-proxy's nftables mode need: loaded, built in, or installed
# (those not loaded are looked for by the sockets' grep, below).
md=/lib/modules/$kr miss=
if [ -d "$md" ]; then
  for m in nfnetlink_queue nft_queue nft_compat xt_NFQUEUE nf_tables; do if [ -d /sys/module/$m ]; then f kmod "$m"; else miss="$miss $m"; fi; done
  f kmods_known 1; fi
r /sys/class/dmi/id/product_uuid product_uuid
r /etc/machine-id machine_id
r /proc/sys/kernel/random/boot_id boot_id
{{- /* One grep for what sh cannot read well (a file a byte per system call; an integer sysctl, so read, ends
after its first digit), each line after its file's name: the listening sockets (state 0A) and the
established connections (01) to the ports asked; the kernel settings asked; the modules not loaded, by their
own lines (a path, before modules.dep's colon) in the kernel's lists. */}}
set -- -e ' 0A '{{range .ConnGrep}} -e {{q .}}{{end}} -e '^[-0-9 	]*$'
for m in $miss; do set -- "$@" -e "^[^:]*/$m\.ko"; done
set -- "$@" /proc/net/tcp /proc/net/tcp6
for k in {{args .KernelSettings}}; do set -- "$@" "/proc/sys/$k"; done
[ -z "$miss" ] || set -- "$@" "$md/modules.builtin" "$md/modules.dep"
g=$(grep -Hs "$@"); IFS=$nl; set -f
for l in $g; do IFS=$ws; file=${l%%:*}; set -- ${l#*:}; case $file in
  /proc/net/*) case $4 in 0A) f listen "$2";; 01) f conn "$3";; esac;;
  /proc/sys/*) f kernel_setting "${file#/proc/sys/} $*";;
  *) for m in $miss; do case $1 in */$m.ko*) f kmod "$m";; esac; done;; esac; done
IFS=$ws; set +f
for c in {{args .Commands}}; do command -v $c >/dev/null 2>&1 && f command "$c"; done
{{template "versions.sh" . -}}
versions; IFS=$nl; set -f
for l in $vout; do f version "$l"; done; IFS=$ws; set +f
sock={{q .Socket}}
if [ -S "$sock" ]; then f cri_socket yes
{{- /* The host's own runtime is asked whether it answers; one clusterctl installs is not (it starts later). */}}
{{- if .AskCRI}}
  if command -v crictl >/dev/null 2>&1; then crictl --runtime-endpoint "unix://$sock" --timeout 3s version >/dev/null 2>&1 && f cri_answers ok || f cri_answers fail
  elif command -v ctr >/dev/null 2>&1; then timeout 5 ctr --address "$sock" version >/dev/null 2>&1 && f cri_answers ok || f cri_answers fail
  else f cri_answers unknown; fi
{{- end}}
else f cri_socket no; fi
if [ -r /proc/sys/net/bridge/bridge-nf-call-iptables ]; then f br_netfilter yes; r /proc/sys/net/bridge/bridge-nf-call-iptables bridge_nf_call; else f br_netfilter no; fi
r /proc/sys/net/ipv4/ip_forward ip_forward
r /proc/sys/net/ipv6/conf/default/forwarding ipv6_forward
{{- /* The kubelet's and firewalld's units are active where their cgroups (systemd's tree, cgroup v2 or v1) hold a
process; systemctl, a start of 10-20 ms on a busy host and work for PID 1, is asked only where the
kubelet's holds none (a host not yet a node, a kubelet stopped or elsewhere): their states then, and
whether the kubelet's unit is enabled (preflight warns where it is not; a running kubelet's is not asked). */}}
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
for p in {{args .Files}}; do [ -e "$p" ] && f file "$p"; done
for d in {{args .Dirs}}; do [ -d "$d" ] || continue; n=0; for e in "$d"/* "$d"/.[!.]*; do [ -e "$e" ] && n=$((n+1)); done; f dir "$d $n"; done
{{- /* The CPUs this shell may run on, as nproc counts them (its affinity: Cpus_allowed_list, "0-3,8"). */}}
ca=; while read -r k v rest; do case $k in Uid:) f uid "$v";; Cpus_allowed_list:) ca=$v; break;; esac; done < /proc/self/status
if [ -n "$ca" ]; then n=0; o=$IFS; IFS=,; for c in $ca; do case $c in *-*) n=$((n + ${c#*-} - ${c%-*} + 1));; *) n=$((n + 1));; esac; done; IFS=$o; f cpus $n
else f cpus "$(nproc 2>/dev/null)"; fi
{{- /* The hostname resolves: in /etc/hosts (read here), else as getent finds it (nsswitch). */}}
hr=; set -f; if [ -r /etc/hosts ]; then while read -r a names; do case $a in ''|'#'*) continue;; esac
  for nm in $names; do case $nm in '#'*) break;; "$hn") hr=1;; esac; done; done < /etc/hosts; fi; set +f
if [ -n "$hr" ] || getent hosts "$hn" >/dev/null 2>&1; then f hostname_resolves yes; fi
[ -r /run/systemd/container ] && r /run/systemd/container virt
if [ -d /run/systemd/system ]; then f init systemd; else r /proc/1/comm init; fi
r {{q .MemberPath}} member
{{- /* A node that joined without clusterctl (kubeadm join) has no mark: its CA certificate says which cluster. */}}
[ -z "$v" ] && [ -r {{q .CACert}} ] && while read -r l; do f ca_cert "$l"; done < {{q .CACert}}
# The etcd user and group (profile cis runs etcd as them), and the highest system ID (100-999) no user or
# group has, for making them.
ids=' '
while IFS=: read -r n x u g rest; do [ "$n" = etcd ] && f etcd_user "$u"; ids="$ids$u "; done < /etc/passwd
while IFS=: read -r n x g rest; do [ "$n" = etcd ] && f etcd_group "$g"; ids="$ids$g "; done < /etc/group
i=999; while [ $i -ge 100 ]; do case "$ids" in *" $i "*) i=$((i-1));; *) f free_system_id $i; break;; esac; done
# Whether the kernel settings kubelets protecting the kernel's defaults check (read by the grep) can be
# changed here.
[ -w /proc/sys/kernel/panic ] && f sysctl_rw yes
for d in {{args .CNIBinDirs}}; do [ -x "$d/bridge" ] && { f cni_bin_dir "$d"; break; }; done
{{- if .Stamp}}
{{- /* The stamp a run left (its first line), and the state now of the files it lists: stat's output between
two marks, whose digest ParseFacts takes as stamp_hash does (stamphash.sh). */}}
st={{q .Stamp}}
{{template "stamphash.sh"}}
{{template "routes-missing.sh" -}}
if [ -s "$st" ]; then { IFS= read -r l; set --; while IFS= read -r p; do [ -z "$p" ] || set -- "$@" "$p"; done; } < "$st"; f stamp "$l"
  s=$(stat -c "$stamp_format" -- "$@" 2>&1); fo="${fo}stamp_stat_begin$nl$s${nl}stamp_stat_end$nl"
  set -f; set -- $l; set +f; rt=${4-}; [ -z "$rt" ] || [ "$rt" = - ] || { routes_missing "$rt" "$r4"; f routes_missing "$rmiss"; }; fi
{{- end}}
printf %s "$fo"
exit 0
