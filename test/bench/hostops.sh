#!/usr/bin/env bash
# hostops.sh — what each kind of operation costs a host (docs/benchmarks.md, add-node): on w1 of an idle
# 1+2 lab cluster, the host's CPU (its cgroup's, less its idle rate) and the wall time of a login, a session
# on an open connection, the processes the scripts start, the routes unit's restart, networkd's reload and
# an SFTP session, RUNS times each. Lab hosts, air-gapped from the artifacts.
#
#   RUNS=10 SETTLE=30 test/bench/hostops.sh
#
# LINGER=1 keeps root's systemd user manager running on the host (loginctl enable-linger root) before the
# measurements: what a login costs when pam_systemd need not start it.
set -euo pipefail
exec 9>&-
RUNS=${RUNS:-10}
SETTLE=${SETTLE:-30}
NAME=benchops
# shellcheck source=lablib.sh
. "$(dirname "$0")/lablib.sh"

dir=$W/1+2
lab_cluster 1+2 "$dir"
"$W/clusterctl" up -i "$dir/cluster.yaml" >"$dir/up.log" 2>&1 || { tail -3 "$dir/up.log" >&2; exit 1; }
host=w1
[ -z "${LINGER:-}" ] || ssh -F "$dir/ssh_config" "$host" loginctl enable-linger root
sleep "$SETTLE"
# usage: the host's CPU so far, in ns (its line of cgcpu).
usage() { cgcpu | awk -v h="$host/." '$1 == h {print $2}'; }
[ -n "$(usage)" ] || { echo "$NAME: no cgroup of $host" >&2; exit 1; }
idle=0
# op LABEL COMMAND...: runs the command RUNS times; prints the host's CPU and the wall time of one.
op() {
  local label=$1 c0 t0 c1 t1
  shift
  c0=$(usage); t0=$(date +%s%N)
  for _ in $(seq "$RUNS"); do "$@" >/dev/null 2>&1 || true; done
  c1=$(usage); t1=$(date +%s%N)
  rate=$(awk -v c=$((c1 - c0)) -v t=$((t1 - t0)) 'BEGIN {print c / t}')
  awk -v l="$label" -v c=$((c1 - c0)) -v t=$((t1 - t0)) -v n="$RUNS" -v idle="$idle" 'BEGIN {
    w = t / n / 1e6; printf "%-58s %7.1f ms host CPU %7.1f ms wall\n", l, c / n / 1e6 - idle * w, w}'
}
echo "$NAME: $host of an idle 1+2 cluster, $RUNS runs each; host CPU less its idle rate${LINGER:+; the user manager of root lingering}"
op "idle (its rate, per second slept)" sleep 1
idle=$rate
op "login + true (clusterctl exec)" "$W/clusterctl" exec -i "$dir/cluster.yaml" --limit "$host" -- true
op "login + true (clusterctl exec), 12 s after the last session (wall: with the 12 s)" sh -c "sleep 12; exec \"\$0\" exec -i \"\$1\" --limit $host -- true" "$W/clusterctl" "$dir/cluster.yaml"
ssh=(ssh -F "$dir/ssh_config")
op "login + true (OpenSSH)" "${ssh[@]}" "$host" true
"${ssh[@]}" -o ControlMaster=yes -o ControlPath="$W/cm" -o ControlPersist=300 -fN "$host"
on=("${ssh[@]}" -o ControlPath="$W/cm" "$host")
op "a session on an open connection: true" "${on[@]}" true
op "a session: stat and three sha256sum" "${on[@]}" 'stat /etc/hostname; sha256sum /etc/hostname; sha256sum /etc/hostname; sha256sum /etc/hostname'
op "a session: ip -force -batch of the pod routes" "${on[@]}" ip -force -batch /var/lib/clusterctl/pod-routes
op "a session: systemctl restart of the pod routes unit" "${on[@]}" systemctl restart clusterctl-pod-routes.service
op "a session: networkctl reload" "${on[@]}" networkctl reload
op "an SFTP session listing a directory" sh -c "echo 'ls /var/lib/clusterctl' | sftp -F \"\$0\" -o ControlPath=\"\$1\" -b - $host" "$dir/ssh_config" "$W/cm"
"${ssh[@]}" -o ControlPath="$W/cm" -O exit "$host" 2>/dev/null || true
