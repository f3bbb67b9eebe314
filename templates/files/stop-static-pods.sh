{{- /* Remove static Pod manifests, wait until the kubelet has stopped their programs, then (5 s at most) until
it has cleaned up their Pods (their directories under the kubelet's pods directory). A manifest written
while the kubelet still holds the old Pod of that name waits for the kubelet's back-off (10-15 s) to
start; written after, it starts at once. */ -}}
pods=$(for c in{{range .Containers}} {{q .}}{{end}}; do ls -d {{q .PodsDir}}/*/containers/"$c" 2>/dev/null; done)
{{- if .Keep}}
# kept first, as the upload keeps what it replaces (a hard link, else a copy; a marker when there is none)
keep={{q .Keep}}
for m in{{range .Manifests}} {{q .}}{{end}}; do
  [ -e "$keep$m" ] || [ -e "$keep$m{{.Absent}}" ] && continue
  mkdir -p "$keep${m%/*}"
  if [ -e "$m" ]; then ln "$m" "$keep$m" 2>/dev/null || cp -p "$m" "$keep$m"; else : > "$keep$m{{.Absent}}"; fi
done
{{- end}}
rm -f{{range .Manifests}} {{q .}}{{end}}
i=0
while :; do
  running=
  for p in{{range .Processes}} {{q .}}{{end}}; do pgrep -x "$p" >/dev/null && running="$running $p"; done
  [ -n "$running" ] || break
  i=$((i+1)); [ $i -lt {{.Tries}} ] || { echo "still running:$running" >&2; exit 1; }
  sleep 0.2
done
i=0
while [ $i -lt 25 ]; do
  left=
  for d in $pods; do [ -e "$d" ] && left=1; done
  [ -n "$left" ] || break
  i=$((i+1)); sleep 0.2
done
