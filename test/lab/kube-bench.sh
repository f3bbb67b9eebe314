#!/usr/bin/env bash
# kube-bench.sh — build (once per version) Aqua Security's kube-bench, the CIS Kubernetes Benchmark's
# checks as a program, from the Go module proxy, with its configuration (cfg/, the benchmarks' checks).
#
#   test/lab/kube-bench.sh        prints the directory on stdout
#
# Output: $CACHE/kube-bench-<version>/{kube-bench,cfg/}. v0.15.1 is the version the module proxy serves with
# the benchmark clusterctl's profile cis follows (cfg/cis-1.12, Kubernetes 1.32-1.34 in its own mapping;
# the checks run with --benchmark cis-1.12 on later versions).
set -euo pipefail
exec 9>&-
VERSION=${KUBE_BENCH_VERSION:-v0.15.1}
CACHE=${CLUSTERCTL_LAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/clusterctl-lab}
DIR=$CACHE/kube-bench-$VERSION
export PATH=$PATH:/usr/local/go/bin
if [ -x "$DIR/kube-bench" ] && [ -f "$DIR/cfg/cis-1.12/node.yaml" ]; then echo "$DIR"; exit 0; fi
work=$(mktemp -d "${TMPDIR:-/tmp}/clusterctl-kube-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "kube-bench: building $VERSION from the module proxy (~2 min once)" >&2
# Its module's source, by exact version (go install pkg@version would ask the proxy for the module's version
# list, which it does not serve), built in a copy with its own go.mod and go.sum.
src=$(cd "$work" && go mod download -json "github.com/aquasecurity/kube-bench@$VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
[ -d "$src/cfg/cis-1.12" ] || { echo "kube-bench $VERSION has no cfg/cis-1.12 in ${src:-the module cache}" >&2; exit 1; }
cp -r "$src" "$work/src" && chmod -R u+w "$work/src"
mkdir -p "$work/out"
(cd "$work/src" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/aquasecurity/kube-bench/cmd.KubeBenchVersion=$VERSION" -o "$work/out/kube-bench" .) >&2
cp -r "$work/src/cfg" "$work/out/cfg"
rm -rf "$DIR.tmp" && mkdir -p "$CACHE" && mv "$work/out" "$DIR.tmp" && rm -rf "$DIR" && mv "$DIR.tmp" "$DIR"
echo "$DIR"
