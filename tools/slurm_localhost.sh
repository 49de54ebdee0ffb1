#!/usr/bin/env bash
# slurm_localhost.sh start|stop|env DIR: a one-node SLURM cluster with accounting on this machine, every file of it
# under DIR, run as root from Debian's packages (slurm-wlm, slurmdbd, munge, mariadb-server):
#   munged     on its own socket and a fresh key (nothing else on the machine can talk to this cluster),
#   mariadbd   on 127.0.0.1:$MMIR_SLURM_DB_PORT (default 16306), the accounting database,
#   slurmdbd   on $MMIR_SLURM_DBD_PORT (default 16819): `sacct` lists every job with what it asked for,
#   slurmctld  and slurmd on $MMIR_SLURM_PORT and the next port (default 16817/16818): the node `$(hostname -s)` with
#              this machine's CPUs and memory less 512 MB, partitions `cpu` (default) and `gpu` (the names
#              the slurm profile uses; the node has no GPUs).
# Why slurmdbd: SLURM 22.05 has no file-based accounting (accounting_storage/filetxt is gone); without slurmdbd
# `sacct` says "Slurm accounting storage is disabled", and `sacct --completion` over a jobcomp/filetxt log shows no
# memory. The jobs' own `srun` (snakemake-executor-plugin-slurm-jobstep 0.6.1 starts each rule with
# `srun -n1 --cpu-bind=q` and removes every SLURM_* variable but the job's identity from its environment, SLURM_CONF
# included) finds the configuration only at the compiled-in path: `start` links /etc/slurm/slurm.conf to DIR's
# (refusing when another slurm.conf is there), `stop` removes the link. `start` prints the environment that points the SLURM commands at the cluster
# (`eval "$(tools/slurm_localhost.sh start DIR)"`); `stop` ends the daemons; `env` prints the environment again.
set -euo pipefail
usage="usage: slurm_localhost.sh start|stop|env DIR"
cmd="${1:?$usage}"
dir="$(mkdir -p "${2:?$usage}" && cd "$2" && pwd)"
conf="$dir/slurm.conf"
system_conf="${MMIR_SLURM_SYSTEM_CONF:-/etc/slurm/slurm.conf}"
marker="# written by tools/slurm_localhost.sh"
socket="$dir/munge/munge.socket"
db_port="${MMIR_SLURM_DB_PORT:-16306}"
dbd_port="${MMIR_SLURM_DBD_PORT:-16819}"
ctld_port="${MMIR_SLURM_PORT:-16817}"

print_env() {
  echo "export SLURM_CONF=$conf"
}

stop_pidfile() {
  [ -f "$1" ] || return 0
  pid="$(cat "$1")"
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  rm -f "$1"
}

stop() {
  if [ -L "$system_conf" ] && [ "$(readlink "$system_conf")" = "$conf" ]; then rm -f "$system_conf"; fi
  for pidfile in slurmd.pid slurmctld.pid slurmdbd.pid db/mariadbd.pid munge/munged.pid; do stop_pidfile "$dir/$pidfile"; done
}

