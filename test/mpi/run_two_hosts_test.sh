#!/usr/bin/env bash
# The mpi backend across two "machines" (docs/mpi.md): two network
# namespaces joined by a veth pair stand in for hosts 10.77.0.1 and
# 10.77.0.2; OpenMPI starts one rank in each through an rsh agent that
# enters the namespace named by the host address, and the ranks talk only
# over TCP (btl tcp,self: no shared memory between them). gpt2-tiny at N = 2
# must give outputs and saved params byte-identical to the local backend.
# Needs root (ip netns); where namespaces cannot be made it prints SKIPPED:,
# which ctest reports as Skipped in its closing summary.
# usage: run_two_hosts_test.sh SHARDC SOURCE_DIR [MPIRUN]
set -u
SHARDC=$1
SRC=$2
MPIRUN=${3:-mpirun}
WORK=$(mktemp -d)
h1=shardc-h1-$$ h2=shardc-h2-$$ v1=shv1-$$ v2=shv2-$$
cleanup() {
  ip netns del "$h1" 2>/dev/null
  ip netns del "$h2" 2>/dev/null
  rm -rf "$WORK"
}
trap cleanup EXIT

if ! ip netns add "$h1" 2>"$WORK/netns.err" || ! ip netns add "$h2" 2>>"$WORK/netns.err"; then
  echo "SKIPPED: cannot create network namespaces here: $(head -1 "$WORK/netns.err")"
  exit 0
fi
set -e
ip link add "$v1" type veth peer name "$v2"
ip link set "$v1" netns "$h1"
ip link set "$v2" netns "$h2"
ip -n "$h1" addr add 10.77.0.1/24 dev "$v1"
ip -n "$h2" addr add 10.77.0.2/24 dev "$v2"
for ns in "$h1" "$h2"; do ip -n "$ns" link set lo up; done
ip -n "$h1" link set "$v1" up
ip -n "$h2" link set "$v2" up
cat > "$WORK/agent" <<AGENT
#!/bin/bash
host=\$1; shift
case "\$host" in 10.77.0.1) ns=$h1;; 10.77.0.2) ns=$h2;; *) exit 1;; esac
echo "\$ns" >> "$WORK/agent.log"
exec ip netns exec "\$ns" /bin/sh -c "\$*"
AGENT
chmod +x "$WORK/agent"
set +e

MODEL=$SRC/examples/gpt2-tiny.json
"$SHARDC" run "$MODEL" --world-size 2 --seed 3 --outputs "$WORK/local.st" \
  --save-params "$WORK/local.params.st" > "$WORK/local.txt" 2>&1 ||
  { echo "FAIL: local run"; cat "$WORK/local.txt"; exit 1; }
ip netns exec "$h1" timeout 120 "$MPIRUN" --allow-run-as-root --oversubscribe -np 2 \
  --host 10.77.0.1:1,10.77.0.2:1 --mca plm_rsh_agent "$WORK/agent" \
  --mca btl tcp,self --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24 \
  "$SHARDC" run "$MODEL" --backend mpi --seed 3 --timeout 30 --outputs "$WORK/hosts.st" \
  --save-params "$WORK/hosts.params.st" > "$WORK/hosts.txt" 2>&1
rc=$?
[ $rc -eq 0 ] || { echo "FAIL: two-host mpi run exited $rc"; cat "$WORK/hosts.txt"; exit 1; }
failures=0
grep -q "2 MPI process(es)" "$WORK/hosts.txt" &&
  grep -q "predicted == measured on every rank: yes" "$WORK/hosts.txt" ||
  { echo "FAIL: two-host report"; cat "$WORK/hosts.txt"; failures=1; }
# mpirun (in h1) starts the remote rank through the agent, inside h2.
grep -qx "$h2" "$WORK/agent.log" 2>/dev/null && echo "ok: a rank was started inside the second host ($h2)" ||
  { echo "FAIL: no rank was started through the agent in $h2"; failures=1; }
# The bytes crossed the veth pair: each rank received at least the other's
# half of every parameter (forward gathers every unit once).
unsharded=$(sed -n 's/^unsharded parameter bytes.*: \([0-9,]*\)$/\1/p' "$WORK/local.txt" | tr -d ,)
rx=$(ip netns exec "$h1" cat "/sys/class/net/$v1/statistics/rx_bytes")
tx=$(ip netns exec "$h1" cat "/sys/class/net/$v1/statistics/tx_bytes")
echo "  veth $v1 in $h1: received $rx, sent $tx bytes; unsharded params $unsharded bytes"
[ -n "$unsharded" ] && [ "$rx" -ge $((unsharded / 2)) ] && [ "$tx" -ge $((unsharded / 2)) ] &&
  echo "ok: at least half the parameter bytes crossed the veth pair each way" ||
  { echo "FAIL: too little traffic on the veth pair"; failures=1; }
cmp -s "$WORK/local.st" "$WORK/hosts.st" && echo "ok: outputs byte-identical to the local backend" ||
  { echo "FAIL: outputs differ from the local backend"; failures=1; }
cmp -s "$WORK/local.params.st" "$WORK/hosts.params.st" &&
  echo "ok: saved params byte-identical to the local backend" ||
  { echo "FAIL: saved params differ from the local backend"; failures=1; }
[ $failures -eq 0 ] && echo "two hosts (network namespaces, TCP): passed"
exit $failures
