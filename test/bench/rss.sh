#!/usr/bin/env bash
# rss.sh — every command's peak memory (make bench-rss): each of clusterctl's commands run once, in a
# cluster's life, on lab hosts (one control-plane node, a worker, and a second worker added and removed),
# air-gapped from the artifacts, under /usr/bin/time -v: its wall time and peak RSS. The commands that move
# the artifacts (up, add-node, up --dry-run, render) stream them from disk: their peak stays flat whatever
# the artifacts' size. CA=0 leaves certs rotate --ca out (minutes).
#
#   test/bench/rss.sh
set -euo pipefail
exec 9>&-
NAME=benchrss
# shellcheck source=lablib.sh
. "$(dirname "$0")/lablib.sh"

dir=$W/lab
mkdir -p "$dir"
"$REPO/test/lab/lab.sh" up --name "$lab" --dir "$dir" --hosts 3 --control-planes 1 >/dev/null 2>&1
lab_inventory "$dir" >"$dir/full.yaml"
awk '/^  - name: /{skip=($3=="w2")} !skip' "$dir/full.yaml" >"$dir/cluster.yaml"

printf '%-34s %8s %8s\n' command time_s rss_MiB
n=0
# run ARGS...: clusterctl ARGS, its time and peak RSS printed; a failure stops the benchmark.
run() {
  n=$((n + 1))
  local out=$dir/$n
  if ! /usr/bin/time -v "$W/clusterctl" "$@" >"$out.out" 2>"$out.err"; then
    echo "$NAME: clusterctl $* failed:" >&2
    tail -5 "$out.err" >&2
    exit 1
  fi
  local args=$*
  args=${args//$dir\//}
  printf '%-34s %8.1f %8.0f\n' "${args:0:34}" \
    "$(awk -F': ' '/Elapsed \(wall clock\)/{n=split($2,p,":"); s=0; for(i=1;i<=n;i++) s=s*60+p[i]; print s}' "$out.err")" \
    "$(awk -F: '/Maximum resident set size/{print $2/1024}' "$out.err")"
}
c=(-i "$dir/cluster.yaml")
f=(-i "$dir/full.yaml")
run inventory validate "${f[@]}"
run render "${c[@]}" --out "$dir/rendered"
run preflight "${c[@]}"
run up "${c[@]}" --dry-run
run up "${c[@]}"
run up "${c[@]}"
run exec "${c[@]}" -- uptime
run add-node "${f[@]}" w2
run certs check-expiration "${f[@]}"
run etcd status "${f[@]}"
run etcd snapshot "${f[@]}" --out "$dir/etcd.db"
run certs rotate "${f[@]}" --fresh 0 --yes
[ "${CA:-1}" = 0 ] || run certs rotate "${f[@]}" --ca --yes
run remove-node "${f[@]}" w2 --yes
run reset "${c[@]}" --yes
