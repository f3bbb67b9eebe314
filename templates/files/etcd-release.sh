{{- /* Put held manifests back where the kubelet reads them; prints "released NAME" for each. */ -}}
set -eu
for f in {{args .Names}}; do
  if [ -e {{q .Hold}}/"$f" ]; then mv -f {{q .Hold}}/"$f" {{q .Manifests}}/"$f" && echo "released $f"; fi
done
rmdir {{q .Hold}} 2>/dev/null || true
