# Managed by clusterctl: apply what the host's files need (kernel modules and settings, units, the
# runtime's binaries and configuration, image archives not yet imported), each only when its files changed.
# A host that only runs an external etcd member (.EtcdOnly) has no runtime, kubelet or kernel settings.
set -e
{{template "stamps.sh" .}}
{{- /* Every stamp's digests at once: the script changes none of their files before their stale. */}}
prestale{{if not .EtcdOnly}} modules {{q .Modules}} sysctl {{q .Sysctl}}{{end}} units {{args .Units}}
{{- if .Snapshots}} etcd-snapshots {{args .SnapshotFiles}}{{end}}{{if not .EtcdOnly}} containerd {{args .Containerd}}{{end}}
{{- if .Networkd}} networkd {{q .Networkd}}{{end}}
{{- if not .EtcdOnly}}
if stale modules {{q .Modules}}; then act "load kernel modules" modprobe -a overlay br_netfilter 2>/dev/null || true; commit modules; fi
if stale sysctl {{q .Sysctl}}; then
  # The values the kernel had before, kept the first time only: reset puts them back.
  before={{q .SysctlBefore}}
  if [ -z "$dry" ] && [ ! -e "$before" ]; then
    mkdir -p "${before%/*}"
    sed -n 's/^\([a-z0-9_.-]*\) *=.*/\1/p' {{q .Sysctl}} | while read -r k; do if v=$(sysctl -n "$k" 2>/dev/null); then echo "$k = $v"; fi; done >"$before.tmp"
    mv -f "$before.tmp" "$before"
  fi
  # Each setting whose value differs, and only those: a host whose /proc/sys is read-only (a container) may
  # have the kernel's already (preflight said which it lacks).
  apply_sysctl() { [ -r {{q .Sysctl}} ] || return 0; while read -r k eq v; do
      case $k in ''|'#'*) continue;; esac
      [ "$(sysctl -n "$k" 2>/dev/null)" = "$v" ] || sysctl -q -w "$k=$v" || { echo "kernel setting $k: cannot set it to $v" >&2; return 1; }
    done < {{q .Sysctl}}; }
  act "apply kernel settings" apply_sysctl; commit sysctl
fi
{{- end}}
{{- with .EtcdUser}}
# Profile cis: etcd runs as the user and group etcd ({{.Owner}}), made here when the host has neither (reset
# removes them then), and owns its data directory.
getent group etcd >/dev/null || act "make the group etcd" groupadd --system --gid {{.GID}} etcd
if ! getent passwd etcd >/dev/null; then
  act "make the user etcd" useradd --system --uid {{.UID}} --gid {{.GID}} --no-create-home --home-dir {{q $.EtcdData}} --shell /usr/sbin/nologin etcd
  [ -n "$dry" ] || : > {{q $.EtcdUserMade}}
fi
[ -n "$dry" ] || [ "$(id -u etcd):$(id -g etcd)" = {{q .Owner}} ] || { echo "the user etcd is $(id -u etcd):$(id -g etcd), not {{.Owner}} as this run's files have it: run it again" >&2; exit 1; }
if [ ! -d {{q $.EtcdData}} ]; then act "make "{{q $.EtcdData}}" etcd's" install -d -m 0700 -o {{.UID}} -g {{.GID}} {{q $.EtcdData}}
elif [ "$(stat -c %u:%g {{q $.EtcdData}})" != {{q .Owner}} ]; then act "give "{{q $.EtcdData}}" to etcd" chown -R {{.Owner}} {{q $.EtcdData}}; fi
{{- end}}
{{- if .PrivateDirs}}
# Directories only root may enter (kubeadm's mode for etcd's data; the API server's configuration and audit log).
{{- end}}
{{- range .PrivateDirs}}
[ "$(stat -c %a {{q .}} 2>/dev/null)" = 700 ] || act "make "{{q .}}" 0700" install -d -m 0700 {{q .}}
{{- end}}
# One reload for every unit file that changed; enabling a unit then reloads nothing more (--no-reload: each
# reload takes seconds on a busy host). A node's pod routes unit is enabled (for boot) before that reload: the
# network step then starts it without one of its own, on a host whose kubelet is starting its first Pods
# (where the routes script took 10-15 s, its actions 2.5-5.5 s of it: the reload most of the rest).
# systemd 257 needs the reload after an enable, 252 does not.
reload=
{{- if .PodRoutesUnit}}
systemctl is-enabled -q {{q .PodRoutesUnit}} 2>/dev/null || { act "enable the pod routes unit" systemctl enable --no-reload -q {{q .PodRoutesUnit}}; reload=1; }
{{- end}}
if stale units {{args .Units}}; then quiet systemctl daemon-reload; commit units
elif [ -n "$reload" ]; then quiet systemctl daemon-reload; fi
{{- if .PodRoutes}}
# The pod routes the kernel lacks (flushed with the interface's address, by a DHCP client, by hand): put
# back by the routes unit, here so that a dry run (clusterctl diff, status) says so too.
{{template "routes-missing.sh" -}}
routes_missing {{q .PodRoutes}}
if [ "$rmiss" -gt 0 ] && systemctl is-enabled -q {{q .PodRoutesUnit}} 2>/dev/null; then act "put back $rmiss pod routes missing from the kernel" systemctl restart {{q .PodRoutesUnit}}; fi
{{- end}}
{{- if .Networkd}}
# systemd-networkd reads its drop-in (it leaves the routes it did not make alone) only when it starts:
# restarted where it runs when the drop-in changed, here beside the node's other setup rather than in the
# network step, where the kubelet is starting its first Pods (0.5-3.3 s there). The network step's routes
# script shares the stamp: it restarts networkd only on a node whose push did not.
if stale networkd {{q .Networkd}}; then
  if systemctl is-active -q systemd-networkd; then act "restart systemd-networkd (it leaves foreign routes alone)" systemctl restart systemd-networkd; fi
  commit networkd
