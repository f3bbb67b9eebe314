######## cp1.corp.example.com: preflight: the API server's port, from this host
timeout 5 bash -c 'exec 3<>"/dev/tcp/$1/$2"' probe fd00:10::11 6443
######## cp1.corp.example.com: preflight: a listener on this host's etcd peer port
ip=fd00:10::11 port=2380
if command -v socat >/dev/null 2>&1; then
  l="TCP-LISTEN:$port,bind=$ip"; case $ip in *:*) l="TCP6-LISTEN:$port,bind=[$ip]";; esac
  exec timeout 60 socat -T2 "$l,reuseaddr,fork" SYSTEM:true
elif command -v python3 >/dev/null 2>&1; then exec timeout 60 python3 -c '
import socket,sys
s=socket.socket(socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET)
s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)
s.bind((sys.argv[1],int(sys.argv[2]))); s.listen(64)
while True: s.accept()[0].close()' "$ip" "$port"
elif command -v perl >/dev/null 2>&1; then exec timeout 60 perl -MIO::Socket::IP -e '
$s=IO::Socket::IP->new(LocalHost=>$ARGV[0],LocalPort=>$ARGV[1],Listen=>64,ReuseAddr=>1) or die "listen: $@\n";
while($c=$s->accept){close $c}' "$ip" "$port"
else echo "no socat, python3 or perl to listen with" >&2; exit 127; fi
######## cp1.corp.example.com: push: setup after the first push
# Managed by clusterctl: apply what the host's files need (kernel modules and settings, units, the
# runtime's binaries and configuration, image archives not yet imported), each only when its files changed.
# A host that only runs an external etcd member (.EtcdOnly) has no runtime, kubelet or kernel settings.
set -e
stamps=/var/lib/clusterctl/applied
dry=
nl='
'
changed='
/etc/containerd/config.toml
/etc/crictl.yaml
/etc/kubernetes/admin.conf
/etc/kubernetes/apiserver/admission-config.yaml
/etc/kubernetes/apiserver/audit-policy.yaml
/etc/kubernetes/apiserver/encryption-config.yaml
/etc/kubernetes/controller-manager.conf
/etc/kubernetes/kubelet.conf
/etc/kubernetes/manifests/etcd.yaml
/etc/kubernetes/manifests/kube-apiserver.yaml
/etc/kubernetes/manifests/kube-controller-manager.yaml
/etc/kubernetes/manifests/kube-scheduler.yaml
/etc/kubernetes/pki/apiserver-etcd-client.crt
/etc/kubernetes/pki/apiserver-etcd-client.key
/etc/kubernetes/pki/apiserver-kubelet-client.crt
/etc/kubernetes/pki/apiserver-kubelet-client.key
/etc/kubernetes/pki/apiserver.crt
/etc/kubernetes/pki/apiserver.key
/etc/kubernetes/pki/ca.crt
/etc/kubernetes/pki/ca.key
/etc/kubernetes/pki/etcd/ca.crt
/etc/kubernetes/pki/etcd/ca.key
/etc/kubernetes/pki/etcd/healthcheck-client.crt
/etc/kubernetes/pki/etcd/healthcheck-client.key
/etc/kubernetes/pki/etcd/peer.crt
/etc/kubernetes/pki/etcd/peer.key
/etc/kubernetes/pki/etcd/server.crt
/etc/kubernetes/pki/etcd/server.key
/etc/kubernetes/pki/front-proxy-ca.crt
/etc/kubernetes/pki/front-proxy-ca.key
/etc/kubernetes/pki/front-proxy-client.crt
/etc/kubernetes/pki/front-proxy-client.key
/etc/kubernetes/pki/kubelet-serving-ca.crt
/etc/kubernetes/pki/kubelet-serving-ca.key
/etc/kubernetes/pki/sa.key
/etc/kubernetes/pki/sa.pub
/etc/kubernetes/scheduler.conf
/etc/kubernetes/super-admin.conf
/etc/modules-load.d/kubernetes.conf
/etc/sysctl.d/99-kubernetes.conf
/etc/systemd/networkd.conf.d/clusterctl.conf
/etc/systemd/system/clusterctl-pod-routes.service
/etc/systemd/system/containerd.service
/etc/systemd/system/kubelet.service
/etc/systemd/system/kubelet.service.d/10-kubeadm.conf
/var/lib/kubelet/config.yaml
/var/lib/kubelet/instance-config.yaml
/var/lib/kubelet/kubeadm-flags.env
/usr/local/bin/etcdctl
/usr/local/bin/etcdutl
/usr/local/bin/kubectl
/usr/local/bin/kubelet
/opt/cni/bin/bridge
/opt/cni/bin/host-local
/opt/cni/bin/loopback
/opt/cni/bin/portmap
/var/lib/clusterctl/images/coredns.tar
/var/lib/clusterctl/images/etcd.tar
/var/lib/clusterctl/images/kube-apiserver.tar
/var/lib/clusterctl/images/kube-controller-manager.tar
/var/lib/clusterctl/images/kube-proxy.tar
/var/lib/clusterctl/images/kube-scheduler.tar
/var/lib/clusterctl/images/pause.tar
/usr/local/bin/containerd
/usr/local/bin/containerd-shim-runc-v2
/usr/local/bin/crictl
/usr/local/bin/ctr
/usr/local/sbin/runc
/etc/kubernetes/clusterctl-cluster
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

