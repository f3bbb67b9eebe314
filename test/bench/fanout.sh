#!/usr/bin/env bash
# fanout.sh — the fan-out benchmark (make bench-fanout): one command on N hosts, compared across clusterctl,
# a minimal Go fan-out (the floor), Ansible from Debian (-m shell and -m raw, forks 50) and pssh (-p 200).
#
# Hosts are plain sshd processes, one per host, each on its own loopback address (127.77.X.Y); they run on
# this machine, so server work shares the 2 cores with the clients: wall time is server-bound, client CPU
# and peak RSS are each tool's own. The command is clusterctl's facts script, the same for every tool.
#
#   N_LIST="10 100 300" RUNS=5 test/bench/fanout.sh
#   TOOLS="clusterctl floor" N_LIST="300 1000" RUNS=3 test/bench/fanout.sh   # some tools only
set -euo pipefail
exec 9>&-
N_LIST=${N_LIST:-"10 100 300"}
RUNS=${RUNS:-5}
# clusterctl: clusterctl exec and clusterctl preflight (preflight alone: TOOLS=preflight; exec alone: exec).
TOOLS=${TOOLS:-"clusterctl floor pssh ansible"}
want() { [[ " $TOOLS " == *" $1 "* ]]; }
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
export PATH=$PATH:/usr/local/go/bin
[ "$(id -u)" = 0 ] || { echo "bench: needs root (sshd on loopback addresses, port 22)" >&2; exit 1; }

pkgs=(openssh-server time)
want pssh && pkgs+=(pssh)
want ansible && pkgs+=(ansible-core)
need=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "bench: installing ${need[*]}" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

W=$(mktemp -d /tmp/clusterctl-bench.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]+"${pids[@]}"}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$W" /tmp/clusterctl-putbench
}
trap cleanup EXIT

(cd "$REPO" && CGO_ENABLED=0 go build -trimpath -o "$W/" ./cmd/clusterctl ./test/bench/cmd/fanoutfloor ./test/bench/cmd/putbench)
ssh-keygen -q -t ed25519 -N '' -f "$W/id_ed25519"
ssh-keygen -q -t ed25519 -N '' -f "$W/host_ed25519"
cp "$W/id_ed25519.pub" "$W/authorized_keys"
mkdir -p /run/sshd
cat >"$W/sshd_config" <<EOC
HostKey $W/host_ed25519
AuthorizedKeysFile $W/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
UseDNS no
StrictModes no
MaxStartups 1000
LogLevel QUIET
Subsystem sftp internal-sftp
# root's .bashrc on this machine runs pyenv init (+250 ms a command); a login as from a nested shell skips it.
SetEnv SHLVL=1
EOC
# The facts script, as clusterctl preflight runs it (under sh, as preflight does).
"$W/fanoutfloor" -print-facts-script >"$W/facts.sh"
CMD="sh $W/facts.sh"

addr() { echo "127.77.$(( $1 / 200 )).$(( $1 % 200 + 1 ))"; }
maxn=0; for n in $N_LIST; do [ "$n" -gt "$maxn" ] && maxn=$n; done
echo "bench: starting $maxn sshd processes" >&2
for i in $(seq 0 $((maxn - 1))); do
  /usr/sbin/sshd -D -f "$W/sshd_config" -o "ListenAddress=$(addr "$i"):22" -o "PidFile=none" &
  pids+=($!)
done
for i in $(seq 0 $((maxn - 1))); do
  for _ in $(seq 50); do (exec 3<>/dev/tcp/$(addr "$i")/22) 2>/dev/null && break; sleep 0.1; done
done

results=$W/results.tsv
: >"$results"
measure() { # name n command...
  local name=$1 n=$2; shift 2
  local out
  for r in $(seq "$RUNS"); do
    out=$( { /usr/bin/time -f 'TIME %e %U %S %M' "$@" >/dev/null 2>"$W/err"; } 2>&1 ) || true
    out=$(grep '^TIME' "$W/err" | tail -1)
    [ -n "$out" ] || { echo "bench: $name N=$n failed:" >&2; tail -3 "$W/err" >&2; continue; }
    echo "$name $n $out" | awk '{print $1 "\t" $2 "\t" $4 "\t" $5+$6 "\t" $7}' >>"$results"
  done
}

