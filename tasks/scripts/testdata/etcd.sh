# Managed by clusterctl: start this host's external etcd member when it is not running (without waiting:
# a new cluster's members must all start before any is ready), restart it when its unit or binary changed
# since it last started with them (waiting until it is ready again), else leave it. Prints what it did:
# "action: start etcd", "action: restart etcd", or "running".
set -e
stamps=/var/lib/clusterctl/applied
dry=
nl='
'
changed='
'
# stale NAME FILES...: the files differ from what NAME last applied, or are among those this run changes
# (their digest is then kept for commit).
stale() { n=$1; shift; s=
  for f in "$@"; do changes "$f" && s=1; done
  d=$(for f in "$@"; do [ -e "$f" ] && { printf '%s ' "$f"; digest "$f"; }; done | sha256sum | cut -d' ' -f1)
  [ -n "$s" ] || [ "$(cat "$stamps/$n" 2>/dev/null)" != "$d" ] || return 1
  [ -n "$dry" ] || { mkdir -p "$stamps" && echo "$d" > "$stamps/$n.next"; }; }
# digest FILE: its content's digest; for a file over 1 MiB (a binary, only ever replaced by a rename) its
# size, modification time and inode, which say as much without reading it.
digest() { if [ "$(stat -c %s "$1")" -gt 1048576 ]; then stat -c '%s %Y %i' "$1"; else sha256sum < "$1"; fi; }
commit() { [ -n "$dry" ] || [ ! -f "$stamps/$1.next" ] || mv "$stamps/$1.next" "$stamps/$1"; }
# changes FILE: this run writes (or in a dry run would write) FILE.
changes() { case "$changed" in *"$nl$1$nl"*) return 0;; esac; return 1; }
# act WHAT COMMAND...: runs the command (its output discarded; in a dry run, not at all) and reports
# "action: WHAT".
act() { w=$1; shift; echo "action: $w"; [ -n "$dry" ] || "$@" >/dev/null; }
# quiet COMMAND...: runs the command, not in a dry run, and reports nothing.
quiet() { [ -n "$dry" ] || "$@"; }

if systemctl is-active -q etcd; then
  if stale etcd /etc/systemd/system/etcd.service /usr/local/bin/etcd; then act "restart etcd" timeout 120 systemctl restart etcd; commit etcd
  else echo running; fi
else
  stale etcd /etc/systemd/system/etcd.service /usr/local/bin/etcd || true
  act "start etcd" systemctl start --no-block etcd; commit etcd
fi
