#!/usr/bin/env bash
# noop.sh — the no-op `clusterctl up` benchmark (make bench-noop): a cluster brought up on lab hosts, left
# SETTLE seconds to settle, then RUNS re-runs of `up` on it (nothing to do), each with its time by phase,
# the slowest host's facts and push, and the CPU time the whole machine spent on it (the hosts are its
# containers; the settled cluster's own use, measured before, taken out; divided by the CPUs, the least
# wall time the run could take here), and the command's wall time (its start and end included). With
# BASE=REV, every re-run is followed by one of clusterctl built from the commit REV, on the same cluster:
# the previous figure beside the new one. The code now reuses the SSH connections its previous command
# left open (--ssh-persist); LOGIN=1 adds, after each, a run of the same code with --ssh-persist 0 (code
# "login"): every host logged in to, as the first command after a minute without one does.
#
#   SIZES="1+2 1+5" RUNS=3 SETTLE=60 BASE=HEAD~1 LOGIN=1 test/bench/noop.sh
set -euo pipefail
exec 9>&-
SIZES=${SIZES:-"1+2 1+5"}
RUNS=${RUNS:-3}
SETTLE=${SETTLE:-60}
NAME=benchnoop
# shellcheck source=lablib.sh
. "$(dirname "$0")/lablib.sh"

build_base "${BASE:-}"
[ -z "${LOGIN:-}" ] || codes+=(login)
# flags CODE: the flags of a code's runs.
flags() { if [ "$1" = login ]; then echo "--ssh-persist 0"; fi; }
# slowest PLAY FILE: the slowest host of a play in a run's events, "host=seconds".
slowest() { jq -r --arg p "$1" 'select(.type=="host_done" and .play==$p) | "\(.duration_ms) \(.host)"' "$2" | sort -n | tail -1 | awk '{printf "%s=%.1f", $2, $1/1000}'; }

printf '%-5s %-10s %4s %7s %6s %8s %6s  %s\n' size code run time_s wall_s rss_MiB cpu_s "phases (s); slowest host's facts and push"
for size in $SIZES; do
  dir=$W/$size
  lab_cluster "$size" "$dir"
  "$W/clusterctl" up -i "$dir/cluster.yaml" -o json >"$dir/up.json" 2>"$dir/up.err" || { tail -5 "$dir/up.err" >&2; exit 1; }
  sleep "$SETTLE"
  # What the settled cluster itself keeps the machine busy with, per second: its share of each run's CPU.
  b0=$(busy); sleep 10; idle=$(echo "($(busy) - $b0) / 10" | bc -l)
  printf '%-5s idle cluster: %.2f CPU-s per second\n' "$size" "$idle"
  declare -A all=() walls=()
  for run in $(seq 1 "$RUNS"); do
    for code in "${codes[@]}"; do
      out=$dir/$code-$run
      b0=$(busy)
      # shellcheck disable=SC2046 # flags are words
      /usr/bin/time -f '%M %e' -o "$out.rss" "$(bin "$code")" up -i "$dir/cluster.yaml" -o json $(flags "$code") >"$out.json" 2>"$out.err" || { tail -5 "$out.err" >&2; exit 1; }
      cpu=$(echo "$(busy) - $b0" | bc -l)
      t=$(jq -r 'select(.type=="up_result") | .duration_ms/1000' "$out.json")
      cpu=$(echo "$cpu - $idle * $t" | bc -l) # the run's own
      read -r rss wall <"$out.rss"
      all[$code]+="$t " walls[$code]+="$wall "
      printf '%-5s %-10s %4s %7.2f %6.2f %8d %6.2f  %s; facts %s, push %s\n' "$size" "$code" "$run" "$t" "$wall" $((rss / 1024)) "$cpu" \
        "$(jq -r 'select(.type=="up_result") | [.phases[] | "\(.name)=\(.duration_ms/100|round/10)"] | join(" ")' "$out.json")" \
        "$(slowest facts "$out.json")" "$(slowest push "$out.json")"
    done
  done
  for code in "${codes[@]}"; do
    # shellcheck disable=SC2086
    printf '%-5s %-10s median %.2f s of %s; wall median %.2f s of %s\n' "$size" "$code" "$(median ${all[$code]})" "${all[$code]% }" \
      "$(median ${walls[$code]})" "${walls[$code]% }"
  done
  unset all walls
  "$REPO/test/lab/lab.sh" down --name "$lab" >/dev/null 2>&1
done
