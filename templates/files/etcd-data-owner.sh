{{- /* Give etcd's data directory, and all it holds, to the user a stopped member starts as next. */ -}}
set -e
[ -d {{q .Dir}} ] || exit 0
chown -R {{q .Owner}} {{q .Dir}}
chmod 0700 {{q .Dir}}
