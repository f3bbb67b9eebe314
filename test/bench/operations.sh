#!/usr/bin/env bash
# operations.sh — the operations benchmark (make bench-operations): on a settled lab cluster of each size,
# RUNS runs each of the read-only and workstation commands an operator or a monitor runs often: status,
# diff, state pull (into a new directory), backup (plain, into a new directory); the time of each, its
# exit code, and the median. Nothing here changes the cluster. status and diff reuse the SSH connections
# the command before left open (--ssh-persist); LOGIN=1 adds them with --ssh-persist 0 (status-login,
# diff-login: every host logged in to, as the first command after a minute without one does).
#
#   SIZES="1+2 1+5" RUNS=5 SETTLE=30 LOGIN=1 test/bench/operations.sh
set -euo pipefail
exec 9>&-
SIZES=${SIZES:-"1+2 1+5"}
RUNS=${RUNS:-5}
SETTLE=${SETTLE:-30}
NAME=benchops
# shellcheck source=lablib.sh
. "$(dirname "$0")/lablib.sh"

now() { date +%s.%N; }

printf '%-5s %-11s %s\n' size command "seconds per run (exit code), median last"
for size in $SIZES; do
  dir=$W/$size
  lab_cluster "$size" "$dir"
  inv=$dir/cluster.yaml
  "$W/clusterctl" up -i "$inv" -o json >"$dir/up.json" 2>"$dir/up.err" || { tail -5 "$dir/up.err" >&2; exit 1; }
  sleep "$SETTLE"
  cmds=(status diff state-pull backup)
  [ -z "${LOGIN:-}" ] || cmds+=(status-login diff-login)
  for cmd in "${cmds[@]}"; do
    times=() line=""
    for run in $(seq 1 "$RUNS"); do
      case $cmd in
        status) args=(status -o json) ;;
        diff) args=(diff -o json) ;;
        state-pull) args=(state pull --state-dir "$dir/pulled-$run") ;;
        backup) args=(backup --unencrypted --out "$dir/backups-$run") ;;
        status-login) args=(status -o json --ssh-persist 0) ;;
        diff-login) args=(diff -o json --ssh-persist 0) ;;
      esac
      t0=$(now)
      code=0
      "$W/clusterctl" "${args[@]}" -i "$inv" >"$dir/$cmd-$run.out" 2>"$dir/$cmd-$run.err" || code=$?
      t=$(echo "$(now) - $t0" | bc -l)
      times+=("$t")
      line+=$(printf '%.2f(%d) ' "$t" "$code")
    done
    printf '%-5s %-11s %s median %.2f\n' "$size" "$cmd" "$line" "$(median "${times[@]}")"
  done
  du -b "$dir"/backups-1/* | awk -v s="$size" '{printf "%-5s backup      %d bytes\n", s, $1}'
  "$REPO/test/lab/lab.sh" down --name "$lab" >/dev/null 2>&1
done
