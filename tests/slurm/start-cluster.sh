#!/usr/bin/env bash
# Start a single-node Slurm cluster on this machine from Debian's packages (slurm-wlm and munge): slurmctld and
# slurmd on localhost with this machine's CPUs, one partition, no accounting, no cgroups. For the tests marked
# `slurm` (tests/test_run_sh_slurm.py), which submit run.sh's job arrays to it. Run as root; idempotent: if a
# cluster already answers, it only says so. `tests/slurm/start-cluster.sh stop` stops the daemons.
# Exit status: 0 when `sinfo` shows the node idle, 1 otherwise (with the last lines of the logs).
set -uo pipefail
if [ "${1:-}" = stop ]; then
    pkill -x slurmd; pkill -x slurmctld; pkill -x munged
    exit 0
fi
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
    echo "start-cluster: installing slurm-wlm and munge from Debian's packages"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq && apt-get install -y -qq slurm-wlm munge >/dev/null || { echo "start-cluster: cannot install slurm-wlm and munge" >&2; exit 1; }
fi
if sinfo -h -o %t 2>/dev/null | grep -qx idle; then
    echo "start-cluster: a cluster already answers: $(sinfo -h -o '%N %c CPUs %t')"
    exit 0
fi
host=$(hostname -s)
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge
[ -s /etc/munge/munge.key ] || mungekey --create --force >/dev/null 2>&1 || dd if=/dev/urandom of=/etc/munge/munge.key bs=1k count=1 2>/dev/null
chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge 2>/dev/null
chmod 700 /etc/munge; chmod 400 /etc/munge/munge.key
pgrep -x munged >/dev/null || runuser -u munge -- /usr/sbin/munged || { echo "start-cluster: munged did not start" >&2; exit 1; }
node=$(slurmd -C | head -n 1)  # this machine as slurmd sees it: NodeName=... CPUs=... RealMemory=...
cat >/etc/slurm/slurm.conf <<CONF
ClusterName=local
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
$node State=UNKNOWN
PartitionName=local Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
pgrep -x slurmctld >/dev/null || slurmctld || { echo "start-cluster: slurmctld did not start" >&2; tail -n 20 /var/log/slurm/slurmctld.log >&2; exit 1; }
pgrep -x slurmd >/dev/null || slurmd || { echo "start-cluster: slurmd did not start" >&2; tail -n 20 /var/log/slurm/slurmd.log >&2; exit 1; }
for _ in $(seq 60); do
    if sinfo -h -o %t 2>/dev/null | grep -qx idle; then
        echo "start-cluster: $(sinfo -h -o '%N: %c CPUs, partition %P, %t')"
        exit 0
    fi
    sleep 1
done
echo "start-cluster: the node is not idle after 60 s: $(sinfo -h -o '%N %t' 2>&1)" >&2
tail -n 20 /var/log/slurm/slurmctld.log /var/log/slurm/slurmd.log >&2
exit 1
