#!/usr/bin/env bash
# addons-up.sh — under labmirror -addons (which appends the mirror's flags): add the named add-ons to the
# lab's inventory, their charts from the mirror's Helm repository (local-path-provisioner) and OCI
# registry (metrics-server, flannel), and pull everything the inventory needs into the lab's directory.
# flannel is the pod network (cni.plugin none), from flannel's own chart with the lab's images of it.
#
#   labmirror -artifacts DIR -addons DIR -- test/lab/addons-up.sh LAB_DIR "flannel local-path-provisioner metrics-server"
set -euo pipefail
exec 9>&-
[ $# -ge 2 ] || { echo "usage: $0 LAB_DIR ADDONS [MIRROR FLAGS...]" >&2; exit 2; }
lab=$1 addons=$2
shift 2
: "${CLUSTERCTL_LAB_CHARTS:?run under labmirror -addons}" "${CLUSTERCTL_LAB_CHARTS_OCI:?run under labmirror -addons}"
inv=$lab/cluster.yaml
block="  artifacts: $lab/artifacts"
case " $addons " in *" flannel "*) block+="
  cni: {plugin: none}" ;; esac
block+="
  addons:"
for a in $addons; do
  case $a in
  flannel) block+="
    - name: flannel
      chart: flannel
      version: ${FLANNEL_VERSION:-v0.28.10}
      repository: $CLUSTERCTL_LAB_CHARTS_OCI
      namespace: kube-flannel
      podSecurity: privileged       # host network, NET_ADMIN, host paths
      network: true
      values:
        podCidr: 10.244.0.0/16
        flannel:
          # the lab's images of flanneld and of flannel's CNI plugin (test/lab/build-addons.sh)
          image: {repository: clusterctl.local/lab/flannel, tag: ${FLANNEL_VERSION:-v0.28.10}}
          flannel_cni: {image: {repository: clusterctl.local/lab/flannel-cni-plugin, tag: v0.9.1}}
          # the lab's hosts have no default route, by which flanneld finds its interface by default
          args: [--ip-masq, --kube-subnet-mgr, --iface=host0]
          # the lab's flannel CNI plugin speaks CNI up to 0.4.0
          cniConf: |
            {\"name\": \"cbr0\", \"cniVersion\": \"0.4.0\", \"plugins\": [
              {\"type\": \"flannel\", \"delegate\": {\"hairpinMode\": true, \"isDefaultGateway\": true}},
              {\"type\": \"portmap\", \"capabilities\": {\"portMappings\": true}}]}" ;;
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
  *) echo "addons-up: unknown add-on $a (flannel, local-path-provisioner, metrics-server)" >&2; exit 2 ;;
  esac
done
# flannel's chart replaces the inventory's pod network
case " $addons " in *" flannel "*) sed -i '/^  cni:$/,/^    plugin: /d' "$inv" ;; esac
grep -v '^  artifacts: ' "$inv" | awk -v block="$block" '{print} /^  kubernetesVersion: /{print block}' >"$inv.tmp"
mv "$inv.tmp" "$inv"
"${CLUSTERCTL:-bin/clusterctl}" artifacts pull -i "$inv" --dir "$lab/artifacts" "$@"
