#!/usr/bin/env bash
# upgrade.sh — the `clusterctl upgrade` benchmark (make bench-upgrade): a cluster brought up at
# K8S_UPGRADE_FROM on lab hosts, then upgraded to K8S_VERSION from the lab's artifacts (air-gapped): the
# time of the whole upgrade, by phase, per control-plane node (its etcd and control plane) and per node's
# kubelet (cordon, drain, restart, Ready, uncordon); then the time of a second (no-op) run; the upgrade's
# peak RSS (/usr/bin/time -v).
#
#   SIZES="1+1 3+1" K8S_UPGRADE_FROM=v1.36.3 test/bench/upgrade.sh
set -euo pipefail
exec 9>&-
SIZES=${SIZES:-"1+1 3+1"}
NAME=benchupg
# shellcheck source=lablib.sh
. "$(dirname "$0")/lablib.sh"
FROM=${K8S_UPGRADE_FROM:-v1.36.3}
FROM_ART=$CACHE/$FROM
[ -f "$FROM_ART/manifest.json" ] || { echo "$NAME: no artifacts in $FROM_ART: make artifacts" >&2; exit 1; }

echo "upgrade $FROM -> $K8S_VERSION"
printf '%-5s %9s %8s %8s %-40s %-44s %s\n' size upgrade_s rerun_s rss_MiB "control planes (s)" "kubelets (s)" "phases (s)"
for size in $SIZES; do
  cps=${size%+*} workers=${size#*+}
  dir=$W/$size
  mkdir -p "$dir"
  "$REPO/test/lab/lab.sh" up --name "$lab" --dir "$dir" --hosts $((cps + workers)) --control-planes "$cps" >/dev/null 2>&1
  sed "s|^  name: $lab\$|  name: $lab\n  kubernetesVersion: $FROM\n  artifacts: $FROM_ART|" "$dir/hosts.yaml" >"$dir/cluster.yaml"
  "$W/clusterctl" up -i "$dir/cluster.yaml" -o json >"$dir/up.json" 2>"$dir/up.err" || { tail -5 "$dir/up.err" >&2; exit 1; }
  up=(upgrade -i "$dir/cluster.yaml" --to "$K8S_VERSION" --artifacts "$ART" --yes -o json)
  /usr/bin/time -v "$W/clusterctl" "${up[@]}" >"$dir/upgrade.json" 2>"$dir/upgrade.err" || { tail -5 "$dir/upgrade.err" "$dir/upgrade.json" >&2; exit 1; }
  "$W/clusterctl" "${up[@]}" >"$dir/rerun.json" 2>"$dir/rerun.err" || { tail -5 "$dir/rerun.err" >&2; exit 1; }
  "$REPO/test/lab/lab.sh" down --name "$lab" >/dev/null 2>&1
  r() { jq -r "select(.type==\"upgrade_result\") | $1" "$2"; }
  printf '%-5s %9.1f %8.1f %8.0f %-40s %-44s %s\n' "$size" "$(r '.duration_ms/1000' "$dir/upgrade.json")" "$(r '.duration_ms/1000' "$dir/rerun.json")" \
    "$(awk -F: '/Maximum resident set size/{print $2/1024}' "$dir/upgrade.err")" \
    "$(r '[.controlPlanes[] | "\(.name)=\(.duration_ms/100|round/10)"] | join(" ")' "$dir/upgrade.json")" \
    "$(r '[.kubelets[] | "\(.name)=\(.duration_ms/100|round/10)"] | join(" ")' "$dir/upgrade.json")" \
    "$(r '[.phases[] | "\(.name)=\(.duration_ms/100|round/10)"] | join(" ")' "$dir/upgrade.json")"
done
