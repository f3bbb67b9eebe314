#!/usr/bin/env bash
# up.sh — the `clusterctl up` benchmark (make bench-up): time from bare lab hosts to all Nodes Ready, by
# phase, for each cluster size, then the time of a second (no-op) run on the healthy cluster. Hosts are the
# lab's nspawn hosts on this machine; Kubernetes comes from the lab's artifacts directory (air-gapped).
# LAYER=bare starts hosts with nothing but systemd and OpenSSH: up installs the runtime too. BASE=REV runs,
# after each run of the code now, one of clusterctl built from REV on fresh hosts: the two compared in one
# session on one machine. CNI="bridge flannel" runs each size with each pod network in turn (the default:
# bridge alone); SUBNETS=2 puts the hosts on two routed subnets (flannel only: preflight refuses the bridge).
# IP="4 dual" runs each with single-stack IPv4 hosts and cluster, then dual-stack ones (lab.sh up --ip).
#
#   SIZES="1+2 1+5" RUNS=1 LAYER=node|bare BASE=REV CNI="bridge flannel" SUBNETS=1 IP="4 dual" test/bench/up.sh
set -euo pipefail
exec 9>&-
SIZES=${SIZES:-"1+2 1+5"}
RUNS=${RUNS:-1}
LAYER=${LAYER:-node}
CNIS=${CNI:-bridge}
SUBNETS=${SUBNETS:-1}
IPS=${IP:-4}
NAME=benchup
# shellcheck source=lablib.sh
. "$(dirname "$0")/lablib.sh"

build_base "${BASE:-}"
ncpu=$(nproc)
echo "hosts: $LAYER, on $SUBNETS subnet(s)"
printf '%-6s %-4s %-5s %-8s %-4s %8s %8s %s\n' size run code cni ip up_s rerun_s "phases (s), peak RSS of up/re-run"
for size in $SIZES; do
  cps=${size%+*} workers=${size#*+}
  for run in $(seq 1 "$RUNS"); do
    for code in "${codes[@]}"; do
     for cni in $CNIS; do
     for ip in $IPS; do
      clusterctl=$(bin "$code")
      dir=$W/$size-$run-$code-$cni-$ip
      mkdir -p "$dir"
      "$REPO/test/lab/lab.sh" up --name "$lab" --dir "$dir" --hosts $((cps + workers)) --control-planes "$cps" --layer "$LAYER" --subnets "$SUBNETS" --ip "$ip" >/dev/null 2>&1
      lab_inventory "$dir" | sed "s|^  name: $lab\$|  name: $lab\n  cni:\n    plugin: $cni|" >"$dir/cluster.yaml"
      # Peak RSS (GNU time's %M, KiB) of each run goes to its .rss file, with up's user and system CPU seconds.
      b0=$(busy)
      /usr/bin/time -f '%M %U %S' -o "$dir/up.rss" "$clusterctl" up -i "$dir/cluster.yaml" -o json >"$dir/up.json" 2>"$dir/up.err" || { tail -5 "$dir/up.err" "$dir/up.json" >&2; exit 1; }
      cpu=$(echo "$(busy) - $b0" | bc -l)
      /usr/bin/time -f %M -o "$dir/rerun.rss" "$clusterctl" up -i "$dir/cluster.yaml" -o json >"$dir/rerun.json" 2>"$dir/rerun.err" || { tail -5 "$dir/rerun.err" "$dir/rerun.json" >&2; exit 1; }
      t0=$(ms)
      "$REPO/test/lab/lab.sh" down --name "$lab" >/dev/null 2>&1
      down=$(( $(ms) - t0 ))
      up=$(jq -r 'select(.type=="up_result") | .duration_ms/1000' "$dir/up.json")
      rerun=$(jq -r 'select(.type=="up_result") | .duration_ms/1000' "$dir/rerun.json")
      phases=$(jq -r 'select(.type=="up_result") | [.phases[] | "\(.name)=\(.duration_ms/100|round/10)"] | join(" ")' "$dir/up.json")
      # Per host: the push's time on it.
      pushes=$(jq -r 'select(.type=="host_done" and .play=="push") | "\(.host)=\(.duration_ms/100|round/10)"' "$dir/up.json" | tr '\n' ' ')
      read -r rss user sys <"$dir/up.rss"
      printf '%-6s %-4s %-5s %-8s %-4s %8.1f %8.1f %s (push by host: %s; peak RSS %d/%d MiB; CPU busy during up %.1fs, /%d CPUs = %.1fs, of it clusterctl %.1fs; lab down %.1fs)\n' "$size" "$run" "$code" "$cni" "$ip" "$up" "$rerun" "$phases" \
        "${pushes% }" $(( rss / 1024 )) $(( $(cat "$dir/rerun.rss") / 1024 )) "$cpu" "$ncpu" "$(echo "$cpu/$ncpu" | bc -l)" "$(echo "$user+$sys" | bc -l)" "$(echo "$down/1000" | bc -l)"
     done
     done
    done
  done
done