wait_for() {  # wait_for WHAT COMMAND...: up to 30 s for COMMAND to succeed
  local what="$1"; shift
  for _ in $(seq 60); do timeout 10 "$@" >/dev/null 2>&1 && return 0; sleep 0.5; done
  echo "slurm_localhost.sh: $what did not come up; logs in $dir" >&2
  tail -n 5 "$dir"/*.log "$dir"/db/*.err >&2 2>/dev/null || true
  exit 1
}

start() {
  for tool in munged mariadbd mariadb-install-db slurmdbd slurmctld slurmd sinfo sacctmgr; do
    command -v "$tool" >/dev/null || {
      echo "slurm_localhost.sh: $tool not found (apt-get install slurm-wlm slurmdbd munge mariadb-server)" >&2; exit 2; }
  done
  [ "$(id -u)" -eq 0 ] || { echo "slurm_localhost.sh: run as root (slurmd starts jobs as their users)" >&2; exit 2; }
  if [ -e "$system_conf" ] && ! head -n 1 "$system_conf" | grep -qxF "$marker"; then
    echo "slurm_localhost.sh: $system_conf exists and is not ours: this machine has its own SLURM" >&2; exit 3
  fi
  stop
  mkdir -p "$dir/munge" "$dir/state" "$dir/spool"
  chmod 700 "$dir/munge"
  [ -f "$dir/munge/munge.key" ] || { dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none; chmod 400 "$dir/munge/munge.key"; }
  munged --force --socket="$socket" --key-file="$dir/munge/munge.key" --pid-file="$dir/munge/munged.pid" \
    --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/munged.seed"

  # the accounting database: a MariaDB of its own, a password user for slurmdbd over TCP
  if [ ! -d "$dir/db/mysql" ]; then
    mariadb-install-db --no-defaults --user=root --datadir="$dir/db" --auth-root-authentication-method=socket \
      --skip-test-db > "$dir/mariadb-install.log" 2>&1
  fi
  mariadbd --no-defaults --user=root --datadir="$dir/db" --socket="$dir/db/mysql.sock" --bind-address=127.0.0.1 \
    --port="$db_port" --pid-file="$dir/db/mariadbd.pid" --log-error="$dir/db/mariadbd.err" \
    --innodb-buffer-pool-size=32M --skip-log-bin > /dev/null 2>&1 &
  wait_for mariadbd mariadb --no-defaults --socket="$dir/db/mysql.sock" -e "select 1"
  mariadb --no-defaults --socket="$dir/db/mysql.sock" -e "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurm';
    GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';"

  node="$(hostname -s)"
  cat > "$dir/slurmdbd.conf" <<CONF
AuthType=auth/munge
AuthInfo=socket=$socket
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$dbd_port
SlurmUser=root
PidFile=$dir/slurmdbd.pid
LogFile=$dir/slurmdbd.log
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$db_port
StorageUser=slurm
StoragePass=slurm
StorageLoc=slurm_acct_db
CONF
  chmod 600 "$dir/slurmdbd.conf"
  cat > "$conf" <<CONF
$marker
ClusterName=mmir-localhost
SlurmctldHost=$node(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$socket
CredType=cred/munge
SlurmctldPort=$ctld_port
SlurmdPort=$((ctld_port + 1))
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
ReturnToService=2
# CPUs and memory are consumable: a job gets the --cpus-per-task and --mem it asks for
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$dbd_port
# the munge socket for the slurmdbd connection (sacct, sacctmgr, slurmctld): AuthInfo covers only the cluster's own
AccountingStoragePass=$socket
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=5
NodeName=$node NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=$(awk '/^MemTotal:/ {print int($2 / 1024) - 512}' /proc/meminfo) State=UNKNOWN
PartitionName=cpu Nodes=$node Default=YES MaxTime=INFINITE State=UP
PartitionName=gpu Nodes=$node MaxTime=INFINITE State=UP
CONF
  mkdir -p "$(dirname "$system_conf")"
  ln -sfn "$conf" "$system_conf"
  export SLURM_CONF="$conf"  # slurmdbd reads slurmdbd.conf from the same folder
  slurmdbd
  wait_for slurmdbd sacctmgr -n list cluster
  # the cluster, an account `mmir` and root in it (the plugin finds a user's account with sacctmgr); already there
  # after the first start
  for add in "cluster mmir-localhost" "account mmir cluster=mmir-localhost" "user root account=mmir cluster=mmir-localhost"; do
    # shellcheck disable=SC2086
    sacctmgr -i add $add > /dev/null 2>&1 || true
  done
  slurmctld
  slurmd -N "$node"
  wait_for "the node $node" bash -c 'sinfo -h -N -o %T | grep -qx idle'
  print_env
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  env) print_env ;;
  *) echo "$usage" >&2; exit 2 ;;
esac
