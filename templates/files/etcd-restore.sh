{{- /* Restore this node's etcd member from the snapshot into a new data directory, then swap it in: the
data directory it replaces is kept as .Before (one, the previous one replaced), the snapshot removed. */ -}}
set -eu
[ -x {{q .Etcdutl}} ] || command -v {{q .Etcdutl}} >/dev/null || { echo "etcdutl not found at "{{q .Etcdutl}}": clusterctl pushes it to control-plane hosts from the artifacts" >&2; exit 1; }
if pgrep -x etcd >/dev/null; then echo 'etcd is running: its manifest must be held first' >&2; exit 1; fi
rm -rf {{q .Work}}
{{q .Etcdutl}} snapshot restore {{q .Snapshot}} --name {{q .Name}} --initial-cluster {{q .InitialCluster}} \
  --initial-cluster-token {{q .Token}} --initial-advertise-peer-urls {{q .PeerURL}} --data-dir {{q .Work}} \
  --bump-revision {{.Bump}} --mark-compacted 2>{{q .Work}}.log || { cat {{q .Work}}.log >&2; rm -rf {{q .Work}}; exit 1; }
rm -f {{q .Work}}.log
# The restored data goes to whom the data it replaces belonged (the etcd user under profile cis).
owner=0:0
if [ -d {{q .Data}} ]; then owner=$(stat -c %u:%g {{q .Data}}); rm -rf {{q .Before}}; mv {{q .Data}} {{q .Before}}; fi
chown -R "$owner" {{q .Work}}
chmod 700 {{q .Work}}
mv {{q .Work}} {{q .Data}}
rm -f {{q .Snapshot}}
sync
echo restored
