pgrep -x kube-apiserver || true
