#!/usr/bin/env bash
# build-k8s.sh — build the Kubernetes binaries of one version from the Go module proxy, offline from any
# release server, and cache them per version outside the repository.
#
#   test/lab/build-k8s.sh [VERSION]                (default: $K8S_VERSION, else the lab's pinned version)
#   test/lab/build-k8s.sh --conformance [VERSION]  the conformance suite's programs instead (below)
#   test/lab/build-k8s.sh --kubeadm [VERSION]      kubeadm alone (the accepted versions the lab runs no
#                                                  cluster of: tests check kubeadm decodes what clusterctl writes)
#
# Output: $CACHE/<version>/bin/linux-<arch>/{kube-apiserver,kube-controller-manager,kube-scheduler,
# kubelet,kube-proxy,kubectl,etcd,etcdctl,etcdutl,coredns} and $CACHE/<version>/bin/versions.env (the versions built), and
# $CACHE/<version>/tools/linux-<arch>/kubeadm (outside bin/: not an artifact clusterctl delivers; the tests that
# show kubeadm operating a clusterctl cluster copy it onto hosts). A version whose binaries are all present is
# not rebuilt. $CACHE is $CLUSTERCTL_LAB_CACHE, else ~/.cache/clusterctl-lab.
# With --conformance: $CACHE/<version>/conformance/bin/linux-<arch>/{e2e.test,ginkgo} (Kubernetes' end-to-end
# suite and its parallel runner) and the Go programs of the images its [Conformance] tests run (agnhost,
# sample-apiserver, nnp), from the same module; test/lab/conformance-images.sh packs the images.
#
# `go install k8s.io/kubernetes/cmd/...@v` does not work (the module has replace directives), so a wrapper
# module requires k8s.io/kubernetes and replaces every k8s.io staging module with its published v0.Y.Z.
# etcd, CoreDNS and the pause image are at the versions kubeadm deploys with that Kubernetes version.
set -euo pipefail
exec 9>&-

CONFORMANCE= KUBEADM_ONLY=
case ${1:-} in
  --conformance) CONFORMANCE=1; shift ;;
  --kubeadm) KUBEADM_ONLY=1; shift ;;
esac
VERSION=${1:-${K8S_VERSION:-v1.37.2}}
CACHE=${CLUSTERCTL_LAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/clusterctl-lab}
ARCH=$(go env GOARCH)
OUT=$CACHE/$VERSION/bin/linux-$ARCH
TOOLS=$CACHE/$VERSION/tools/linux-$ARCH
export PATH=$PATH:/usr/local/go/bin
export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0 GOOS=linux GOARCH=$ARCH

