{{- /* For each certificate-bearing file, a line "== PATH" followed by its certificates (PEM) or, for a
kubeconfig, its client-certificate-data line. Private keys never leave the host. */ -}}
for f in $(find {{q .PKIDir}} -name '*.crt' 2>/dev/null | sort) {{args .Pairs}}; do
  [ -f "$f" ] || continue; echo "== $f"; sed -n '/BEGIN CERTIFICATE/,/END CERTIFICATE/p' "$f"; done
for f in {{args .Kubeconfigs}}; do
  [ -f "$f" ] || continue; echo "== $f"; grep -E '^ *client-certificate(-data)?:' "$f"; done
exit 0