prestale modules /etc/modules-load.d/kubernetes.conf sysctl /etc/sysctl.d/99-kubernetes.conf units /etc/systemd/system/kubelet.service /etc/systemd/system/kubelet.service.d/10-kubeadm.conf /etc/systemd/system/clusterctl-pod-routes.service /etc/systemd/system/containerd.service containerd /etc/containerd/config.toml /etc/systemd/system/containerd.service /usr/local/bin/containerd /usr/local/bin/containerd-shim-runc-v2 /usr/local/sbin/runc networkd /etc/systemd/networkd.conf.d/clusterctl.conf
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
# Directories only root may enter (kubeadm's mode for etcd's data; the API server's configuration and audit log).
[ "$(stat -c %a /etc/kubernetes/apiserver 2>/dev/null)" = 700 ] || act "make "/etc/kubernetes/apiserver" 0700" install -d -m 0700 /etc/kubernetes/apiserver
[ "$(stat -c %a /var/log/kubernetes/audit 2>/dev/null)" = 700 ] || act "make "/var/log/kubernetes/audit" 0700" install -d -m 0700 /var/log/kubernetes/audit
[ "$(stat -c %a /var/lib/etcd 2>/dev/null)" = 700 ] || act "make "/var/lib/etcd" 0700" install -d -m 0700 /var/lib/etcd
# One reload for every unit file that changed; enabling a unit then reloads nothing more (--no-reload: each
# reload takes seconds on a busy host). A node's pod routes unit is enabled (for boot) before that reload: the
# network step then starts it without one of its own, on a host whose kubelet is starting its first Pods
# (where the routes script took 10-15 s, its actions 2.5-5.5 s of it: the reload most of the rest).
# systemd 257 needs the reload after an enable, 252 does not.
reload=
systemctl is-enabled -q clusterctl-pod-routes.service 2>/dev/null || { act "enable the pod routes unit" systemctl enable --no-reload -q clusterctl-pod-routes.service; reload=1; }
if stale units /etc/systemd/system/kubelet.service /etc/systemd/system/kubelet.service.d/10-kubeadm.conf /etc/systemd/system/clusterctl-pod-routes.service /etc/systemd/system/containerd.service; then quiet systemctl daemon-reload; commit units
elif [ -n "$reload" ]; then quiet systemctl daemon-reload; fi
# The pod routes the kernel lacks (flushed with the interface's address, by a DHCP client, by hand): put
# back by the routes unit, here so that a dry run (clusterctl diff, status) says so too.
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
routes_missing /var/lib/clusterctl/pod-routes
if [ "$rmiss" -gt 0 ] && systemctl is-enabled -q clusterctl-pod-routes.service 2>/dev/null; then act "put back $rmiss pod routes missing from the kernel" systemctl restart clusterctl-pod-routes.service; fi
# systemd-networkd reads its drop-in (it leaves the routes it did not make alone) only when it starts:
# restarted where it runs when the drop-in changed, here beside the node's other setup rather than in the
# network step, where the kubelet is starting its first Pods (0.5-3.3 s there). The network step's routes
# script shares the stamp: it restarts networkd only on a node whose push did not.
if stale networkd /etc/systemd/networkd.conf.d/clusterctl.conf; then
  if systemctl is-active -q systemd-networkd; then act "restart systemd-networkd (it leaves foreign routes alone)" systemctl restart systemd-networkd; fi
  commit networkd
fi
# A schedule of clusterctl's the inventory no longer has: its timer stopped and its files removed (the
# snapshots stay).
if grep -qs 'Managed by clusterctl' /etc/systemd/system/clusterctl-etcd-snapshot.timer; then
  act "stop the etcd snapshots' timer" systemctl disable --no-reload -q --now clusterctl-etcd-snapshot.timer
  quiet rm -f /etc/systemd/system/clusterctl-etcd-snapshot.service /etc/systemd/system/clusterctl-etcd-snapshot.timer /usr/local/lib/clusterctl/etcd-snapshot
  quiet systemctl daemon-reload