case $VERSION in v1.*.*) ;; *) echo "build-k8s: version must look like v1.37.2, got $VERSION" >&2; exit 2 ;; esac
minor=${VERSION#v1.}; minor=${minor%%.*}
patch=${VERSION##*.}
staging=v0.$minor.$patch

# The upstream module tells which staging modules to replace, and kubeadm's constants which etcd, CoreDNS
# and pause versions go with this Kubernetes version.
upjson=$(go mod download -json "k8s.io/kubernetes@$VERSION") || { echo "build-k8s: cannot download k8s.io/kubernetes@$VERSION" >&2; exit 1; }
upmod=$(sed -n 's/.*"GoMod": "\(.*\)".*/\1/p' <<<"$upjson")
updir=$(sed -n 's/.*"Dir": "\(.*\)".*/\1/p' <<<"$upjson")
consts=$updir/cmd/kubeadm/app/constants/constants.go
ETCD=v$(sed -n 's/^[[:space:]]*DefaultEtcdVersion = "\([0-9.]*\)-[0-9]*"/\1/p' "$consts")
COREDNS=$(sed -n 's/^[[:space:]]*CoreDNSVersion = "\(v[0-9.]*\)"/\1/p' "$consts")
PAUSE=$(sed -n 's/^[[:space:]]*PauseVersion = "\([0-9.]*\)"/\1/p' "$consts")
gover=$(awk '$1=="go"{print $2; exit}' "$upmod")
[ "$ETCD" != v ] && [ -n "$COREDNS" ] && [ -n "$PAUSE" ] || { echo "build-k8s: cannot read versions from $consts" >&2; exit 1; }

if [ -n "$KUBEADM_ONLY" ]; then
  missing=()
  [ -x "$TOOLS/kubeadm" ] || missing+=(kubeadm)
  if [ ${#missing[@]} -eq 0 ]; then echo "build-k8s: kubeadm $VERSION cached in $TOOLS"; exit 0; fi
elif [ -n "$CONFORMANCE" ]; then
  OUT=$CACHE/$VERSION/conformance/bin/linux-$ARCH
  want=(e2e.test ginkgo agnhost sample-apiserver nnp)
  missing=()
  for b in "${want[@]}"; do [ -x "$OUT/$b" ] || missing+=("$b"); done
  if [ ${#missing[@]} -eq 0 ]; then echo "build-k8s: $VERSION conformance programs cached in $OUT"; exit 0; fi
else
components=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
want=("${components[@]}" etcd etcdctl etcdutl coredns)
missing=()
for b in "${want[@]}"; do [ -x "$OUT/$b" ] || missing+=("$b"); done
# A binary built at another version than kubeadm's choice is rebuilt.
built() { grep -qx "$1=$2" "$OUT/../versions.env" 2>/dev/null; }
built ETCD_VERSION "$ETCD" || missing+=(etcd etcdctl etcdutl)
built COREDNS_VERSION "$COREDNS" || missing+=(coredns)
[ -x "$TOOLS/kubeadm" ] || missing+=(kubeadm)
if [ ${#missing[@]} -eq 0 ] && built PAUSE_VERSION "$PAUSE"; then
  echo "build-k8s: $VERSION binaries cached in $OUT"
  exit 0
fi
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/clusterctl-k8s-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$TOOLS"
[ -n "$KUBEADM_ONLY" ] || mkdir -p "$OUT"
start=$(date +%s)


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

build_kubeadm() {
  (cd "$work/k8s" && go mod download k8s.io/kubernetes && go build -trimpath -ldflags "$ldflags" -o "$TOOLS/" k8s.io/kubernetes/cmd/kubeadm)
}

need() { for b in "$@"; do [[ " ${missing[*]} " == *" $b "* ]] && return 0; done; return 1; }

if [ -n "$KUBEADM_ONLY" ]; then
  echo "build-k8s: building kubeadm $VERSION alone"
  build_kubeadm
  echo "build-k8s: kubeadm $VERSION done in $(( $(date +%s) - start ))s: $TOOLS"
  exit 0
fi

if [ -n "$CONFORMANCE" ]; then
  echo "build-k8s: building the conformance suite of Kubernetes $VERSION (e2e.test, ginkgo, agnhost, sample-apiserver, nnp); ~15 min on 2 cores the first time"
  (cd "$work/k8s" && go mod download k8s.io/kubernetes \
    && go test -c -trimpath -ldflags "$ldflags" -o "$OUT/e2e.test" k8s.io/kubernetes/test/e2e \
    && go build -trimpath -ldflags "-s -w" -o "$OUT/" github.com/onsi/ginkgo/v2/ginkgo \
      k8s.io/kubernetes/test/images/agnhost k8s.io/sample-apiserver k8s.io/kubernetes/test/images/nonewprivs)
  mv "$OUT/nonewprivs" "$OUT/nnp"
  echo "build-k8s: $VERSION conformance programs done in $(( $(date +%s) - start ))s: $OUT"
  exit 0
fi

if need "${components[@]}"; then
  echo "build-k8s: building Kubernetes $VERSION (${components[*]}); ~20 min on 2 cores the first time"
  pkgs=()
  for c in "${components[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
  (cd "$work/k8s" && go mod download k8s.io/kubernetes && go build -trimpath -ldflags "$ldflags" -o "$OUT/" "${pkgs[@]}")
fi
if need kubeadm; then
  echo "build-k8s: building kubeadm $VERSION"
  build_kubeadm
fi

if need etcd etcdctl etcdutl; then
  echo "build-k8s: building etcd $ETCD"
  printf 'module clusterctl.local/etcdbuild\ngo %s\nrequire (\n\tgo.etcd.io/etcd/server/v3 %s\n\tgo.etcd.io/etcd/etcdctl/v3 %s\n\tgo.etcd.io/etcd/etcdutl/v3 %s\n)\n' \
    "$gover" "$ETCD" "$ETCD" "$ETCD" >"$work/etcd/go.mod"
  echo 'package etcdbuild' >"$work/etcd/doc.go"
  (cd "$work/etcd" && go build -trimpath -ldflags "-s -w" -o "$OUT/etcd" go.etcd.io/etcd/server/v3 \
    && go build -trimpath -ldflags "-s -w" -o "$OUT/etcdctl" go.etcd.io/etcd/etcdctl/v3 \
    && go build -trimpath -ldflags "-s -w" -o "$OUT/etcdutl" go.etcd.io/etcd/etcdutl/v3)
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
PAUSE_VERSION=$PAUSE
EOV
echo "build-k8s: $VERSION done in $(( $(date +%s) - start ))s: $OUT"
