#!/usr/bin/env bash
# build-addons.sh — build the third-party add-ons the lab proves cluster.addons with, from the Go module
# proxy and Debian's packages, and cache them per version outside the repository:
#
#   - local-path-provisioner (module github.com/rancher/local-path-provisioner): its program, its chart
#     (deploy/chart/local-path-provisioner), and busybox (Debian's busybox-static) for its helper Pods;
#   - metrics-server (module sigs.k8s.io/metrics-server): its program and its chart (charts/metrics-server);
#   - flannel's chart (chart/kube-flannel in the flannel module), for a pod network installed as an add-on.
#
#   test/lab/build-addons.sh     (prints the directory: an artifacts directory of charts and images)
#
# Each program is built in a module of its own that requires only it (the versions of its dependencies
# are its own go.mod's, as upstream builds it). The charts are packaged unmodified.
set -euo pipefail
exec 9>&-
LPP=v0.0.30 MS=v0.8.0 FLANNEL=v0.28.10
CACHE=${CLUSTERCTL_LAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/clusterctl-lab}
export PATH=$PATH:/usr/local/go/bin
ARCH=$(go env GOARCH)
OUT=$CACHE/addons/lpp-${LPP}_ms-${MS}_flannel-$FLANNEL
if [ -f "$OUT/manifest.json" ]; then echo "$OUT"; exit 0; fi
repo=$(cd "$(dirname "$0")/../.." && pwd)
export GOFLAGS=-mod=mod GOTOOLCHAIN=local GOOS=linux GOARCH=$ARCH CGO_ENABLED=0
work=$(mktemp -d "${TMPDIR:-/tmp}/clusterctl-addons-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
start=$(date +%s)
echo "build-addons: local-path-provisioner $LPP, metrics-server $MS, flannel's chart $FLANNEL (~6 min the first time)" >&2

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
rm -rf "$OUT.tmp" && mkdir -p "$OUT.tmp"
GOFLAGS= go run ./test/lab/cmd/labaddons -out "$OUT.tmp" -busybox "$work/deb/root/bin/busybox" \
  -chart "$work/charts/local-path-provisioner" -chart "$work/charts/metrics-server" -chart "$work/charts/kube-flannel" \
  -image "docker.io/rancher/local-path-provisioner:$LPP=$work/bin/local-path-provisioner:/usr/bin/local-path-provisioner" \
  -image "registry.k8s.io/metrics-server/metrics-server:$MS=$work/bin/metrics-server:/metrics-server"
rm -rf "$OUT" && mv "$OUT.tmp" "$OUT"
echo "build-addons: done in $(( $(date +%s) - start )) s" >&2
echo "$OUT"
