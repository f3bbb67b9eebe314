{{- /* Remove files, printing "removed" for each that was there. */ -}}
for f in {{args .Files}}; do [ -e "$f" ] && rm -f "$f" && echo removed; done; true