fi
# Running containers outlive a restart of containerd (its unit kills only the daemon).
if stale containerd /etc/containerd/config.toml /etc/systemd/system/containerd.service /usr/local/bin/containerd /usr/local/bin/containerd-shim-runc-v2 /usr/local/sbin/runc; then
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
if changes /var/lib/clusterctl/images/coredns.tar || ! imported registry.k8s.io/coredns/coredns:v1.12.1; then import_image registry.k8s.io/coredns/coredns:v1.12.1 /var/lib/clusterctl/images/coredns.tar; fi
if changes /var/lib/clusterctl/images/etcd.tar || ! imported registry.k8s.io/etcd:3.6.5-0; then import_image registry.k8s.io/etcd:3.6.5-0 /var/lib/clusterctl/images/etcd.tar; fi
if changes /var/lib/clusterctl/images/kube-apiserver.tar || ! imported registry.k8s.io/kube-apiserver:v1.34.4; then import_image registry.k8s.io/kube-apiserver:v1.34.4 /var/lib/clusterctl/images/kube-apiserver.tar; fi
if changes /var/lib/clusterctl/images/kube-controller-manager.tar || ! imported registry.k8s.io/kube-controller-manager:v1.34.4; then import_image registry.k8s.io/kube-controller-manager:v1.34.4 /var/lib/clusterctl/images/kube-controller-manager.tar; fi
if changes /var/lib/clusterctl/images/kube-proxy.tar || ! imported registry.k8s.io/kube-proxy:v1.34.4; then import_image registry.k8s.io/kube-proxy:v1.34.4 /var/lib/clusterctl/images/kube-proxy.tar; fi
if changes /var/lib/clusterctl/images/kube-scheduler.tar || ! imported registry.k8s.io/kube-scheduler:v1.34.4; then import_image registry.k8s.io/kube-scheduler:v1.34.4 /var/lib/clusterctl/images/kube-scheduler.tar; fi
if changes /var/lib/clusterctl/images/pause.tar || ! imported registry.k8s.io/pause:3.10.1; then import_image registry.k8s.io/pause:3.10.1 /var/lib/clusterctl/images/pause.tar; fi
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
######## cp1.corp.example.com: start the kubelet
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
if stale kubelet /var/lib/kubelet/config.yaml /var/lib/kubelet/kubeadm-flags.env /etc/systemd/system/kubelet.service /etc/systemd/system/kubelet.service.d/10-kubeadm.conf /etc/kubernetes/pki/ca.crt /usr/local/bin/kubelet /etc/kubernetes/kubelet.conf; then settle; started; act "restart kubelet" systemctl restart kubelet; commit kubelet
elif systemctl is-active -q kubelet; then echo running
else started; act "start kubelet" systemctl start kubelet; fi
######## cp2.corp.example.com: preflight: the API server's port, from this host
timeout 5 bash -c 'exec 3<>"/dev/tcp/$1/$2"' probe fd00:10::11 6443
######## cp2.corp.example.com: preflight: a listener on this host's etcd peer port
ip=fd00:10::12 port=2380
if command -v socat >/dev/null 2>&1; then
  l="TCP-LISTEN:$port,bind=$ip"; case $ip in *:*) l="TCP6-LISTEN:$port,bind=[$ip]";; esac
  exec timeout 60 socat -T2 "$l,reuseaddr,fork" SYSTEM:true
elif command -v python3 >/dev/null 2>&1; then exec timeout 60 python3 -c '
import socket,sys
s=socket.socket(socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET)
s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)
s.bind((sys.argv[1],int(sys.argv[2]))); s.listen(64)
while True: s.accept()[0].close()' "$ip" "$port"
elif command -v perl >/dev/null 2>&1; then exec timeout 60 perl -MIO::Socket::IP -e '
$s=IO::Socket::IP->new(LocalHost=>$ARGV[0],LocalPort=>$ARGV[1],Listen=>64,ReuseAddr=>1) or die "listen: $@\n";
while($c=$s->accept){close $c}' "$ip" "$port"
else echo "no socat, python3 or perl to listen with" >&2; exit 127; fi
######## cp2.corp.example.com: push: setup after the first push
# Managed by clusterctl: apply what the host's files need (kernel modules and settings, units, the
# runtime's binaries and configuration, image archives not yet imported), each only when its files changed.
# A host that only runs an external etcd member (.EtcdOnly) has no runtime, kubelet or kernel settings.
set -e
stamps=/var/lib/clusterctl/applied
dry=
nl='
'
changed='
/etc/containerd/config.toml
/etc/crictl.yaml
/etc/kubernetes/admin.conf
/etc/kubernetes/apiserver/admission-config.yaml
/etc/kubernetes/apiserver/audit-policy.yaml
/etc/kubernetes/apiserver/encryption-config.yaml
/etc/kubernetes/controller-manager.conf
/etc/kubernetes/kubelet.conf
/etc/kubernetes/manifests/etcd.yaml
/etc/kubernetes/manifests/kube-apiserver.yaml
/etc/kubernetes/manifests/kube-controller-manager.yaml
/etc/kubernetes/manifests/kube-scheduler.yaml
/etc/kubernetes/pki/apiserver-etcd-client.crt
/etc/kubernetes/pki/apiserver-etcd-client.key
/etc/kubernetes/pki/apiserver-kubelet-client.crt
/etc/kubernetes/pki/apiserver-kubelet-client.key
/etc/kubernetes/pki/apiserver.crt
/etc/kubernetes/pki/apiserver.key
/etc/kubernetes/pki/ca.crt
/etc/kubernetes/pki/ca.key
/etc/kubernetes/pki/etcd/ca.crt
/etc/kubernetes/pki/etcd/ca.key
/etc/kubernetes/pki/etcd/healthcheck-client.crt
/etc/kubernetes/pki/etcd/healthcheck-client.key
/etc/kubernetes/pki/etcd/peer.crt
/etc/kubernetes/pki/etcd/peer.key
/etc/kubernetes/pki/etcd/server.crt
/etc/kubernetes/pki/etcd/server.key
/etc/kubernetes/pki/front-proxy-ca.crt
/etc/kubernetes/pki/front-proxy-ca.key
/etc/kubernetes/pki/front-proxy-client.crt
/etc/kubernetes/pki/front-proxy-client.key
/etc/kubernetes/pki/kubelet-serving-ca.crt
/etc/kubernetes/pki/kubelet-serving-ca.key
/etc/kubernetes/pki/sa.key
/etc/kubernetes/pki/sa.pub
/etc/kubernetes/scheduler.conf
/etc/modules-load.d/kubernetes.conf
/etc/sysctl.d/99-kubernetes.conf
/etc/systemd/networkd.conf.d/clusterctl.conf
/etc/systemd/system/clusterctl-pod-routes.service
/etc/systemd/system/containerd.service
/etc/systemd/system/kubelet.service
/etc/systemd/system/kubelet.service.d/10-kubeadm.conf
/var/lib/kubelet/config.yaml
/var/lib/kubelet/instance-config.yaml
/var/lib/kubelet/kubeadm-flags.env
/usr/local/bin/etcdctl
/usr/local/bin/etcdutl
/usr/local/bin/kubectl
/usr/local/bin/kubelet
/opt/cni/bin/bridge
/opt/cni/bin/host-local
/opt/cni/bin/loopback
/opt/cni/bin/portmap
/var/lib/clusterctl/images/coredns.tar
/var/lib/clusterctl/images/etcd.tar
/var/lib/clusterctl/images/kube-apiserver.tar
/var/lib/clusterctl/images/kube-controller-manager.tar
/var/lib/clusterctl/images/kube-proxy.tar
/var/lib/clusterctl/images/kube-scheduler.tar
/var/lib/clusterctl/images/pause.tar
/usr/local/bin/containerd
/usr/local/bin/containerd-shim-runc-v2
/usr/local/bin/crictl
/usr/local/bin/ctr
/usr/local/sbin/runc
/etc/kubernetes/clusterctl-cluster
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

