#!/usr/bin/env bash
# build-network.sh — build the pod network's programs the lab's artifacts carry as images (flanneld) from
# the Go module proxy, and cache them per version outside the repository.
#
#   test/lab/build-network.sh FLANNEL_VERSION    (with the v: v0.28.10)
#
# Output (printed on stdout): $CACHE/network/flannel-<V>/linux-<arch>/ holding flanneld.
#
# flannel's main package imports every backend, the Tencent Cloud one among them, whose SDK module
# (github.com/tencentcloud/tencentcloud-sdk-go/tencentcloud/vpc) the proxy does not serve: the lab builds
# flannel's own main.go, copied from the module at build time, without that one import (the VXLAN backend
# clusterctl uses is untouched). The UDP backend needs cgo: flanneld is linked statically, as upstream's.
set -euo pipefail
exec 9>&-
[ $# -eq 1 ] || { echo "usage: $0 FLANNEL_VERSION" >&2; exit 2; }
FLANNEL=$1
[[ $FLANNEL =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "build-network: version $FLANNEL: want vX.Y.Z" >&2; exit 2; }
CACHE=${CLUSTERCTL_LAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/clusterctl-lab}
export PATH=$PATH:/usr/local/go/bin
ARCH=$(go env GOARCH)
OUT=$CACHE/network/flannel-$FLANNEL/linux-$ARCH
if [ -x "$OUT/flanneld" ]; then echo "$OUT"; exit 0; fi

export GOFLAGS=-mod=mod GOTOOLCHAIN=local GOOS=linux GOARCH=$ARCH
work=$(mktemp -d "${TMPDIR:-/tmp}/clusterctl-network-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
start=$(date +%s)
echo "build-network: flannel $FLANNEL (~2 min the first time)" >&2
printf 'module clusterctl.local/flannelbuild\n\ngo 1.26\n\nrequire github.com/flannel-io/flannel %s\n' "$FLANNEL" >"$work/go.mod"
src=$(cd "$work" && go mod download -json "github.com/flannel-io/flannel@$FLANNEL" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -f "$src/main.go" ] || { echo "build-network: no main.go in $src" >&2; exit 1; }
grep -v '"github.com/flannel-io/flannel/pkg/backend/tencentvpc"' "$src/main.go" >"$work/main.go"
(cd "$work" && go mod tidy >/dev/null 2>&1 || true)
mkdir -p "$OUT.tmp"
(cd "$work" && CGO_ENABLED=1 go build -trimpath -tags netgo,osusergo \
  -ldflags "-s -w -X github.com/flannel-io/flannel/pkg/version.Version=$FLANNEL -extldflags -static" -o "$OUT.tmp/flanneld" .)
"$OUT.tmp/flanneld" --version >&2
rm -rf "$OUT" && mv "$OUT.tmp" "$OUT"
echo "build-network: done in $(( $(date +%s) - start )) s" >&2
echo "$OUT"
