{{- /* Remove the API server's manifest and wait until the kubelet has stopped it. */ -}}
rm -f {{q .Manifest}}
i=0; while pgrep -x kube-apiserver >/dev/null; do i=$((i+1)); [ $i -lt {{.Tries}} ] || { echo 'the API server did not stop' >&2; exit 1; }; sleep 0.5; done
