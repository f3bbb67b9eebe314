#!/usr/bin/env bash
# conformance.sh — make (once per version) what the lab needs to run Kubernetes' [Conformance] tests offline:
# e2e.test and ginkgo built from the Go module proxy (build-k8s.sh --conformance), and the images the tests run,
# packed by labconformance from the Go programs built beside them, busybox built from source, and Debian's
# programs (rootfs.sh e2e).
#
#   test/lab/conformance.sh [VERSION]      prints the directory on stdout
#
# Output: $CACHE/<version>/conformance/{bin/linux-<arch>/{e2e.test,ginkgo,...},images/*.tar,images/images.txt}.
set -euo pipefail
exec 9>&-
VERSION=${1:-${K8S_VERSION:-v1.37.2}}
CACHE=${CLUSTERCTL_LAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/clusterctl-lab}
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
ARCH=$(go env GOARCH)
DIR=$CACHE/$VERSION/conformance
BIN=$DIR/bin/linux-$ARCH
export PATH=$PATH:/usr/local/go/bin

"$HERE/build-k8s.sh" "$VERSION" >&2
"$HERE/build-k8s.sh" --conformance "$VERSION" >&2
"$HERE/rootfs.sh" e2e >&2
eval "$("$HERE/rootfs.sh" paths)"

# busybox as upstream builds it (defconfig, static), from the pristine source Debian ships
# (`apt-get source` in the lab's Debian 13 root filesystem): Debian's own build drops environment
# variables whose names are not shell names and prefers its applets to programs on PATH, where upstream's
# busybox image, which the tests were written against, does neither.
BUSYBOX_VERSION=1.37.0
BUSYBOX=$CACHE/busybox-$BUSYBOX_VERSION/busybox
if [ ! -x "$BUSYBOX" ]; then
  RELEASE=trixie "$HERE/rootfs.sh" base >&2
  trixie=$(RELEASE=trixie "$HERE/rootfs.sh" paths | sed -n 's/^BASE=//p')
  bb=$(mktemp -d "${TMPDIR:-/tmp}/clusterctl-busybox.XXXXXX")
  mkdir -p "$bb/upper" "$bb/work" "$bb/merged"
  echo "conformance: building busybox $BUSYBOX_VERSION from source (~3 min once)" >&2
  unshare --mount --propagation private bash -euc '
    bb=$1 lower=$2
    mount -t overlay overlay -o "lowerdir=$lower,upperdir=$bb/upper,workdir=$bb/work" "$bb/merged"
    for d in proc sys dev; do mount --bind "/$d" "$bb/merged/$d"; done
    cp /etc/resolv.conf "$bb/merged/etc/resolv.conf"
    echo "deb-src http://deb.debian.org/debian trixie main" >"$bb/merged/etc/apt/sources.list.d/clusterctl-src.list"
    chroot "$bb/merged" sh -c "apt-get update -qq && cd /tmp && apt-get source --download-only busybox >/dev/null"
  ' _ "$bb" "$trixie" >&2
  tar -xjf "$bb/upper/tmp/busybox_$BUSYBOX_VERSION.orig.tar.bz2" -C "$bb"
  (cd "$bb/busybox-$BUSYBOX_VERSION" && make defconfig >/dev/null \
    && sed -i 's/^# CONFIG_STATIC is not set/CONFIG_STATIC=y/; s/^CONFIG_TC=y/# CONFIG_TC is not set/' .config \
    && make -j"$(nproc)" busybox >"$bb/build.log" 2>&1) || { tail -20 "$bb/build.log" >&2; exit 1; }
  mkdir -p "$(dirname "$BUSYBOX")"
  install -m 0755 "$bb/busybox-$BUSYBOX_VERSION/busybox" "$BUSYBOX.tmp" && mv "$BUSYBOX.tmp" "$BUSYBOX"
  rm -rf "$bb"
fi

# Up to date when every image listed was made from the programs now in BIN and this packer.
tools=$(mktemp -d "${TMPDIR:-/tmp}/clusterctl-conformance.XXXXXX")
trap 'rm -rf "$tools"' EXIT
(cd "$REPO" && CGO_ENABLED=0 go build -trimpath -o "$tools/" ./test/lab/cmd/labconformance)
stamp=$(cd "$BIN" && sha256sum * "$BUSYBOX" | sha256sum | cut -c1-16)-$(sha256sum "$tools/labconformance" | cut -c1-16)-$E2E
if [ -f "$DIR/images/images.txt" ] && [ "$(cat "$DIR/images/stamp" 2>/dev/null)" = "$stamp" ]; then
  echo "$DIR"
  exit 0
fi

"$BIN/e2e.test" --list-images >"$tools/list"
src=$(cd "$tools" && go mod download -json "k8s.io/kubernetes@$VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
rm -rf "$DIR/images.tmp"
unshare --mount --propagation private bash -euc '
  merged=$1 lower=$2; shift 2
  mount -t overlay overlay -o "lowerdir=$lower" "$merged"
  "$@" -rootfs "$merged"
' _ "$tools/merged" "$E2E:$BASE" "$tools/labconformance" -list "$tools/list" -bin "$BIN" -src "$src" \
  -coredns "$CACHE/$VERSION/bin/linux-$ARCH/coredns" -busybox "$BUSYBOX" -out "$DIR/images.tmp" >&2 < <(mkdir -p "$tools/merged")
echo "$stamp" >"$DIR/images.tmp/stamp"
rm -rf "$DIR/images"
mv "$DIR/images.tmp" "$DIR/images"
echo "conformance: images in $DIR/images:" >&2
cat "$DIR/images/images.txt" >&2
echo "$DIR"