prestale modules /etc/modules-load.d/kubernetes.conf sysctl /etc/sysctl.d/99-kubernetes.conf units /etc/systemd/system/kubelet.service /etc/systemd/system/kubelet.service.d/10-kubeadm.conf /etc/systemd/system/clusterctl-pod-routes.service /etc/systemd/system/containerd.service containerd /etc/containerd/config.toml /etc/systemd/system/containerd.service /usr/local/bin/containerd /usr/local/bin/containerd-shim-runc-v2 /usr/local/sbin/runc networkd /etc/systemd/networkd.conf.d/clusterctl.conf
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
# Directories only root may enter (kubeadm's mode for etcd's data; the API server's configuration and audit log).
[ "$(stat -c %a /etc/kubernetes/apiserver 2>/dev/null)" = 700 ] || act "make "/etc/kubernetes/apiserver" 0700" install -d -m 0700 /etc/kubernetes/apiserver
[ "$(stat -c %a /var/log/kubernetes/audit 2>/dev/null)" = 700 ] || act "make "/var/log/kubernetes/audit" 0700" install -d -m 0700 /var/log/kubernetes/audit
[ "$(stat -c %a /var/lib/etcd 2>/dev/null)" = 700 ] || act "make "/var/lib/etcd" 0700" install -d -m 0700 /var/lib/etcd
# One reload for every unit file that changed; enabling a unit then reloads nothing more (--no-reload: each
# reload takes seconds on a busy host). A node's pod routes unit is enabled (for boot) before that reload: the
# network step then starts it without one of its own, on a host whose kubelet is starting its first Pods
# (where the routes script took 10-15 s, its actions 2.5-5.5 s of it: the reload most of the rest).
# systemd 257 needs the reload after an enable, 252 does not.
reload=
systemctl is-enabled -q clusterctl-pod-routes.service 2>/dev/null || { act "enable the pod routes unit" systemctl enable --no-reload -q clusterctl-pod-routes.service; reload=1; }
if stale units /etc/systemd/system/kubelet.service /etc/systemd/system/kubelet.service.d/10-kubeadm.conf /etc/systemd/system/clusterctl-pod-routes.service /etc/systemd/system/containerd.service; then quiet systemctl daemon-reload; commit units
elif [ -n "$reload" ]; then quiet systemctl daemon-reload; fi
# The pod routes the kernel lacks (flushed with the interface's address, by a DHCP client, by hand): put
# back by the routes unit, here so that a dry run (clusterctl diff, status) says so too.
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
routes_missing /var/lib/clusterctl/pod-routes
if [ "$rmiss" -gt 0 ] && systemctl is-enabled -q clusterctl-pod-routes.service 2>/dev/null; then act "put back $rmiss pod routes missing from the kernel" systemctl restart clusterctl-pod-routes.service; fi
# systemd-networkd reads its drop-in (it leaves the routes it did not make alone) only when it starts:
# restarted where it runs when the drop-in changed, here beside the node's other setup rather than in the
# network step, where the kubelet is starting its first Pods (0.5-3.3 s there). The network step's routes
# script shares the stamp: it restarts networkd only on a node whose push did not.
if stale networkd /etc/systemd/networkd.conf.d/clusterctl.conf; then
  if systemctl is-active -q systemd-networkd; then act "restart systemd-networkd (it leaves foreign routes alone)" systemctl restart systemd-networkd; fi
  commit networkd
fi
# A schedule of clusterctl's the inventory no longer has: its timer stopped and its files removed (the
# snapshots stay).
if grep -qs 'Managed by clusterctl' /etc/systemd/system/clusterctl-etcd-snapshot.timer; then
  act "stop the etcd snapshots' timer" systemctl disable --no-reload -q --now clusterctl-etcd-snapshot.timer
  quiet rm -f /etc/systemd/system/clusterctl-etcd-snapshot.service /etc/systemd/system/clusterctl-etcd-snapshot.timer /usr/local/lib/clusterctl/etcd-snapshot
  quiet systemctl daemon-reload