for n in $N_LIST; do
  hosts=$W/hosts-$n; : >"$hosts"; : >"$W/known_hosts-$n"
  {
    echo "cluster: {networking: {podSubnet: 10.64.0.0/12, nodeCIDRMaskSize: 26}}"
    echo "ssh: {user: root, identityFiles: [$W/id_ed25519], knownHosts: [$W/known_hosts-$n], agent: false}"
    echo "hosts:"
  } >"$W/hosts-$n.yaml"
  echo "[all]" >"$W/ansible-$n.ini"
  for i in $(seq 0 $((n - 1))); do
    a=$(addr "$i")
    echo "$a" >>"$hosts"
    echo "$a $(cut -d' ' -f1,2 "$W/host_ed25519.pub")" >>"$W/known_hosts-$n"
    role=worker; [ "$i" = 0 ] && role=control-plane
    echo "  - {name: h$i, address: $a, roles: [$role]}" >>"$W/hosts-$n.yaml"
    echo "h$i ansible_host=$a" >>"$W/ansible-$n.ini"
  done
  sshopts="-o UserKnownHostsFile=$W/known_hosts-$n -o StrictHostKeyChecking=yes -o IdentitiesOnly=yes -i $W/id_ed25519"
  cat >"$W/ansible-$n.cfg" <<EOA
[defaults]
host_key_checking = True
forks = 50
interpreter_python = /usr/bin/python3
stdout_callback = minimal
[ssh_connection]
ssh_args = $sshopts -o ControlMaster=no
EOA
  echo "bench: N=$n" >&2
  state=$W/state-$n
  if want clusterctl || want exec; then
    measure clusterctl-exec "$n" env SSH_AUTH_SOCK= "$W/clusterctl" exec -i "$W/hosts-$n.yaml" --state-dir "$state" --ssh-config none -- "$CMD"
  fi
  if want clusterctl || want preflight; then
    measure clusterctl-preflight "$n" env SSH_AUTH_SOCK= sh -c "'$W/clusterctl' preflight -i '$W/hosts-$n.yaml' --state-dir '$state' --ssh-config none -o json >/dev/null; exit 0"
  fi
  if want floor; then
    measure floor "$n" "$W/fanoutfloor" -hosts "$hosts" -key "$W/id_ed25519" -known-hosts "$W/known_hosts-$n" -cmd "$CMD" -limit 200
  fi
  if want pssh; then
    measure pssh "$n" parallel-ssh -h "$hosts" -l root -p 200 -t 0 -x "$sshopts" -o "$W/pssh-out" "$CMD"
  fi
  if want ansible; then
    measure ansible-raw "$n" env ANSIBLE_CONFIG="$W/ansible-$n.cfg" ansible all -i "$W/ansible-$n.ini" -u root -m raw -a "$CMD"
    measure ansible-shell "$n" env ANSIBLE_CONFIG="$W/ansible-$n.cfg" ansible all -i "$W/ansible-$n.ini" -u root -m shell -a "$CMD"
  fi
  if want clusterctl; then
    "$W/putbench" -hosts "$hosts" -key "$W/id_ed25519" -known-hosts "$W/known_hosts-$n" -files 10 >>"$W/put.txt" || true
  fi
done

echo
echo "Fan-out of clusterctl's facts script to N sshd hosts on loopback; median of $RUNS runs; $(nproc) cores."
echo
echo "| tool | N | wall s | client CPU s | CPU ms/host | peak RSS MiB | RSS KiB/host |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
for key in $(cut -f1,2 "$results" | tr '\t' ':' | sort -u -t: -k1,1 -k2,2n); do
  tool=${key%%:*} n=${key##*:}
  rows=$(awk -F'\t' -v t="$tool" -v n="$n" '$1 == t && $2 == n' "$results")
  wall=$(cut -f3 <<<"$rows" | median); cpu=$(cut -f4 <<<"$rows" | median); rss=$(cut -f5 <<<"$rows" | median)
  awk -v t="$tool" -v n="$n" -v w="$wall" -v c="$cpu" -v m="$rss" \
    'BEGIN {printf "| %s | %d | %.2f | %.2f | %.2f | %.0f | %.0f |\n", t, n, w, c, 1000 * c / n, m / 1024, m / n}'
done
if [ -s "$W/put.txt" ]; then
  echo
  echo "Pushing 10 files of 16 KiB to each host (clusterctl transport), then again unchanged:"
  echo
  sed 's/^/    /' "$W/put.txt"
fi
