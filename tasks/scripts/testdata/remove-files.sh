for f in /etc/kubernetes/pki/ca-signer.crt /etc/kubernetes/pki/ca-signer.key; do [ -e "$f" ] && rm -f "$f" && echo removed; done; true
