#!/usr/bin/env bash
# addons.sh — what the add-ons cost (make bench-addons): on lab hosts (1+2), with the artifacts and the
# add-ons' charts and images pulled from the lab's mirror (`artifacts pull -i`, whose bytes it reports),
# `up` without add-ons, then with local-path-provisioner (Helm repository) and metrics-server (OCI
# registry), then again (no-op), on the same cluster: each run's wall time, its addons step, each add-on's
# install, and clusterctl's peak RSS (/usr/bin/time -v). RUNS (default 1) clusters in turn.
#
#   test/bench/addons.sh
set -euo pipefail
exec 9>&-
NAME=benchaddons
# shellcheck source=lablib.sh
. "$(dirname "$0")/lablib.sh"
ADDONS=$("$REPO/test/lab/build-addons.sh")
(cd "$REPO" && CGO_ENABLED=0 go build -o "$W/labmirror" ./test/lab/cmd/labmirror)

# run LABEL ARGS...: clusterctl ARGS --output json, its wall time, addons step and peak RSS printed.
run() {
  local label=$1 out=$W/$1
  shift
  if ! /usr/bin/time -v "$W/clusterctl" "$@" --output json >"$out.json" 2>"$out.err"; then
    echo "$NAME: clusterctl $* failed:" >&2
    tail -5 "$out.err" >&2
    tail -5 "$out.json" >&2
    exit 1
  fi
  local wall addons rss each
  wall=$(jq -r 'select(.type=="up_result") | .duration_ms/1000' "$out.json")
  addons=$(jq -r 'select(.type=="up_result") | [.phases[]? | select(.name=="addons") | .duration_ms/1000] | first // 0' "$out.json")
  rss=$(awk -F: '/Maximum resident set size/{printf "%.0f", $2/1024}' "$out.err")
  each=$(jq -r 'select(.message? // "" | test("^add-on .*: installed|^add-on .*: upgraded")) | .message' "$out.json" | sed -E 's/^add-on ([^:]*): .* in ([0-9.]+m?s)$/\1 \2/' | paste -sd, -)
  printf '%-28s %8.1f %8.1f %8s  %s\n' "$label" "$wall" "$addons" "$rss" "${each:--}"
}

printf '%-28s %8s %8s %8s  %s\n' run wall_s addons_s rss_MiB "add-on: install time"
for r in $(seq 1 "${RUNS:-1}"); do
  # a fresh cluster with the add-ons: the inventory (with the mirror's addresses) written and everything
  # pulled under labmirror
  dir=$W/with$r
  lab_cluster 1+2 "$dir"
  (cd "$REPO" && CLUSTERCTL=$W/clusterctl "$W/labmirror" -artifacts "$ART" -addons "$ADDONS" -- \
    test/lab/addons-up.sh "$dir" "local-path-provisioner metrics-server") >"$W/pull$r.out" 2>&1 || { tail -20 "$W/pull$r.out" >&2; exit 1; }
  pulled=$(du -sbc "$dir/artifacts/charts" "$dir/artifacts/images/"linux-*/extra-* | awk 'END {print $1}')
  run "up, two add-ons ($r)" up -i "$dir/cluster.yaml"
  run "no-op, two add-ons ($r)" up -i "$dir/cluster.yaml"
  "$REPO/test/lab/lab.sh" down --name "$lab" >/dev/null 2>&1
  # a fresh cluster without them, from the same artifacts
  lab_cluster 1+2 "$W/without$r"
  sed -i "s|^  artifacts: .*|  artifacts: $dir/artifacts|" "$W/without$r/cluster.yaml"
  run "up, no add-ons ($r)" up -i "$W/without$r/cluster.yaml"
  run "no-op, no add-ons ($r)" up -i "$W/without$r/cluster.yaml"
  "$REPO/test/lab/lab.sh" down --name "$lab" >/dev/null 2>&1
  echo "$NAME: add-on artifacts pulled: $pulled bytes (their charts and the images only they run)"
done
