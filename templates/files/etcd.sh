# Managed by clusterctl: start this host's external etcd member when it is not running (without waiting:
# a new cluster's members must all start before any is ready), restart it when its unit or binary changed
# since it last started with them (waiting until it is ready again), else leave it. Prints what it did:
# "action: start etcd", "action: restart etcd", or "running".
set -e
{{template "stamps.sh" .}}
if systemctl is-active -q etcd; then
  if stale etcd {{args .Inputs}}; then act "restart etcd" timeout {{.Timeout}} systemctl restart etcd; commit etcd
  else echo running; fi
else
  stale etcd {{args .Inputs}} || true
  act "start etcd" systemctl start --no-block etcd; commit etcd
fi
