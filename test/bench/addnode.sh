#!/usr/bin/env bash
# addnode.sh — the add-node benchmark (make bench-add-node): one worker added to running clusters of each
# size; the time of `clusterctl add-node` and the bytes it wrote to hosts (the new node's binaries, images
# and files, and the other nodes' route to its pod range). Lab hosts, air-gapped from the artifacts.
#
#   SIZES="1+1 1+5" SETTLE=0 CNI=bridge BASE=REV test/bench/addnode.sh
#
# SETTLE=N waits N seconds between the cluster's up and the add-node (0: right after up, while the new
# cluster's Pods still start). CNI is the pod network (bridge: every other node gets a route to the new
# node's range; flannel: nothing of theirs changes). BASE=REV runs each size again with the code at REV
# (the cluster, its up and the add-node all of that code), after the code now's.
set -euo pipefail
exec 9>&-
SIZES=${SIZES:-"1+1 1+5"}
SETTLE=${SETTLE:-0}
CNI=${CNI:-bridge}
ncpu=$(nproc)
NAME=benchadd
# shellcheck source=lablib.sh
. "$(dirname "$0")/lablib.sh"
build_base "${BASE:-}"

echo "pod network: $CNI"
printf '%-6s %-5s %10s %12s %s\n' cluster code add_s bytes_MB "phases (s)"
for size in $SIZES; do
 for code in "${codes[@]}"; do
  clusterctl=$(bin "$code")
  cps=${size%+*} workers=${size#*+}
  n=$((cps + workers + 1))
  dir=$W/$size-$code
  mkdir -p "$dir"
  "$REPO/test/lab/lab.sh" up --name "$lab" --dir "$dir" --hosts "$n" --control-planes "$cps" >/dev/null 2>&1
  lab_inventory "$dir" | sed "s|^  name: $lab\$|  name: $lab\n  cni:\n    plugin: $CNI|" >"$dir/full.yaml"
  new=w$((workers + 1))
  # The running cluster: every host but the new one.
  awk -v new="$new" '/^  - name: /{skip=($3==new)} !skip' "$dir/full.yaml" >"$dir/cluster.yaml"
  "$clusterctl" up -i "$dir/cluster.yaml" -o json >"$dir/up.json" 2>&1 || { tail -3 "$dir/up.json" >&2; exit 1; }
  # The machine's CPU (the hosts are its containers) while the cluster settles, and during add-node.
  b0=$(busy)
  cgcpu >"$dir/cgs"
  sleep "$SETTLE"
  b1=$(busy)
  cgcpu >"$dir/cg0"
  /usr/bin/time -o "$dir/time" -f '%U %S' "$clusterctl" add-node -i "$dir/full.yaml" "$new" -o json >"$dir/add.json" 2>&1 ||
    { tail -3 "$dir/add.json" >&2; exit 1; }
  cgcpu >"$dir/cg1"
  b2=$(busy)
  jq -r --arg s "$size" --arg c "$code" 'select(.type=="up_result") | [$s, $c, (.duration_ms/1000|tostring), ((.bytesPushed/1048576*10|round)/10|tostring),
    ([.phases[] | "\(.name)=\(.duration_ms/100|round/10)"] | join(" "))] | @tsv' "$dir/add.json" |
    awk -F'\t' '{printf "%-6s %-5s %10.1f %12s %s\n", $1, $2, $3, $4, $5}'
  add=$(jq -r 'select(.type=="up_result") | .duration_ms/1000' "$dir/add.json")
  printf '       CPU busy during add-node %.1fs (%.0f%% of %d CPUs over its %.1fs)' "$(echo "$b2 - $b1" | bc -l)" \
    "$(echo "100 * ($b2 - $b1) / ($ncpu * $add)" | bc -l)" "$ncpu" "$add"
  if [ "$SETTLE" -gt 0 ]; then
    printf '; the idle cluster beforehand: %.0f%% of %d CPUs' "$(echo "100 * ($b1 - $b0) / ($ncpu * $SETTLE)" | bc -l)" "$ncpu"
  fi
  echo
  # Where it went: clusterctl itself, the new node, the first control-plane node and the other nodes (what
  # grows with the cluster), each with the units that spent the most.
  others=$(awk '/^  - name: /{print $3}' "$dir/cluster.yaml" | grep -v -x -e cp1 -e "$new" | tr '\n' ' ')
  printf '       clusterctl %.1f CPU-s;' "$(awk '{print $1 + $2}' "$dir/time")"
  printf ' new node %s\n' "$(cgdiff "$dir/cg0" "$dir/cg1" "$new")"
  printf '       cp1 %s\n' "$(cgdiff "$dir/cg0" "$dir/cg1" cp1)"
  # shellcheck disable=SC2086 # others: one word per host
  if [ -n "$others" ]; then
    printf '       other nodes %s\n' "$(cgdiff "$dir/cg0" "$dir/cg1" $others)"
    [ "$SETTLE" -eq 0 ] || printf '       (the same nodes idle, the %ss before: %s)\n' "$SETTLE" "$(cgdiff "$dir/cgs" "$dir/cg0" $others)"
  fi
  "$REPO/test/lab/lab.sh" down --name "$lab" >/dev/null 2>&1
 done
done