fi
# Running containers outlive a restart of containerd (its unit kills only the daemon).
if stale containerd /etc/containerd/config.toml /etc/systemd/system/containerd.service /usr/local/bin/containerd /usr/local/bin/containerd-shim-runc-v2 /usr/local/sbin/runc; then
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
if changes /var/lib/clusterctl/images/coredns.tar || ! imported registry.k8s.io/coredns/coredns:v1.12.1; then import_image registry.k8s.io/coredns/coredns:v1.12.1 /var/lib/clusterctl/images/coredns.tar; fi
if changes /var/lib/clusterctl/images/etcd.tar || ! imported registry.k8s.io/etcd:3.6.5-0; then import_image registry.k8s.io/etcd:3.6.5-0 /var/lib/clusterctl/images/etcd.tar; fi
if changes /var/lib/clusterctl/images/kube-apiserver.tar || ! imported registry.k8s.io/kube-apiserver:v1.34.4; then import_image registry.k8s.io/kube-apiserver:v1.34.4 /var/lib/clusterctl/images/kube-apiserver.tar; fi
if changes /var/lib/clusterctl/images/kube-controller-manager.tar || ! imported registry.k8s.io/kube-controller-manager:v1.34.4; then import_image registry.k8s.io/kube-controller-manager:v1.34.4 /var/lib/clusterctl/images/kube-controller-manager.tar; fi
if changes /var/lib/clusterctl/images/kube-proxy.tar || ! imported registry.k8s.io/kube-proxy:v1.34.4; then import_image registry.k8s.io/kube-proxy:v1.34.4 /var/lib/clusterctl/images/kube-proxy.tar; fi
if changes /var/lib/clusterctl/images/kube-scheduler.tar || ! imported registry.k8s.io/kube-scheduler:v1.34.4; then import_image registry.k8s.io/kube-scheduler:v1.34.4 /var/lib/clusterctl/images/kube-scheduler.tar; fi
if changes /var/lib/clusterctl/images/pause.tar || ! imported registry.k8s.io/pause:3.10.1; then import_image registry.k8s.io/pause:3.10.1 /var/lib/clusterctl/images/pause.tar; fi
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
######## cp2.corp.example.com: start the kubelet
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
if stale kubelet /var/lib/kubelet/config.yaml /var/lib/kubelet/kubeadm-flags.env /etc/systemd/system/kubelet.service /etc/systemd/system/kubelet.service.d/10-kubeadm.conf /etc/kubernetes/pki/ca.crt /usr/local/bin/kubelet /etc/kubernetes/kubelet.conf; then settle; started; act "restart kubelet" systemctl restart kubelet; commit kubelet
elif systemctl is-active -q kubelet; then echo running
else started; act "start kubelet" systemctl start kubelet; fi
######## cp3.corp.example.com: preflight: the API server's port, from this host
timeout 5 bash -c 'exec 3<>"/dev/tcp/$1/$2"' probe fd00:10::11 6443
######## cp3.corp.example.com: preflight: a listener on this host's etcd peer port
ip=fd00:10::13 port=2380
if command -v socat >/dev/null 2>&1; then
  l="TCP-LISTEN:$port,bind=$ip"; case $ip in *:*) l="TCP6-LISTEN:$port,bind=[$ip]";; esac
  exec timeout 60 socat -T2 "$l,reuseaddr,fork" SYSTEM:true
elif command -v python3 >/dev/null 2>&1; then exec timeout 60 python3 -c '
import socket,sys
s=socket.socket(socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET)
s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)
s.bind((sys.argv[1],int(sys.argv[2]))); s.listen(64)
while True: s.accept()[0].close()' "$ip" "$port"
elif command -v perl >/dev/null 2>&1; then exec timeout 60 perl -MIO::Socket::IP -e '
$s=IO::Socket::IP->new(LocalHost=>$ARGV[0],LocalPort=>$ARGV[1],Listen=>64,ReuseAddr=>1) or die "listen: $@\n";
while($c=$s->accept){close $c}' "$ip" "$port"
else echo "no socat, python3 or perl to listen with" >&2; exit 127; fi
######## cp3.corp.example.com: push: setup after the first push
# Managed by clusterctl: apply what the host's files need (kernel modules and settings, units, the
# runtime's binaries and configuration, image archives not yet imported), each only when its files changed.
# A host that only runs an external etcd member (.EtcdOnly) has no runtime, kubelet or kernel settings.
set -e
stamps=/var/lib/clusterctl/applied
dry=
nl='
'
changed='
/etc/containerd/config.toml
/etc/crictl.yaml
/etc/kubernetes/admin.conf
/etc/kubernetes/apiserver/admission-config.yaml
/etc/kubernetes/apiserver/audit-policy.yaml
/etc/kubernetes/apiserver/encryption-config.yaml
/etc/kubernetes/controller-manager.conf
/etc/kubernetes/kubelet.conf
/etc/kubernetes/manifests/etcd.yaml
/etc/kubernetes/manifests/kube-apiserver.yaml
/etc/kubernetes/manifests/kube-controller-manager.yaml
/etc/kubernetes/manifests/kube-scheduler.yaml
/etc/kubernetes/pki/apiserver-etcd-client.crt
/etc/kubernetes/pki/apiserver-etcd-client.key
/etc/kubernetes/pki/apiserver-kubelet-client.crt
/etc/kubernetes/pki/apiserver-kubelet-client.key
/etc/kubernetes/pki/apiserver.crt
/etc/kubernetes/pki/apiserver.key
/etc/kubernetes/pki/ca.crt
/etc/kubernetes/pki/ca.key
/etc/kubernetes/pki/etcd/ca.crt
/etc/kubernetes/pki/etcd/ca.key
/etc/kubernetes/pki/etcd/healthcheck-client.crt
/etc/kubernetes/pki/etcd/healthcheck-client.key
/etc/kubernetes/pki/etcd/peer.crt
/etc/kubernetes/pki/etcd/peer.key
/etc/kubernetes/pki/etcd/server.crt
/etc/kubernetes/pki/etcd/server.key
/etc/kubernetes/pki/front-proxy-ca.crt
/etc/kubernetes/pki/front-proxy-ca.key
/etc/kubernetes/pki/front-proxy-client.crt
/etc/kubernetes/pki/front-proxy-client.key
/etc/kubernetes/pki/kubelet-serving-ca.crt
/etc/kubernetes/pki/kubelet-serving-ca.key
/etc/kubernetes/pki/sa.key
/etc/kubernetes/pki/sa.pub
/etc/kubernetes/scheduler.conf
/etc/modules-load.d/kubernetes.conf
/etc/sysctl.d/99-kubernetes.conf
/etc/systemd/networkd.conf.d/clusterctl.conf
/etc/systemd/system/clusterctl-pod-routes.service
/etc/systemd/system/containerd.service
/etc/systemd/system/kubelet.service
/etc/systemd/system/kubelet.service.d/10-kubeadm.conf
/var/lib/kubelet/config.yaml
/var/lib/kubelet/instance-config.yaml
/var/lib/kubelet/kubeadm-flags.env
/usr/local/bin/etcdctl
/usr/local/bin/etcdutl
/usr/local/bin/kubectl
/usr/local/bin/kubelet
/opt/cni/bin/bridge
/opt/cni/bin/host-local
/opt/cni/bin/loopback
/opt/cni/bin/portmap
/var/lib/clusterctl/images/coredns.tar
/var/lib/clusterctl/images/etcd.tar
/var/lib/clusterctl/images/kube-apiserver.tar
/var/lib/clusterctl/images/kube-controller-manager.tar
/var/lib/clusterctl/images/kube-proxy.tar
/var/lib/clusterctl/images/kube-scheduler.tar
/var/lib/clusterctl/images/pause.tar
/usr/local/bin/containerd
/usr/local/bin/containerd-shim-runc-v2
/usr/local/bin/crictl
/usr/local/bin/ctr
/usr/local/sbin/runc
/etc/kubernetes/clusterctl-cluster
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

