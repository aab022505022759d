#!/usr/bin/env bash
# slurm_array.sh: a real single-node Slurm (Debian's slurm-wlm and munge) on localhost, all of its
# state in a temporary folder: munged on its own key and socket, slurmctld and slurmd from a
# slurm.conf there (SLURM_CONF), then experiments/slurm/submit.sh submits a 2-task job array of
# experiments/smoke.ini and the merge job that depends on it; the merged rows must equal an
# unsharded `dsgap run` (every column but time_ms) and summary.csv must be byte-identical.
# Skips (exit 77) only where Slurm cannot start: not root, packages missing, daemons not coming up.
# Always stops the daemons it started (by the PIDs in their pid files).
# Run: ctest -R slurm_array (labels slow, cpu; needs $DSGAP and $DSGAP_SOURCE).
# Reference: ../shared/reference/slurm-single-node.md (a configuration seen working here).
. "$(dirname "$0")/../lib.sh" slurm
: "${DSGAP_SOURCE:?set DSGAP_SOURCE to the source tree}"
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "not root: slurmd needs root to start jobs as their user"
for c in munged munge unmunge slurmctld slurmd sbatch scontrol sinfo; do
  command -v $c >/dev/null || skip "$c not found (apt-get install slurm-wlm munge)"
done

chmod 755 "$tmp" # munged wants every folder above its socket searchable by all
stop_daemons() {
  for f in "$tmp/slurmd.pid" "$tmp/slurmctld.pid" "$tmp/munged.pid"; do
    [ -s "$f" ] || continue
    local pid; pid=$(cat "$f")
    kill "$pid" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
  done
}
cleanup() { stop_daemons; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 130' INT TERM
show_logs() { for f in "$tmp"/*.log; do echo "--- $f"; tail -15 "$f"; done; }

# --- munge ---------------------------------------------------------------------------------------
dd if=/dev/urandom of="$tmp/munge.key" bs=1024 count=1 2>/dev/null
chmod 400 "$tmp/munge.key"
sock=$tmp/munge.socket
munged --key-file="$tmp/munge.key" --socket="$sock" --pid-file="$tmp/munged.pid" \
  --log-file="$tmp/munged.log" --seed-file="$tmp/munged.seed" ||
  { show_logs; skip "munged does not start"; }
munge -n -S "$sock" | unmunge -S "$sock" | grep -q 'STATUS: *Success' ||
  { show_logs; skip "munge -n | unmunge does not succeed"; }

# --- slurm.conf, daemons -------------------------------------------------------------------------
host=$(hostname -s)
cpus=$(nproc)
mem=$(awk '/MemTotal/ { print int($2 / 1024 / 2) }' /proc/meminfo)
port=$((20000 + ($$ % 5000) * 2)) # not the default ports: another Slurm may be running
mkdir -p "$tmp/state" "$tmp/spool"
export SLURM_CONF=$tmp/slurm.conf
cat > "$SLURM_CONF" <<EOF
ClusterName=dsgaptest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$sock
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
MailProg=/bin/true
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
SlurmdParameters=config_overrides
InactiveLimit=0
MinJobAge=600
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
slurmctld -f "$SLURM_CONF" -i || { show_logs; skip "slurmctld does not start"; }
slurmd -f "$SLURM_CONF" || { show_logs; skip "slurmd does not start"; }
state=
for _ in $(seq 60); do
  state=$(sinfo -h -N -o %T 2>/dev/null | head -1)
  [ "$state" = idle ] && break
  sleep 0.5
done
[ "$state" = idle ] || { show_logs; skip "the node does not come up idle (state '$state')"; }
echo "slurm: $(sinfo -V), node $host idle, $cpus CPUs, SLURM_CONF=$SLURM_CONF"

# --- the job array and the merge job ------------------------------------------------------------------
smoke=$DSGAP_SOURCE/experiments/smoke.ini
base=$tmp/runs/smoke
cd "$tmp" || exit 1
export DSGAP OMP_NUM_THREADS=1
out=$("$DSGAP_SOURCE/experiments/slurm/submit.sh" "$smoke" "$base" 2 --cpus-per-task=1 --output="$tmp/%x-%A_%a.out" 2>&1)
echo "$out"
array=$(echo "$out" | sed -n 's/^array job \([0-9]*\).*/\1/p')
merge=$(echo "$out" | sed -n 's/^merge job \([0-9]*\).*/\1/p')
check "submit.sh submits the array and the merge job" test -n "$array" -a -n "$merge"
jstate=
for _ in $(seq 360); do # at most 3 minutes
  jstate=$(scontrol show job "$merge" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' | head -1)
  case "$jstate" in COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|PREEMPTED) break ;; esac
  sleep 0.5
done
check "the merge job completed (state $jstate)" test "$jstate" = COMPLETED
tasks=$(scontrol show job "$array" 2>/dev/null | grep -c 'JobState=COMPLETED')
check "both array tasks completed ($tasks)" test "$tasks" -eq 2
check "each task wrote its shard (shard-0, shard-1)" test -s "$base/shard-0/experiment.json" -a -s "$base/shard-1/experiment.json"
check "the shards split the cells (4 + 4)" test "$(ls -d "$base"/shard-0/cells/*/*/ | wc -l)" -eq 4 -a "$(ls -d "$base"/shard-1/cells/*/*/ | wc -l)" -eq 4
if [ "$jstate" != COMPLETED ]; then show_logs; for f in "$tmp"/*.out; do echo "--- $f"; cat "$f"; done; fi

# --- the same experiment unsharded -------------------------------------------------------------------
"$DSGAP" run "$smoke" --out "$tmp/full" --quiet
for r in synthetic.w1 synthetic.w2; do
  check "$r: merged rows of the job array = the unsharded run (all but time_ms)" \
    cmp -s <(cut -d, -f1-13 "$base/merged/$r/metrics.csv") <(cut -d, -f1-13 "$tmp/full/$r/metrics.csv")
done
check "summary.csv byte-identical" cmp -s "$base/merged/summary.csv" "$tmp/full/summary.csv"
check "the merge job ran dsgap decompose and plot on each run" \
  test -s "$base/merged/synthetic.w1/decomposition.md" -a -n "$(ls "$base"/merged/synthetic.w2/figures/ablation-rho*.png 2>/dev/null)"

finish