fi
{{- end}}
{{- if .EtcdUnit}}
systemctl is-enabled -q etcd 2>/dev/null || act "enable etcd" systemctl enable --no-reload -q etcd
{{- end}}
{{- if .Snapshots}}
# The etcd member's scheduled snapshots: the timer started, restarted when its files changed (a schedule).
if stale etcd-snapshots {{args .SnapshotFiles}}; then
  if systemctl is-active -q {{.SnapshotTimer}}; then act "restart the etcd snapshots' timer" systemctl restart {{.SnapshotTimer}}; fi
  commit etcd-snapshots
fi
systemctl is-active -q {{.SnapshotTimer}} || act "start the etcd snapshots' timer" systemctl enable --no-reload -q --now {{.SnapshotTimer}}
{{- else if not .Partial}}
# A schedule of clusterctl's the inventory no longer has: its timer stopped and its files removed (the
# snapshots stay).
if grep -qs 'Managed by clusterctl' {{index .SnapshotFiles 1}}; then
  act "stop the etcd snapshots' timer" systemctl disable --no-reload -q --now {{.SnapshotTimer}}
  quiet rm -f {{args .SnapshotFiles}}
  quiet systemctl daemon-reload
fi
{{- end}}
{{- if not .EtcdOnly}}
# Running containers outlive a restart of containerd (its unit kills only the daemon).
if stale containerd {{args .Containerd}}; then
  if systemctl is-active -q containerd; then act "restart containerd" systemctl restart containerd; fi
  commit containerd
fi
if ! systemctl is-active -q containerd; then act "start containerd" systemctl enable --no-reload -q --now containerd
elif ! systemctl is-enabled -q containerd 2>/dev/null; then act "enable containerd" systemctl enable --no-reload -q containerd; fi
# The images containerd has, listed once (ctr is a Go program: each start costs 0.1-0.2 s on a busy host).
{{- if not .Dry}}
# The runtime may have just started: wait until it answers (at most 30 s).
i=0; until have=$(ctr -n k8s.io images ls -q 2>/dev/null); do i=$((i+1)); [ $i -lt 60 ] || { echo 'containerd does not answer' >&2; exit 1; }; sleep 0.5; done
{{- else}}
have=$(ctr -n k8s.io images ls -q 2>/dev/null) || have=
{{- end}}
# imported REF: containerd has the image REF.
imported() { case "$nl$have$nl" in *"$nl$1$nl"*) return 0;; esac; return 1; }
# Image archives are imported side by side (each unpacks its layers), then each import's status checked
# (ctr's error names the archive).
imports=
import_image() { echo "action: import image $1"; [ -n "$dry" ] || { ctr -n k8s.io images import "$2" >/dev/null & imports="$imports $!"; }; }
{{- range .Images}}
if changes {{q .File}} || ! imported {{q .Ref}}{{if .Pinned}} || ! imported {{q .Pinned}}{{end}}; then import_image {{q .Ref}} {{q .File}}; fi
{{- end}}
{{- if not .Dry}}
# The components' versions, for the facts script (while the imports run): asked only where the cache lacks one.
{{template "versions.sh" . -}}
versions
[ -z "$vmiss" ] || [ ! -d "${vc%/*}" ] || { printf '%s' "$vnew" > "$vc.tmp" && mv -f "$vc.tmp" "$vc"; }
{{- end}}
failed=; for p in $imports; do wait "$p" || failed=1; done
[ -z "$failed" ] || { echo "importing an image archive failed" >&2; exit 1; }
systemctl is-enabled -q kubelet 2>/dev/null || act "enable the kubelet" systemctl enable --no-reload -q kubelet
{{- end}}
