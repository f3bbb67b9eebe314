rm -f /etc/kubernetes/manifests/kube-apiserver.yaml
i=0; while pgrep -x kube-apiserver >/dev/null; do i=$((i+1)); [ $i -lt 600 ] || { echo 'the API server did not stop' >&2; exit 1; }; sleep 0.5; done
