set -eu
[ -x /usr/local/bin/etcdutl ] || command -v /usr/local/bin/etcdutl >/dev/null || { echo "etcdutl not found at "/usr/local/bin/etcdutl": clusterctl pushes it to control-plane hosts from the artifacts" >&2; exit 1; }
if pgrep -x etcd >/dev/null; then echo 'etcd is running: its manifest must be held first' >&2; exit 1; fi
rm -rf /var/lib/etcd.restoring
/usr/local/bin/etcdutl snapshot restore /var/lib/clusterctl/etcd-restore/snapshot.db --name cp1.lab --initial-cluster 'cp1.lab=https://[fd00:10::11]:2380,cp2=https://10.0.0.12:2380' \
  --initial-cluster-token 'restore-'\''$(id)'\''' --initial-advertise-peer-urls 'https://[fd00:10::11]:2380' --data-dir /var/lib/etcd.restoring \
  --bump-revision 1000000000 --mark-compacted 2>/var/lib/etcd.restoring.log || { cat /var/lib/etcd.restoring.log >&2; rm -rf /var/lib/etcd.restoring; exit 1; }
rm -f /var/lib/etcd.restoring.log
# The restored data goes to whom the data it replaces belonged (the etcd user under profile cis).
owner=0:0
if [ -d /var/lib/etcd ]; then owner=$(stat -c %u:%g /var/lib/etcd); rm -rf /var/lib/etcd.before-restore; mv /var/lib/etcd /var/lib/etcd.before-restore; fi
chown -R "$owner" /var/lib/etcd.restoring
chmod 700 /var/lib/etcd.restoring
mv /var/lib/etcd.restoring /var/lib/etcd
rm -f /var/lib/clusterctl/etcd-restore/snapshot.db
sync
echo restored
