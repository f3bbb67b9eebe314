#!/usr/bin/env bash
# build-network.sh — build the pod network's programs the lab's artifacts carry as images (flanneld, and
# kube-network-policies' netpol) from the Go module proxy, and cache them per version outside the repository.
#
#   test/lab/build-network.sh FLANNEL_VERSION NETPOL_VERSION    (with the v: v0.28.10 v0.8.0)
#
# Output (printed on stdout): $CACHE/network/flannel-<V>_netpol-<V>/linux-<arch>/ holding flanneld and netpol.
#
# flannel's main package imports every backend, the Tencent Cloud one among them, whose SDK module
# (github.com/tencentcloud/tencentcloud-sdk-go/tencentcloud/vpc) the proxy does not serve: the lab builds
# flannel's own main.go, copied from the module at build time, without that one import (the VXLAN backend
# clusterctl uses is untouched). The UDP backend needs cgo: flanneld is linked statically, as upstream's.
#
# kube-network-policies queues the packets it decides on with nftables' queue expression, which needs the
# kernel's nft_queue (CONFIG_NFT_QUEUE; a module in Debian's, Ubuntu's and RHEL's kernels). This machine's
# kernel is built without it, but with NFQUEUE for xtables and nft_compat: the lab's netpol has its three
# queue expressions replaced, at build time, by the xtables NFQUEUE target (revision 3: the same queue
# number, the bypass flag where upstream sets it) through nft_compat. The rest is upstream's code.
set -euo pipefail
exec 9>&-
[ $# -eq 2 ] || { echo "usage: $0 FLANNEL_VERSION NETPOL_VERSION" >&2; exit 2; }
FLANNEL=$1 NETPOL=$2
for v in "$@"; do [[ $v =~ ^v[0-9]+\.[0-9]+\.[0-9]+$ ]] || { echo "build-network: version $v: want vX.Y.Z" >&2; exit 2; }; done
CACHE=${CLUSTERCTL_LAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/clusterctl-lab}
export PATH=$PATH:/usr/local/go/bin
ARCH=$(go env GOARCH)
OUT=$CACHE/network/flannel-${FLANNEL}_netpol-$NETPOL/linux-$ARCH
if [ -x "$OUT/flanneld" ] && [ -x "$OUT/netpol" ]; then echo "$OUT"; exit 0; fi

export GOFLAGS=-mod=mod GOTOOLCHAIN=local GOOS=linux GOARCH=$ARCH
work=$(mktemp -d "${TMPDIR:-/tmp}/clusterctl-network-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
start=$(date +%s)
echo "build-network: flannel $FLANNEL, kube-network-policies $NETPOL (~4 min the first time)" >&2
mkdir -p "$work/flannel" "$work/netpol" "$OUT.tmp"
cd "$work/flannel"
printf 'module clusterctl.local/flannelbuild\n\ngo 1.26\n\nrequire github.com/flannel-io/flannel %s\n' "$FLANNEL" >go.mod
src=$(go mod download -json "github.com/flannel-io/flannel@$FLANNEL" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -f "$src/main.go" ] || { echo "build-network: no main.go in $src" >&2; exit 1; }
grep -v '"github.com/flannel-io/flannel/pkg/backend/tencentvpc"' "$src/main.go" >main.go
go mod tidy >/dev/null 2>&1 || true
CGO_ENABLED=1 go build -trimpath -tags netgo,osusergo \
  -ldflags "-s -w -X github.com/flannel-io/flannel/pkg/version.Version=$FLANNEL -extldflags -static" -o "$OUT.tmp/flanneld" .
"$OUT.tmp/flanneld" --version >&2

cd "$work/netpol"
printf 'module clusterctl.local/netpolbuild\n\ngo 1.26\n\nrequire sigs.k8s.io/kube-network-policies %s\n' "$NETPOL" >go.mod
src=$(go mod download -json "sigs.k8s.io/kube-network-policies@$NETPOL" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -f "$src/go.mod" ] || { echo "build-network: no go.mod in $src" >&2; exit 1; }
cp -r "$src" knp && chmod -R u+w knp
pkg=knp/pkg/networkpolicy
perl -0pi -e 's/queue := &expr\.Queue\{Num: uint16\(c\.config\.QueueID\)\}\n\tif c\.config\.FailOpen \{\n\t\tqueue\.Flag = expr\.QueueFlagBypass\n\t\}/queue := labQueue(uint16(c.config.QueueID), c.config.FailOpen)/g' "$pkg/controller.go"
perl -pi -e 's/&expr\.Queue\{Num: uint16\(n\.nfQueueID\), Flag: expr\.QueueFlagBypass\}/labQueue(uint16(n.nfQueueID), true)/' "$pkg/dnsagent.go"
if grep -q 'expr\.Queue{' "$pkg"/*.go; then echo "build-network: kube-network-policies $NETPOL: a queue expression the lab's patch does not know" >&2; exit 1; fi
cat >"$pkg/lab_queue.go" <<'EOG'
package networkpolicy

import (
	"encoding/binary"

	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"
)

// labQueue is the clusterctl lab's stand-in for nftables' queue expression on a kernel without nft_queue:
// the xtables NFQUEUE target, revision 3 (struct xt_NFQ_info_v3: queue number, one queue, flags), through
// nft_compat.
func labQueue(num uint16, bypass bool) expr.Any {
	info := make([]byte, 6)
	binary.NativeEndian.PutUint16(info[0:], num)
	binary.NativeEndian.PutUint16(info[2:], 1)
	if bypass {
		binary.NativeEndian.PutUint16(info[4:], 1) // NFQ_FLAG_BYPASS
	}
	u := xt.Unknown(info)
	return &expr.Target{Name: "NFQUEUE", Rev: 3, Info: &u}
}
EOG
printf 'replace sigs.k8s.io/kube-network-policies => ./knp\n' >>go.mod
printf 'package netpolbuild\n\nimport _ "sigs.k8s.io/kube-network-policies/cmd"\n' >tools.go
go mod tidy >/dev/null 2>&1 || true
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$OUT.tmp/netpol" sigs.k8s.io/kube-network-policies/cmd
"$OUT.tmp/netpol" --help 2>&1 | grep -q nfqueue-id || { echo "build-network: netpol does not run" >&2; exit 1; }
rm -rf "$OUT" && mv "$OUT.tmp" "$OUT"
echo "build-network: done in $(( $(date +%s) - start )) s" >&2
echo "$OUT"