prestale modules /etc/modules-load.d/kubernetes.conf sysctl /etc/sysctl.d/99-kubernetes.conf units /etc/systemd/system/kubelet.service /etc/systemd/system/kubelet.service.d/10-kubeadm.conf /etc/systemd/system/clusterctl-pod-routes.service /etc/systemd/system/containerd.service containerd /etc/containerd/config.toml /etc/systemd/system/containerd.service /usr/local/bin/containerd /usr/local/bin/containerd-shim-runc-v2 /usr/local/sbin/runc networkd /etc/systemd/networkd.conf.d/clusterctl.conf
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
# Directories only root may enter (kubeadm's mode for etcd's data; the API server's configuration and audit log).
[ "$(stat -c %a /etc/kubernetes/apiserver 2>/dev/null)" = 700 ] || act "make "/etc/kubernetes/apiserver" 0700" install -d -m 0700 /etc/kubernetes/apiserver
[ "$(stat -c %a /var/log/kubernetes/audit 2>/dev/null)" = 700 ] || act "make "/var/log/kubernetes/audit" 0700" install -d -m 0700 /var/log/kubernetes/audit
[ "$(stat -c %a /var/lib/etcd 2>/dev/null)" = 700 ] || act "make "/var/lib/etcd" 0700" install -d -m 0700 /var/lib/etcd
# One reload for every unit file that changed; enabling a unit then reloads nothing more (--no-reload: each
# reload takes seconds on a busy host). A node's pod routes unit is enabled (for boot) before that reload: the
# network step then starts it without one of its own, on a host whose kubelet is starting its first Pods
# (where the routes script took 10-15 s, its actions 2.5-5.5 s of it: the reload most of the rest).
# systemd 257 needs the reload after an enable, 252 does not.
reload=
systemctl is-enabled -q clusterctl-pod-routes.service 2>/dev/null || { act "enable the pod routes unit" systemctl enable --no-reload -q clusterctl-pod-routes.service; reload=1; }
if stale units /etc/systemd/system/kubelet.service /etc/systemd/system/kubelet.service.d/10-kubeadm.conf /etc/systemd/system/clusterctl-pod-routes.service /etc/systemd/system/containerd.service; then quiet systemctl daemon-reload; commit units
elif [ -n "$reload" ]; then quiet systemctl daemon-reload; fi
# The pod routes the kernel lacks (flushed with the interface's address, by a DHCP client, by hand): put
# back by the routes unit, here so that a dry run (clusterctl diff, status) says so too.
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
routes_missing /var/lib/clusterctl/pod-routes
if [ "$rmiss" -gt 0 ] && systemctl is-enabled -q clusterctl-pod-routes.service 2>/dev/null; then act "put back $rmiss pod routes missing from the kernel" systemctl restart clusterctl-pod-routes.service; fi
# systemd-networkd reads its drop-in (it leaves the routes it did not make alone) only when it starts:
# restarted where it runs when the drop-in changed, here beside the node's other setup rather than in the
# network step, where the kubelet is starting its first Pods (0.5-3.3 s there). The network step's routes
# script shares the stamp: it restarts networkd only on a node whose push did not.
if stale networkd /etc/systemd/networkd.conf.d/clusterctl.conf; then
  if systemctl is-active -q systemd-networkd; then act "restart systemd-networkd (it leaves foreign routes alone)" systemctl restart systemd-networkd; fi
  commit networkd
