pods=$(for c in kube-apiserver kube-scheduler; do ls -d /var/lib/kubelet/pods/*/containers/"$c" 2>/dev/null; done)
rm -f /etc/kubernetes/manifests/kube-apiserver.yaml /etc/kubernetes/manifests/kube-scheduler.yaml
i=0
while :; do
  running=
  for p in kube-apiserver kube-scheduler; do pgrep -x "$p" >/dev/null && running="$running $p"; done
  [ -n "$running" ] || break
  # the cluster's only API server: it exits at its second SIGTERM (the kubelet sends the first, or this)
  pkill -TERM -x kube-apiserver || true
  i=$((i+1)); [ $i -lt 3000 ] || { echo "still running:$running" >&2; exit 1; }
  sleep 0.2
done
i=0
while [ $i -lt 25 ]; do
  left=
  for d in $pods; do [ -e "$d" ] && left=1; done
  [ -n "$left" ] || break
  i=$((i+1)); sleep 0.2
done
