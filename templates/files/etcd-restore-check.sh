{{- /* Whether this host can take part in a restore: etcdutl, and an etcd manifest (in place, or held by an
interrupted restore), or an external member's unit. Prints what is missing, one line each. */ -}}
[ -x {{q .Etcdutl}} ] || echo "no etcdutl at "{{q .Etcdutl}}
{{- if .Unit}}
[ -e {{q .Unit}} ] || echo "no etcd unit ("{{q .Unit}}"): not an etcd host of this cluster"
{{- else}}
[ -e {{q .Manifest}} ] || [ -e {{q .Held}} ] || echo "no etcd manifest ("{{q .Manifest}}"): not a control-plane node of this cluster"
{{- end}}
true