fi
# A schedule of clusterctl's the inventory no longer has: its timer stopped and its files removed (the
# snapshots stay).
if grep -qs 'Managed by clusterctl' /etc/systemd/system/clusterctl-etcd-snapshot.timer; then
  act "stop the etcd snapshots' timer" systemctl disable --no-reload -q --now clusterctl-etcd-snapshot.timer
  quiet rm -f /etc/systemd/system/clusterctl-etcd-snapshot.service /etc/systemd/system/clusterctl-etcd-snapshot.timer /usr/local/lib/clusterctl/etcd-snapshot
  quiet systemctl daemon-reload
fi
# Running containers outlive a restart of containerd (its unit kills only the daemon).
if stale containerd /etc/containerd/config.toml /etc/systemd/system/containerd.service /usr/local/bin/containerd /usr/local/bin/containerd-shim-runc-v2 /usr/local/sbin/runc; then
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
if changes /var/lib/clusterctl/images/coredns.tar || ! imported registry.k8s.io/coredns/coredns:v1.12.1; then import_image registry.k8s.io/coredns/coredns:v1.12.1 /var/lib/clusterctl/images/coredns.tar; fi
if changes /var/lib/clusterctl/images/etcd.tar || ! imported registry.k8s.io/etcd:3.6.5-0; then import_image registry.k8s.io/etcd:3.6.5-0 /var/lib/clusterctl/images/etcd.tar; fi
if changes /var/lib/clusterctl/images/kube-apiserver.tar || ! imported registry.k8s.io/kube-apiserver:v1.34.4; then import_image registry.k8s.io/kube-apiserver:v1.34.4 /var/lib/clusterctl/images/kube-apiserver.tar; fi
if changes /var/lib/clusterctl/images/kube-controller-manager.tar || ! imported registry.k8s.io/kube-controller-manager:v1.34.4; then import_image registry.k8s.io/kube-controller-manager:v1.34.4 /var/lib/clusterctl/images/kube-controller-manager.tar; fi
if changes /var/lib/clusterctl/images/kube-proxy.tar || ! imported registry.k8s.io/kube-proxy:v1.34.4; then import_image registry.k8s.io/kube-proxy:v1.34.4 /var/lib/clusterctl/images/kube-proxy.tar; fi
if changes /var/lib/clusterctl/images/kube-scheduler.tar || ! imported registry.k8s.io/kube-scheduler:v1.34.4; then import_image registry.k8s.io/kube-scheduler:v1.34.4 /var/lib/clusterctl/images/kube-scheduler.tar; fi
if changes /var/lib/clusterctl/images/pause.tar || ! imported registry.k8s.io/pause:3.10.1; then import_image registry.k8s.io/pause:3.10.1 /var/lib/clusterctl/images/pause.tar; fi
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
######## cp3.corp.example.com: start the kubelet
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
if stale kubelet /var/lib/kubelet/config.yaml /var/lib/kubelet/kubeadm-flags.env /etc/systemd/system/kubelet.service /etc/systemd/system/kubelet.service.d/10-kubeadm.conf /etc/kubernetes/pki/ca.crt /usr/local/bin/kubelet /etc/kubernetes/kubelet.conf; then settle; started; act "restart kubelet" systemctl restart kubelet; commit kubelet
elif systemctl is-active -q kubelet; then echo running
else started; act "start kubelet" systemctl start kubelet; fi
######## w1.corp.example.com: preflight: the API server's port, from this host
timeout 5 bash -c 'exec 3<>"/dev/tcp/$1/$2"' probe fd00:10::11 6443
######## w1.corp.example.com: preflight: a listener on this host's etcd peer port
ip=fd00:10::21 port=2380
if command -v socat >/dev/null 2>&1; then
  l="TCP-LISTEN:$port,bind=$ip"; case $ip in *:*) l="TCP6-LISTEN:$port,bind=[$ip]";; esac
  exec timeout 60 socat -T2 "$l,reuseaddr,fork" SYSTEM:true
elif command -v python3 >/dev/null 2>&1; then exec timeout 60 python3 -c '
import socket,sys
s=socket.socket(socket.AF_INET6 if ":" in sys.argv[1] else socket.AF_INET)
s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)
s.bind((sys.argv[1],int(sys.argv[2]))); s.listen(64)
while True: s.accept()[0].close()' "$ip" "$port"
elif command -v perl >/dev/null 2>&1; then exec timeout 60 perl -MIO::Socket::IP -e '
$s=IO::Socket::IP->new(LocalHost=>$ARGV[0],LocalPort=>$ARGV[1],Listen=>64,ReuseAddr=>1) or die "listen: $@\n";
while($c=$s->accept){close $c}' "$ip" "$port"
else echo "no socat, python3 or perl to listen with" >&2; exit 127; fi
######## w1.corp.example.com: push: setup after the first push
# Managed by clusterctl: apply what the host's files need (kernel modules and settings, units, the
# runtime's binaries and configuration, image archives not yet imported), each only when its files changed.
# A host that only runs an external etcd member (.EtcdOnly) has no runtime, kubelet or kernel settings.
set -e
stamps=/var/lib/clusterctl/applied
dry=
nl='
'
changed='
/etc/containerd/config.toml
/etc/crictl.yaml
/etc/kubernetes/pki/ca.crt
/etc/modules-load.d/kubernetes.conf
/etc/sysctl.d/99-kubernetes.conf
/etc/systemd/networkd.conf.d/clusterctl.conf
/etc/systemd/system/clusterctl-pod-routes.service
/etc/systemd/system/containerd.service
/etc/systemd/system/kubelet.service
/etc/systemd/system/kubelet.service.d/10-kubeadm.conf
/var/lib/kubelet/config.yaml
/var/lib/kubelet/instance-config.yaml
/var/lib/kubelet/kubeadm-flags.env
/etc/kubernetes/bootstrap-kubelet.conf
/usr/local/bin/kubelet
/opt/cni/bin/bridge
/opt/cni/bin/host-local
/opt/cni/bin/loopback
/opt/cni/bin/portmap
/var/lib/clusterctl/images/coredns.tar
/var/lib/clusterctl/images/kube-proxy.tar
/var/lib/clusterctl/images/pause.tar
/usr/local/bin/containerd
/usr/local/bin/containerd-shim-runc-v2
/usr/local/bin/crictl
/usr/local/bin/ctr
/usr/local/sbin/runc
/etc/kubernetes/clusterctl-cluster
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

