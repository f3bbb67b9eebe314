{{- /* Put back what an upgrade phase kept of a node's files (transport.File.Previous) under .Dir: each kept
file over its path (renamed: the kept file is the old one itself, its mode and owner with it), the path of
each absent marker removed; files under .Except stay kept (the caller writes them: a control-plane node's
static Pod manifests, in order). Then containerd restarts when its files changed since it last started.
Prints "action: ..." for each; "none" when nothing was kept. With .Drop, the directory is removed and
nothing else done. In a dry run (.Dry) nothing is written or done: only said. */ -}}
set -e
{{template "stamps.sh" .}}
dir={{q .Dir}}
{{- if .Drop}}
[ -e "$dir" ] || exit 0
act "forget the files kept for a rollback" rm -rf "$dir"
{{- else}}
[ -d "$dir" ] || { echo none; exit 0; }
except={{q .Except}}
find "$dir" -type f | sort | while IFS= read -r kept; do
  target=${kept#"$dir"}
  if [ -n "$except" ]; then case $target in "$except"/*) continue ;; esac; fi
  case $target in
    *{{.Absent}})
      target=${target%{{.Absent}}}
      if [ -e "$target" ]; then echo "action: remove $target"; quiet rm -f "$target"; fi
      quiet rm -f "$kept" ;;
    {{.Images}}/*.tar)
      # an image archive: its image imported again (the kubelet may have removed the unused old image)
      echo "action: import image $target"
      [ -n "$dry" ] || { ctr -n k8s.io images import "$kept" >/dev/null && mkdir -p "${target%/*}" && mv -f "$kept" "$target"; } ;;
    *)
      echo "action: put back $target"
      [ -n "$dry" ] || { mkdir -p "${target%/*}" && mv -f "$kept" "$target"; } ;;
  esac
done
quiet systemctl daemon-reload
if stale containerd {{args .Containerd}}; then
  if systemctl is-active -q containerd; then act "restart containerd" systemctl restart containerd; fi
  commit containerd
fi
{{- end}}
