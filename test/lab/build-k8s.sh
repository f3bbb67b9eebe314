#!/usr/bin/env bash
# build-k8s.sh — build the Kubernetes binaries of one version from the Go module proxy, offline from any
# release server, and cache them per version outside the repository.
#
#   test/lab/build-k8s.sh [VERSION]        (default: $K8S_VERSION, else the lab's pinned version)
#
# Output: $CACHE/<version>/bin/linux-<arch>/{kube-apiserver,kube-controller-manager,kube-scheduler,
# kubelet,kube-proxy,kubectl,etcd,etcdctl,coredns} and $CACHE/<version>/bin/versions.env. A version whose
# binaries are all present is not rebuilt. $CACHE is $CLUSTERCTL_LAB_CACHE, else ~/.cache/clusterctl-lab.
#
# `go install k8s.io/kubernetes/cmd/...@v` does not work (the module has replace directives), so a wrapper
# module requires k8s.io/kubernetes and replaces every k8s.io staging module with its published v0.Y.Z.
# etcd is built at the version k8s.io/kubernetes requires; CoreDNS at the version kubeadm deploys.
set -euo pipefail
exec 9>&-

VERSION=${1:-${K8S_VERSION:-v1.34.4}}
CACHE=${CLUSTERCTL_LAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/clusterctl-lab}
ARCH=$(go env GOARCH)
OUT=$CACHE/$VERSION/bin/linux-$ARCH
export PATH=$PATH:/usr/local/go/bin
export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0 GOOS=linux GOARCH=$ARCH

case $VERSION in v1.*.*) ;; *) echo "build-k8s: version must look like v1.34.4, got $VERSION" >&2; exit 2 ;; esac
minor=${VERSION#v1.}; minor=${minor%%.*}
patch=${VERSION##*.}
staging=v0.$minor.$patch

# CoreDNS version kubeadm deploys with each minor (cmd/kubeadm/app/constants).
case $minor in
  33) COREDNS=v1.12.0 ;;
  34|35) COREDNS=v1.12.1 ;;
  *) COREDNS=v1.12.4 ;;
esac

components=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
want=("${components[@]}" etcd etcdctl coredns)
missing=()
for b in "${want[@]}"; do [ -x "$OUT/$b" ] || missing+=("$b"); done
if [ ${#missing[@]} -eq 0 ] && [ -f "$OUT/../versions.env" ]; then
  echo "build-k8s: $VERSION binaries cached in $OUT"
  exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/clusterctl-k8s-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$OUT"
start=$(date +%s)

# The upstream go.mod tells which staging modules to replace and which etcd to build.
upmod=$(go mod download -json "k8s.io/kubernetes@$VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
[ -f "$upmod" ] || { echo "build-k8s: cannot download k8s.io/kubernetes@$VERSION" >&2; exit 1; }
ETCD=$(awk '$1=="go.etcd.io/etcd/server/v3"{print $2; exit}' "$upmod")
gover=$(awk '$1=="go"{print $2; exit}' "$upmod")

mkdir -p "$work/k8s" "$work/etcd" "$work/coredns"
{
  echo "module clusterctl.local/labbuild"
  echo "go $gover"
  echo "require k8s.io/kubernetes $VERSION"
  echo "replace ("
  grep -E '^\s*k8s\.io/[a-z0-9-]+ => \./staging/' "$upmod" | awk -v v="$staging" '{print "\t" $1 " => " $1 " " v}'
  echo ")"
} >"$work/k8s/go.mod"
echo 'package labbuild' >"$work/k8s/doc.go"

build_date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$build_date"
done

need() { for b in "$@"; do [[ " ${missing[*]} " == *" $b "* ]] && return 0; done; return 1; }

if need "${components[@]}"; then
  echo "build-k8s: building Kubernetes $VERSION (${components[*]}); ~20 min on 2 cores the first time"
  pkgs=()
  for c in "${components[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
  (cd "$work/k8s" && go mod download k8s.io/kubernetes && go build -trimpath -ldflags "$ldflags" -o "$OUT/" "${pkgs[@]}")
fi

if need etcd etcdctl; then
  echo "build-k8s: building etcd $ETCD"
  printf 'module clusterctl.local/etcdbuild\ngo %s\nrequire (\n\tgo.etcd.io/etcd/server/v3 %s\n\tgo.etcd.io/etcd/etcdctl/v3 %s\n)\n' \
    "$gover" "$ETCD" "$ETCD" >"$work/etcd/go.mod"
  echo 'package etcdbuild' >"$work/etcd/doc.go"
  (cd "$work/etcd" && go build -trimpath -ldflags "-s -w" -o "$OUT/etcd" go.etcd.io/etcd/server/v3 \
    && go build -trimpath -ldflags "-s -w" -o "$OUT/etcdctl" go.etcd.io/etcd/etcdctl/v3)
fi

if need coredns; then
  echo "build-k8s: building CoreDNS $COREDNS"
  printf 'module clusterctl.local/corednsbuild\ngo 1.23.0\nrequire github.com/coredns/coredns %s\n' "$COREDNS" >"$work/coredns/go.mod"
  echo 'package corednsbuild' >"$work/coredns/doc.go"
  (cd "$work/coredns" && go build -trimpath -ldflags "-s -w" -o "$OUT/coredns" github.com/coredns/coredns)
fi

cat >"$OUT/../versions.env" <<EOV
KUBERNETES_VERSION=$VERSION
ETCD_VERSION=$ETCD
COREDNS_VERSION=$COREDNS
EOV
echo "build-k8s: $VERSION done in $(( $(date +%s) - start ))s: $OUT"
