{{- /* The process IDs of a program, one per line, or nothing. */ -}}
pgrep -x {{q .Name}} || true
