{{- /* Stop a control-plane node's etcd and control plane for a restore: their manifests move to the hold
directory (the kubelet stops what it no longer has a manifest for), then wait until none of them runs.
Prints "held NAME" for each manifest moved; a manifest already held is left there. */ -}}
set -eu
mkdir -p {{q .Hold}}
chmod 700 {{q .Hold}}
for f in {{args .Manifests}}; do
  if [ -e "$f" ]; then mv -f "$f" {{q .Hold}}/ && echo "held ${f##*/}"; fi
done
i=0
while pgrep -x 'etcd|kube-apiserver|kube-controller-manager|kube-scheduler' >/dev/null; do
  i=$((i+1))
  [ $i -lt {{.Tries}} ] || { echo "still running after the manifests were moved: $(pgrep -x -l 'etcd|kube-apiserver|kube-controller-manager|kube-scheduler' | tr '\n' ' ')" >&2; exit 1; }
  sleep 0.5
done
