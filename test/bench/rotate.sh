#!/usr/bin/env bash
# rotate.sh — the certificate rotation benchmark (make bench-rotate): a cluster brought up on lab hosts
# (air-gapped, from the artifacts), then `certs rotate --fresh 0` (every leaf and kubeconfig renewed, keys
# kept), a second `certs rotate` right after (nothing to do), and `certs rotate --ca`: the time of each, by
# stage, per control-plane node, and each command's peak RSS (/usr/bin/time -v). That no request fails
# meanwhile is what the end-to-end tests check (TestGrowAndShrink, TestOperateUp); this measures time.
#
# RUNS leaf rotations in a row; with BASE=REV each is followed by one of clusterctl built from the commit REV
# on the same cluster (the previous figure beside the new one).
#
#   SIZES="3+1" RUNS=1 BASE=REV test/bench/rotate.sh     (CA=0 leaves the CA rotation out)
set -euo pipefail
exec 9>&-
SIZES=${SIZES:-"3+1"}
RUNS=${RUNS:-1}
NAME=benchrot
# shellcheck source=lablib.sh
. "$(dirname "$0")/lablib.sh"

# rss FILE: the peak RSS /usr/bin/time -v wrote into FILE, in MiB.
rss() { awk -F: '/Maximum resident set size/{printf "%.0f", $2/1024}' "$1"; }
build_base "${BASE:-}"

# timed NAME ARGS...: clusterctl ARGS (the code now, or $code's) with its JSON events in $dir/NAME.json, stderr and time's in NAME.err.
timed() {
  local name=$1; shift
  /usr/bin/time -v "$(bin "${code:-now}")" "$@" -o json >"$dir/$name.json" 2>"$dir/$name.err" || { tail -5 "$dir/$name.err" >&2; exit 1; }
}
steps() { jq -r 'select(.type=="phase_done") | "\(.play)=\(.duration_ms/100|round/10)"' "$1" | paste -sd' '; }

printf '%-5s %-9s %8s %8s  %s\n' size command time_s rss_MiB "stages / control-plane nodes (s)"
for size in $SIZES; do
  dir=$W/$size
  lab_cluster "$size" "$dir"
  timed up up -i "$dir/cluster.yaml"
  r() { jq -r "select(.type==\"$1\") | $2" "$3"; }
  for run in $(seq 1 "$RUNS"); do
    for code in "${codes[@]}"; do
      name=rotate-$code-$run
      timed "$name" certs rotate -i "$dir/cluster.yaml" --fresh 0 --yes
      printf '%-5s %-9s %8.1f %8s  %s; nodes: %s\n' "$size" "rotate${BASE:+ ($code)}" "$(r rotate_result '.duration_ms/1000' "$dir/$name.json")" "$(rss "$dir/$name.err")" \
        "$(steps "$dir/$name.json")" "$(r rotate_result '[.nodes[] | "\(.name)=\(.duration_ms/100|round/10)"] | join(" ")' "$dir/$name.json")"
    done
  done
  code=now
  timed again certs rotate -i "$dir/cluster.yaml" --yes
  printf '%-5s %-9s %8.1f %8s  %s\n' "$size" "no-op" "$(r rotate_result '.duration_ms/1000' "$dir/again.json")" "$(rss "$dir/again.err")" "$(steps "$dir/again.json")"
  if [ "${CA:-1}" != 0 ]; then
    timed ca certs rotate -i "$dir/cluster.yaml" --ca --yes
    printf '%-5s %-9s %8.1f %8s  %s\n' "$size" "--ca" "$(r ca_rotate_result '.duration_ms/1000' "$dir/ca.json")" "$(rss "$dir/ca.err")" \
      "$(r ca_rotate_result '[.stages[] | "\(.name)=\(.duration_ms/100|round/10)"] | join(" ")' "$dir/ca.json")"
  fi
  "$REPO/test/lab/lab.sh" down --name "$lab" >/dev/null 2>&1
done
