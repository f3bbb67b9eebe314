set -eu
mkdir -p /var/lib/clusterctl/etcd-restore/held
chmod 700 /var/lib/clusterctl/etcd-restore/held
for f in /etc/kubernetes/manifests/etcd.yaml /etc/kubernetes/manifests/kube-apiserver.yaml /etc/kubernetes/manifests/kube-controller-manager.yaml /etc/kubernetes/manifests/kube-scheduler.yaml; do
  if [ -e "$f" ]; then mv -f "$f" /var/lib/clusterctl/etcd-restore/held/ && echo "held ${f##*/}"; fi
done
i=0
while pgrep -x 'etcd|kube-apiserver|kube-controller-manager|kube-scheduler' >/dev/null; do
  i=$((i+1))
  [ $i -lt 240 ] || { echo "still running after the manifests were moved: $(pgrep -x -l 'etcd|kube-apiserver|kube-controller-manager|kube-scheduler' | tr '\n' ' ')" >&2; exit 1; }
  sleep 0.5
done
