{{- /* The certificates of a PEM file, never its key; nothing when there is no file. */ -}}
[ -e {{q .File}} ] && sed -n '/BEGIN CERTIFICATE/,/END CERTIFICATE/p' {{q .File}}; true