prestale modules /etc/modules-load.d/kubernetes.conf sysctl /etc/sysctl.d/99-kubernetes.conf units /etc/systemd/system/kubelet.service /etc/systemd/system/kubelet.service.d/10-kubeadm.conf /etc/systemd/system/clusterctl-pod-routes.service /etc/systemd/system/containerd.service containerd /etc/containerd/config.toml /etc/systemd/system/containerd.service /usr/local/bin/containerd /usr/local/bin/containerd-shim-runc-v2 /usr/local/sbin/runc networkd /etc/systemd/networkd.conf.d/clusterctl.conf
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
systemctl is-enabled -q clusterctl-pod-routes.service 2>/dev/null || { act "enable the pod routes unit" systemctl enable --no-reload -q clusterctl-pod-routes.service; reload=1; }
if stale units /etc/systemd/system/kubelet.service /etc/systemd/system/kubelet.service.d/10-kubeadm.conf /etc/systemd/system/clusterctl-pod-routes.service /etc/systemd/system/containerd.service; then quiet systemctl daemon-reload; commit units
elif [ -n "$reload" ]; then quiet systemctl daemon-reload; fi
# The pod routes the kernel lacks (flushed with the interface's address, by a DHCP client, by hand): put
# back by the routes unit, here so that a dry run (clusterctl diff, status) says so too.
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
routes_missing /var/lib/clusterctl/pod-routes
if [ "$rmiss" -gt 0 ] && systemctl is-enabled -q clusterctl-pod-routes.service 2>/dev/null; then act "put back $rmiss pod routes missing from the kernel" systemctl restart clusterctl-pod-routes.service; fi
# systemd-networkd reads its drop-in (it leaves the routes it did not make alone) only when it starts:
# restarted where it runs when the drop-in changed, here beside the node's other setup rather than in the
# network step, where the kubelet is starting its first Pods (0.5-3.3 s there). The network step's routes
# script shares the stamp: it restarts networkd only on a node whose push did not.
if stale networkd /etc/systemd/networkd.conf.d/clusterctl.conf; then
  if systemctl is-active -q systemd-networkd; then act "restart systemd-networkd (it leaves foreign routes alone)" systemctl restart systemd-networkd; fi
  commit networkd
fi
# A schedule of clusterctl's the inventory no longer has: its timer stopped and its files removed (the
# snapshots stay).
if grep -qs 'Managed by clusterctl' /etc/systemd/system/clusterctl-etcd-snapshot.timer; then
  act "stop the etcd snapshots' timer" systemctl disable --no-reload -q --now clusterctl-etcd-snapshot.timer
  quiet rm -f /etc/systemd/system/clusterctl-etcd-snapshot.service /etc/systemd/system/clusterctl-etcd-snapshot.timer /usr/local/lib/clusterctl/etcd-snapshot
  quiet systemctl daemon-reload
fi
# Running containers outlive a restart of containerd (its unit kills only the daemon).
if stale containerd /etc/containerd/config.toml /etc/systemd/system/containerd.service /usr/local/bin/containerd /usr/local/bin/containerd-shim-runc-v2 /usr/local/sbin/runc; then
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
if changes /var/lib/clusterctl/images/coredns.tar || ! imported registry.k8s.io/coredns/coredns:v1.12.1; then import_image registry.k8s.io/coredns/coredns:v1.12.1 /var/lib/clusterctl/images/coredns.tar; fi
if changes /var/lib/clusterctl/images/kube-proxy.tar || ! imported registry.k8s.io/kube-proxy:v1.34.4; then import_image registry.k8s.io/kube-proxy:v1.34.4 /var/lib/clusterctl/images/kube-proxy.tar; fi
if changes /var/lib/clusterctl/images/pause.tar || ! imported registry.k8s.io/pause:3.10.1; then import_image registry.k8s.io/pause:3.10.1 /var/lib/clusterctl/images/pause.tar; fi
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
######## w1.corp.example.com: start the kubelet
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
if stale kubelet /var/lib/kubelet/config.yaml /var/lib/kubelet/kubeadm-flags.env /etc/systemd/system/kubelet.service /etc/systemd/system/kubelet.service.d/10-kubeadm.conf /etc/kubernetes/pki/ca.crt /usr/local/bin/kubelet; then settle; started; act "restart kubelet" systemctl restart kubelet; commit kubelet
elif systemctl is-active -q kubelet; then echo running
else started; act "start kubelet" systemctl start kubelet; fi
