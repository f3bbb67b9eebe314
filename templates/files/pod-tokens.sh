{{- /* Each Pod's service-account token file with the header of its token (the key that signed it), never the
token itself. */ -}}
for f in {{.PodsDir}}/*/volumes/kubernetes.io~projected/*/token; do [ -f "$f" ] && echo "$f $(cut -d. -f1 "$f")"; done; true
