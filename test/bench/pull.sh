#!/usr/bin/env bash
# pull.sh — the `clusterctl artifacts pull` benchmark (make bench-pull): the default version for amd64 from the
# lab's mirror of the upstream download layouts (loopback), into an empty directory (cold), then again (warm:
# every file in place is verified, nothing downloaded). RUNS times each.
#
#   RUNS=3 test/bench/pull.sh
set -euo pipefail
exec 9>&-
RUNS=${RUNS:-3}
NAME=benchpull
# shellcheck source=lablib.sh
. "$(dirname "$0")/lablib.sh"
(cd "$REPO" && CGO_ENABLED=0 go build -trimpath -o "$W/labmirror" ./test/lab/cmd/labmirror)

# The mirror serves for the length of one command: the command here runs every pull and prints the times.
cat >"$W/pulls.sh" <<'EOS'
#!/usr/bin/env bash
set -euo pipefail
bin=$1 version=$2 runs=$3 w=$4; shift 4
ms() { date +%s%3N; }
printf '%-4s %8s %8s %10s\n' run cold_s warm_s MiB
for run in $(seq 1 "$runs"); do
  out=$w/pull-$run
  t0=$(ms); "$bin" artifacts pull --kubernetes-version "$version" --dir "$out" "$@" -o json >"$w/cold-$run.json"; t1=$(ms)
  "$bin" artifacts pull --kubernetes-version "$version" --dir "$out" "$@" -o json >"$w/warm-$run.json"; t2=$(ms)
  mib=$(du -sm "$out" | cut -f1)
  printf '%-4s %8.2f %8.2f %10s\n' "$run" "$(echo "($t1-$t0)/1000" | bc -l)" "$(echo "($t2-$t1)/1000" | bc -l)" "$mib"
  rm -rf "$out"
done
EOS
chmod +x "$W/pulls.sh"
"$W/labmirror" -artifacts "$ART" -- "$W/pulls.sh" "$W/clusterctl" "$K8S_VERSION" "$RUNS" "$W"
