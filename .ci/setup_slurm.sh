#!/usr/bin/env bash
# Install and start a real single-node Slurm (slurmctld + slurmd + munge) on this machine, as
# REFERENCE §8 describes, so that tests/server/jobs/test_slurm_backend.py runs against it.
# Two character devices stand in for GPUs so that --gres=gpu:N jobs are scheduled.
# Idempotent: re-running it on a machine where Slurm is up changes nothing. Needs root, no systemd.
set -euo pipefail

HOST="$(hostname -s)"
NPROC="$(nproc)"
# Slurm marks a node invalid when RealMemory exceeds what it sees; keep a margin.
REAL_MEMORY_MB="$(awk '/MemTotal/ {print int($2 / 1024 * 0.9)}' /proc/meminfo)"
GPU_DEVICES=(/dev/amid-gpu0 /dev/amid-gpu1)

install_packages() {
    if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v sbatch >/dev/null \
        && command -v munged >/dev/null; then
        return
    fi
    [ -n "$(ls -A /var/lib/apt/lists 2>/dev/null | grep -v lock || true)" ] || apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        slurmctld slurmd slurm-client munge
}

start_munge() {
    mkdir -p /etc/munge /run/munge /var/log/munge /var/lib/munge
    if [ ! -s /etc/munge/munge.key ]; then
        dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
    fi
    chown munge:munge /etc/munge/munge.key /run/munge /var/log/munge /var/lib/munge
    chmod 400 /etc/munge/munge.key
    if ! munge -n >/dev/null 2>&1; then
        runuser -u munge -- /usr/sbin/munged
    fi
}

make_gpu_devices() {
    local i=0
    for dev in "${GPU_DEVICES[@]}"; do
        [ -c "$dev" ] || mknod "$dev" c 1 3
        i=$((i + 1))
    done
}

write_config() {
    mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm
    cat > /etc/slurm/slurm.conf <<CONF
ClusterName=amid
SlurmctldHost=${HOST}(127.0.0.1)
AuthType=auth/munge
SlurmUser=root
ProctrackType=proctrack/pgid
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
DefMemPerCPU=1024
GresTypes=gpu
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=/var/log/slurm/jobcomp.log
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
ReturnToService=2
KillWait=5
InactiveLimit=0
MinJobAge=300
NodeName=${HOST} NodeAddr=127.0.0.1 CPUs=${NPROC} RealMemory=${REAL_MEMORY_MB} Gres=gpu:2 State=UNKNOWN
PartitionName=debug Nodes=${HOST} Default=YES MaxTime=INFINITE State=UP
CONF
    printf 'NodeName=%s Name=gpu File=/dev/amid-gpu[0-1]\n' "$HOST" > /etc/slurm/gres.conf
}

start_daemons() {
    if ! scontrol ping 2>/dev/null | grep -q UP; then
        slurmctld
    fi
    if ! pgrep -x slurmd >/dev/null; then
        slurmd
    fi
}

wait_for_idle_node() {
    local deadline=$((SECONDS + 60))
    until sinfo -h -n "$HOST" -o '%T' 2>/dev/null | grep -Eq '^(idle|mixed|allocated)'; do
        if [ "$SECONDS" -ge "$deadline" ]; then
            echo "setup_slurm: node $HOST did not become idle; see /var/log/slurm/" >&2
            sinfo -N -l >&2 || true
            exit 1
        fi
        sleep 0.5
    done
}

install_packages
start_munge
make_gpu_devices
write_config
start_daemons
wait_for_idle_node
echo "setup_slurm: single-node Slurm is up on ${HOST} (${NPROC} CPUs, gpu:2)"
