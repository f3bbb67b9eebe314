#!/usr/bin/env bash
# build-addons.sh — build the third-party add-ons the lab proves cluster.addons with, from the Go module
# proxy and Debian's packages, and cache them per version outside the repository:
#
#   - local-path-provisioner (module github.com/rancher/local-path-provisioner): its program, its chart
#     (deploy/chart/local-path-provisioner), and busybox (Debian's busybox-static) for its helper Pods;
#   - metrics-server (module sigs.k8s.io/metrics-server): its program and its chart (charts/metrics-server);
#   - flannel's chart (chart/kube-flannel in the flannel module), for a pod network installed as an add-on,
#     and the two images it runs, under the lab's names (clusterctl.local/lab/...; the test sets them as
#     the chart's values): flanneld (build-network.sh's) with install-conf (cmd/install_conf in the
#     flannel module) and the node's iptables; and flannel's CNI plugin with busybox's cp. The module proxy
#     does not serve flannel-io/cni-plugin, so the plugin is the one it grew from, plugins/meta/flannel of
#     github.com/containernetworking/plugins v0.9.1 (the last release that has it; it speaks CNI up to
#     0.4.0, so the test sets the chart's cniConf to that version).
#
#   test/lab/build-addons.sh     (prints the directory: an artifacts directory of charts and images)
#
# Each program is built in a module of its own that requires only it (the versions of its dependencies
# are its own go.mod's, as upstream builds it). The charts are packaged unmodified.
set -euo pipefail
exec 9>&-
LPP=v0.0.30 MS=v0.8.0 FLANNEL_CNI=v0.9.1
CACHE=${CLUSTERCTL_LAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/clusterctl-lab}
export PATH=$PATH:/usr/local/go/bin
ARCH=$(go env GOARCH)
HERE=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$HERE/../.." && pwd)
# flannel's and kube-network-policies' versions are the lab's Kubernetes artifacts' (labartifacts -versions)
eval "$(cd "$repo" && go run ./test/lab/cmd/labartifacts -versions "${K8S_VERSION:-v1.37.2}" | grep -E '^(FLANNEL|NETPOL)_VERSION=')"
FLANNEL=$FLANNEL_VERSION
OUT=$CACHE/addons/lpp-${LPP}_ms-${MS}_flannel-${FLANNEL}_cni-$FLANNEL_CNI
if [ -f "$OUT/manifest.json" ]; then echo "$OUT"; exit 0; fi
"$HERE/rootfs.sh" node >&2
eval "$("$HERE/rootfs.sh" paths)"
network=$("$HERE/build-network.sh" "$FLANNEL" "$NETPOL_VERSION")
export GOFLAGS=-mod=mod GOTOOLCHAIN=local GOOS=linux GOARCH=$ARCH CGO_ENABLED=0
work=$(mktemp -d "${TMPDIR:-/tmp}/clusterctl-addons-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
start=$(date +%s)
echo "build-addons: local-path-provisioner $LPP, metrics-server $MS, flannel's chart $FLANNEL and CNI plugin $FLANNEL_CNI (~7 min the first time)" >&2

# build MODULE VERSION PACKAGE OUTPUT [LDFLAGS]: one program in a module of its own
build() {
  local dir=$work/$(basename "$4")
  mkdir -p "$dir" && cd "$dir"
  printf 'module clusterctl.local/build\n\ngo 1.26\n\nrequire %s %s\n' "$1" "$2" >go.mod
  printf 'package build\n\nimport _ "%s"\n' "$3" >tools.go
  go mod tidy >/dev/null 2>&1
  go build -trimpath -ldflags "-s -w ${5:-}" -o "$4" "$3"
}
moddir() { (cd "$work" && go mod download -json "$1@$2" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'); }

mkdir -p "$work/bin"
build github.com/rancher/local-path-provisioner $LPP github.com/rancher/local-path-provisioner "$work/bin/local-path-provisioner" \
  "-X main.VERSION=$LPP"
build sigs.k8s.io/metrics-server $MS sigs.k8s.io/metrics-server/cmd/metrics-server "$work/bin/metrics-server" \
  "-X k8s.io/client-go/pkg/version.gitVersion=$MS -X k8s.io/component-base/version.gitVersion=$MS"
build github.com/flannel-io/flannel $FLANNEL github.com/flannel-io/flannel/cmd/install_conf "$work/bin/install-conf"
build github.com/containernetworking/plugins $FLANNEL_CNI github.com/containernetworking/plugins/plugins/meta/flannel "$work/bin/flannel"
lpp=$(moddir github.com/rancher/local-path-provisioner $LPP)
ms=$(moddir sigs.k8s.io/metrics-server $MS)
fl=$(moddir github.com/flannel-io/flannel $FLANNEL)
mkdir -p "$work/charts"
cp -r "$lpp/deploy/chart/local-path-provisioner" "$ms/charts/metrics-server" "$fl/chart/kube-flannel" "$work/charts/"
chmod -R u+w "$work/charts"

# busybox for local-path-provisioner's helper Pods (the chart's helperImage, busybox:latest)
mkdir -p "$work/deb" && cd "$work/deb"
apt-get download busybox-static >/dev/null
dpkg-deb -x busybox-static_*.deb root
[ -x root/bin/busybox ] || { echo "build-addons: no /bin/busybox in Debian's busybox-static" >&2; exit 1; }

cd "$repo"
rm -rf "$OUT.tmp" && mkdir -p "$OUT.tmp" "$work/merged"
GOFLAGS= go build -o "$work/labaddons" ./test/lab/cmd/labaddons
# flanneld's image takes iptables from the node root filesystem: base+node mounted in a private namespace
unshare --mount --propagation private bash -euc 'merged=$1 lower=$2; shift 2
  mount -t overlay overlay -o "lowerdir=$lower" "$merged"
  "$@" -rootfs "$merged"' _ "$work/merged" "$NODE:$BASE" \
  "$work/labaddons" -out "$OUT.tmp" -busybox "$work/deb/root/bin/busybox" \
  -chart "$work/charts/local-path-provisioner" -chart "$work/charts/metrics-server" -chart "$work/charts/kube-flannel" \
  -image "docker.io/rancher/local-path-provisioner:$LPP=$work/bin/local-path-provisioner:/usr/bin/local-path-provisioner" \
  -image "registry.k8s.io/metrics-server/metrics-server:$MS=$work/bin/metrics-server:/metrics-server" \
  -flannel-image "clusterctl.local/lab/flannel:$FLANNEL" -flanneld "$network/flanneld" -install-conf "$work/bin/install-conf" \
  -cni-plugin-image "clusterctl.local/lab/flannel-cni-plugin:$FLANNEL_CNI=$work/bin/flannel"
rm -rf "$OUT" && mv "$OUT.tmp" "$OUT"
echo "build-addons: done in $(( $(date +%s) - start )) s" >&2
echo "$OUT"
