#!/usr/bin/env bash
# artifacts.sh — make (once per version) the lab's Kubernetes artifacts directory: binaries built from the Go
# module proxy (build-k8s.sh), the runtime (build-runtime.sh; runc from Debian), image archives packed from
# them (labartifacts), a manifest with SHA-256 sums. It is the layout `clusterctl artifacts pull` makes and
# `clusterctl up` takes; the lab's mirror (labmirror) serves it in the upstream download layouts.
#
#   test/lab/artifacts.sh [VERSION]      prints the directory on stdout
set -euo pipefail
exec 9>&-
VERSION=${1:-${K8S_VERSION:-v1.37.2}}
CACHE=${CLUSTERCTL_LAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/clusterctl-lab}
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
DIR=$CACHE/$VERSION
export PATH=$PATH:/usr/local/go/bin

"$HERE/build-k8s.sh" "$VERSION" >&2
"$HERE/rootfs.sh" node >&2
eval "$("$HERE/rootfs.sh" paths)"

tools=$(mktemp -d "${TMPDIR:-/tmp}/clusterctl-artifacts.XXXXXX")
trap 'rm -rf "$tools"' EXIT
(cd "$REPO" && CGO_ENABLED=0 go build -trimpath -o "$tools/" ./test/lab/cmd/labartifacts ./test/lab/cmd/pause)
eval "$("$tools/labartifacts" -versions "$VERSION")"
# crictl: the module proxy serves cri-tools v1.34.0 in full but not every later release (v1.35.0, v1.37.0
# are refused); crictl speaks CRI v1 to any containerd 2, so the lab builds that one for every version (the
# manifest and the mirror still name the version pull pairs).
LAB_CRICTL_VERSION=1.34.0
RUNTIME=$("$HERE/build-runtime.sh" "$CONTAINERD_VERSION" "$CNI_PLUGINS_VERSION" "$LAB_CRICTL_VERSION")
NETWORK=$("$HERE/build-network.sh" "$FLANNEL_VERSION" "$NETPOL_VERSION")

# Up to date when the manifest verifies, names the versions built and is newer than the node layer its
# images take files from.
if [ -f "$DIR/manifest.json" ] && "$tools/labartifacts" -dir "$DIR" -verify >&2 \
   && grep -q "\"kubernetesVersion\": \"$VERSION\"" "$DIR/manifest.json" \
   && grep -q "\"containerdVersion\": \"$CONTAINERD_VERSION\"" "$DIR/manifest.json" \
   && grep -q '"name": "apiserver-proxy"' "$DIR/manifest.json" \
   && grep -q '"format": "oci"' "$DIR/manifest.json" \
   && grep -q "\"image\": \"ghcr.io/flannel-io/flannel:$FLANNEL_VERSION\"" "$DIR/manifest.json" \
   && grep -q "\"image\": \"registry.k8s.io/networking/kube-network-policies:$NETPOL_VERSION\"" "$DIR/manifest.json" \
   && [ "$DIR/manifest.json" -nt "$DIR/bin/versions.env" ] && [ "$DIR/manifest.json" -nt "$NODE" ]; then
  echo "$DIR"
  exit 0
fi

# kube-proxy's and flanneld's images take iptables, the proxy's haproxy, and runc from the node root
# filesystem: mount base+node in a private namespace.
unshare --mount --propagation private bash -euc '
  merged=$1 lower=$2 tool=$3 dir=$4 pause=$5 runtime=$6 network=$7
  mount -t overlay overlay -o "lowerdir=$lower" "$merged"
  "$tool" -dir "$dir" -pause "$pause" -rootfs "$merged" -runtime "$runtime" -network "$network"
' _ "$tools/merged" "$NODE:$BASE" "$tools/labartifacts" "$DIR" "$tools/pause" "$RUNTIME" "$NETWORK" >&2 < <(mkdir -p "$tools/merged")
"$tools/labartifacts" -dir "$DIR" -verify >&2
echo "$DIR"
