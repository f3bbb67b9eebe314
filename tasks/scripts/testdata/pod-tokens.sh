for f in /var/lib/kubelet/pods/*/volumes/kubernetes.io~projected/*/token; do [ -f "$f" ] && echo "$f $(cut -d. -f1 "$f")"; done; true
