# Managed by clusterctl: this etcd member's scheduled snapshots ("snapshot NAME SIZE MTIME" lines, from the
# directory, by their names alone) and its schedule's state ("timer STATE", "next TIME", "last RESULT TIME").
set -u
dir={{q .Dir}}
if [ -d "$dir" ]; then
  for f in $(ls -1 "$dir" | grep -E {{q .Pattern}}); do
    st=$(stat -c '%s %Y' "$dir/$f" 2>/dev/null) && echo "snapshot $f $st"
  done
fi
if [ -f {{q .Timer}} ]; then
  echo "timer $(systemctl is-active {{.TimerName}} 2>/dev/null)"
  echo "next $(systemctl show -p NextElapseUSecRealtime --value {{.TimerName}} 2>/dev/null)"
  echo "last $(systemctl show -p Result --value {{.ServiceName}} 2>/dev/null) $(systemctl show -p ExecMainExitTimestamp --value {{.ServiceName}} 2>/dev/null)"
fi
exit 0
