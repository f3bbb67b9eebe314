{{- /* Stop the running containers of a name in the Pods of a namespace, through the container runtime: the
kubelet starts each again in its Pod (at once: its back-off counts only restarts closer together than
10 s, then 20 s, ...). Then wait, polling every 0.2 s at most Tries times, until as many run again, none
of the old ones among them. Prints "restarted N", or nothing when none ran (or the runtime does not
answer: a node not set up yet runs none). */ -}}
name={{q .Name}}
set -- --label io.kubernetes.pod.namespace={{q .Namespace}} --label io.kubernetes.container.name="$name"
old=$(crictl ps -q --state running "$@" 2>/dev/null) || exit 0
[ -n "$old" ] || exit 0
crictl stop --timeout 5 $old >/dev/null || exit 1
n=0 olds=' '
for id in $old; do n=$((n+1)) olds="$olds$id "; done
i=0
while :; do
  running=0
  for id in $(crictl ps -q --state running "$@"); do
    case $olds in *" $id "*) ;; *) running=$((running+1)) ;; esac
  done
  [ $running -lt $n ] || break
  i=$((i+1)); [ $i -lt {{.Tries}} ] || { echo "$running of $n $name containers running again" >&2; exit 1; }
  sleep 0.2
done
echo "restarted $n"
