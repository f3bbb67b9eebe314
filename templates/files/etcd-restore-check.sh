{{- /* Whether this host can take part in a restore: etcdutl, and an etcd manifest (in place, or held by an
interrupted restore). Prints what is missing, one line each. */ -}}
[ -x {{q .Etcdutl}} ] || echo "no etcdutl at "{{q .Etcdutl}}
[ -e {{q .Manifest}} ] || [ -e {{q .Held}} ] || echo "no etcd manifest ("{{q .Manifest}}"): not a control-plane node of this cluster"
true
