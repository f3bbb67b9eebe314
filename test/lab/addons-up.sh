#!/usr/bin/env bash
# addons-up.sh — under labmirror -addons (which appends the mirror's flags): add the named add-ons to the
# lab's inventory, their charts from the mirror's Helm repository (local-path-provisioner) and OCI
# registry (metrics-server), and pull everything the inventory needs into the lab's directory.
#
#   labmirror -artifacts DIR -addons DIR -- test/lab/addons-up.sh LAB_DIR "local-path-provisioner metrics-server"
set -euo pipefail
exec 9>&-
[ $# -ge 2 ] || { echo "usage: $0 LAB_DIR ADDONS [MIRROR FLAGS...]" >&2; exit 2; }
lab=$1 addons=$2
shift 2
: "${CLUSTERCTL_LAB_CHARTS:?run under labmirror -addons}" "${CLUSTERCTL_LAB_CHARTS_OCI:?run under labmirror -addons}"
inv=$lab/cluster.yaml
block="  artifacts: $lab/artifacts
  addons:"
for a in $addons; do
  case $a in
  local-path-provisioner) block+="
    - name: local-path
      chart: local-path-provisioner
      version: 0.0.30
      repository: $CLUSTERCTL_LAB_CHARTS
      namespace: local-path-storage
      podSecurity: privileged       # its helper Pods mount host paths
      values:
        storageClass: {defaultClass: true}" ;;
  metrics-server) block+="
    - name: metrics-server
      chart: metrics-server
      version: 3.12.2
      repository: $CLUSTERCTL_LAB_CHARTS_OCI
      namespace: kube-system
      values:
        image: {tag: v0.8.0}
        # the lab's kubelets serve certificates of the kubelet serving CA (docs/operations.md, Add-ons)
        args: [--kubelet-insecure-tls]" ;;
  *) echo "addons-up: unknown add-on $a (local-path-provisioner, metrics-server)" >&2; exit 2 ;;
  esac
done
grep -v '^  artifacts: ' "$inv" | awk -v block="$block" '{print} /^  kubernetesVersion: /{print block}' >"$inv.tmp"
mv "$inv.tmp" "$inv"
"${CLUSTERCTL:-bin/clusterctl}" artifacts pull -i "$inv" --dir "$lab/artifacts" "$@"
