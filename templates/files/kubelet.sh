# Managed by clusterctl: restart the kubelet when the files it starts with changed since it last started
# with them (or when told to), start it when it is not running, else leave it alone. Prints what it did:
# "action: restart kubelet", "action: start kubelet", or "running"; before a restart or start, "started: "
# and the host's clock in seconds (the kubelet's Node reports a status posted since then only once this
# kubelet runs: one posted before is its predecessor's).
set -e
{{template "stamps.sh" .}}
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
if stale kubelet {{args .Inputs}}{{if .Restart}} || true{{end}}; then settle; started; act "restart kubelet" systemctl restart kubelet; commit kubelet
elif systemctl is-active -q kubelet; then echo running
else started; act "start kubelet" systemctl start kubelet; fi
