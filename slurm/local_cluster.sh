#!/usr/bin/env bash
# A real single-node SLURM cluster on localhost, for tests and demos.
#
#   slurm/local_cluster.sh install   # apt-get the Debian packages (only those missing; needs root)
#   slurm/local_cluster.sh start     # write configs, start munged, MariaDB, slurmdbd, slurmctld, slurmd
#   eval "$(slurm/local_cluster.sh env)"   # export SLURM_CONF for sinfo/sbatch/submitit
#   slurm/local_cluster.sh status    # one line per daemon, then sinfo; exit 0 only if all are up
#   slurm/local_cluster.sh stop      # cancel jobs, kill every daemon by its recorded PID
#   slurm/local_cluster.sh clean     # stop, then delete the scratch directory (state, DB, logs)
#
# Everything (configs, munge key, MariaDB data, Slurm state, logs, PID files) lives in one scratch
# directory: $RLVR_SLURM_DIR, default slurm/.cluster/ (git-ignored). Nothing is written to /etc,
# no system service is started, and `stop` only kills the PIDs this script recorded.
#
# Knobs (environment):
#   RLVR_SLURM_DIR      scratch directory                        [<repo>/slurm/.cluster]
#   RLVR_SLURM_CPUS     CPUs the node advertises (oversubscribed) [8]
#   RLVR_SLURM_GPUS     fake GPUs: gres backed by /dev/null-like char devices, so only
#                       scheduling and CUDA_VISIBLE_DEVICES are real; 0 = none; skipped
#                       (with a warning) where mknod is not permitted      [2]
#   RLVR_SLURM_PORT     slurmctld port; slurmd = +1, slurmdbd = +2 [6817]
#   RLVR_SLURM_DB_PORT  MariaDB TCP port (127.0.0.1 only)         [3307]
#   RLVR_SLURM_TIMEOUT  seconds each wait loop may take           [30]
#
# Why things are the way they are: docs/slurm.md (and the verified facts in the project notes).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
for knob in RLVR_SLURM_CPUS RLVR_SLURM_GPUS RLVR_SLURM_PORT RLVR_SLURM_DB_PORT RLVR_SLURM_TIMEOUT; do
  [[ "${!knob:-0}" =~ ^[0-9]+$ ]] || { echo "[local_cluster] ERROR: $knob='${!knob}' is not a whole number" >&2; exit 2; }
done
DIR="${RLVR_SLURM_DIR:-$REPO/slurm/.cluster}"
NODE_CPUS="${RLVR_SLURM_CPUS:-8}"
NODE_GPUS="${RLVR_SLURM_GPUS:-2}"
CTLD_PORT="${RLVR_SLURM_PORT:-6817}"
SLURMD_PORT=$((CTLD_PORT + 1))
DBD_PORT=$((CTLD_PORT + 2))
DB_PORT="${RLVR_SLURM_DB_PORT:-3307}"
TIMEOUT="${RLVR_SLURM_TIMEOUT:-30}"
CLUSTER=rlvr
ACCOUNT=rlvr
PARTITION=debug
NODE="$(hostname -s)"
PACKAGES=(slurmctld slurmd slurm-client munge slurmdbd mariadb-server)
DAEMONS=(munged mariadbd slurmdbd slurmctld slurmd)   # start order; stop is the reverse

ETC="$DIR/etc"; RUN="$DIR/run"; LOG="$DIR/log"
MUNGE_SOCKET="$RUN/munge/munge.socket"
DB_SOCKET="$RUN/mariadb.sock"
export SLURM_CONF="$ETC/slurm.conf"

say() { printf '[local_cluster] %s\n' "$*"; }
die() { printf '[local_cluster] ERROR: %s\n' "$*" >&2; exit 1; }

# ----------------------------------------------------------------------------------------- install
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'; }

cmd_install() {
  local missing=() p
  for p in "${PACKAGES[@]}"; do installed "$p" || missing+=("$p"); done
  if [ ${#missing[@]} -eq 0 ]; then say "packages already installed"; return 0; fi
  [ "$(id -u)" -eq 0 ] || die "installing ${missing[*]} needs root (apt-get)"
  say "installing: ${missing[*]}"
  # Keep the packages' postinst from starting system-wide munge/MariaDB/Slurm services: this
  # cluster runs its own daemons from $DIR. Docker images already ship such a policy; add a
  # temporary one only if there is none.
  POLICY=/usr/sbin/policy-rc.d
  if [ ! -e "$POLICY" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$POLICY" && chmod 755 "$POLICY"
    trap 'rm -f "$POLICY"' EXIT
  fi
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
}

require_packages() {
  local p
  for p in "${PACKAGES[@]}"; do
    installed "$p" || die "package $p is missing: run '$0 install' first"
  done
}

# ------------------------------------------------------------------------------------ PID helpers
# Each daemon's PID is recorded in $RUN/<name>.pid by this script (we start all of them in the
# foreground under setsid, so $! is the daemon itself). A PID counts as ours only if the process
# still exists and its command name matches: a stale file from a reboot never kills a stranger.
pidfile() { echo "$RUN/$1.pid"; }

running_pid() {  # prints the PID and returns 0 if daemon $1 is running
  local f pid comm
  f="$(pidfile "$1")"
  [ -s "$f" ] || return 1
  pid="$(cat "$f")"
  [ -r "/proc/$pid/comm" ] || return 1
  comm="$(cat "/proc/$pid/comm" 2>/dev/null)" || return 1
  # a zombie (exited, not yet reaped by init) is not running
  [[ "$(cat "/proc/$pid/stat" 2>/dev/null)" =~ ^[0-9]+\ \(.*\)\ [^Z] ]] || return 1
  case "$1" in  # /proc/<pid>/comm is truncated to 15 characters
    mariadbd) [[ "$comm" == mariadbd || "$comm" == mysqld ]] || return 1 ;;
    *) [[ "$comm" == "${1:0:15}" ]] || return 1 ;;
  esac
  echo "$pid"
}

log_of() { echo "$LOG/$1.log"; }

fail_with_log() {  # fail_with_log <daemon> <message>
  local d="$1"; shift
  {
    printf '[local_cluster] ERROR: %s\n' "$*"
    local f
    for f in "$(log_of "$d")" "$LOG/$d.out"; do
      [ -s "$f" ] || continue
      printf '[local_cluster] --- last lines of %s ---\n' "$f"
      tail -n 25 "$f"
    done
  } >&2
  exit 1
}

# wait_until <daemon> <what> <command...>: poll every 0.2 s, at most $TIMEOUT s; fail fast (with the
# daemon's log) if the daemon dies meanwhile.
wait_until() {
  local d="$1" what="$2"; shift 2
  local deadline=$((SECONDS + TIMEOUT)) out
  until out="$("$@" 2>&1)"; do
    running_pid "$d" >/dev/null || fail_with_log "$d" "$d exited while waiting for: $what"
    [ $SECONDS -lt $deadline ] \
      || fail_with_log "$d" "timed out after ${TIMEOUT}s waiting for: $what; the check ($*) said: ${out:-nothing}"
    sleep 0.2
  done
}

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

launch() {  # launch <daemon> <command...>: start in the foreground under setsid, record its PID
  local d="$1"; shift
  # 9>&-: the daemon must not inherit (and hold forever) the start/stop lock.
  setsid "$@" </dev/null >>"$LOG/$d.out" 2>&1 9>&- &
  local pid=$! i
  echo "$pid" >"$(pidfile "$d")"
  # $! is the forked shell until it has exec'd setsid and then the daemon: wait (<= 5 s) for the
  # daemon's own name, so that running_pid recognises it from now on.
  for ((i = 0; i < 50; i++)); do
    running_pid "$d" >/dev/null && break
    kill -0 "$pid" 2>/dev/null || fail_with_log "$d" "$d exited right after starting"
    sleep 0.1
  done
  say "started $d (pid $pid)"
}

# ---------------------------------------------------------------------------------------- configs
write_configs() {
  mkdir -p "$ETC" "$RUN" "$LOG" "$DIR/state" "$DIR/spool" "$DIR/munge" "$DIR/mariadb" "$RUN/munge"
  chmod 755 "$DIR" "$RUN" "$RUN/munge"     # munged: the socket directory must be 755 all the way
  chmod 700 "$DIR/munge"

  if [ ! -s "$DIR/munge/munge.key" ]; then
    dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 status=none
    chmod 400 "$DIR/munge/munge.key"
  fi
  if [ ! -s "$ETC/db.pass" ]; then
    # (not `tr </dev/urandom | head`: under pipefail the SIGPIPE'd tr would abort the script)
    (umask 077; od -An -N16 -tx1 /dev/urandom | tr -d ' \n' >"$ETC/db.pass")
  fi

  # Node topology: the CPUs are oversubscribed on purpose (config_overrides makes slurmd trust the
  # config instead of the hardware) so that a few 1-CPU jobs run at once on a 2-core machine.
  # RealMemory above the real value makes the node INVAL, so advertise ~90 %.
  local real_mem gres_node="" gres_types=""
  real_mem="$(slurmd -C | sed -n 's/.*RealMemory=\([0-9]*\).*/\1/p')"
  real_mem=$(( ${real_mem:-2000} * 9 / 10 ))
  rm -f "$ETC/gres.conf"
  if [ "$NODE_GPUS" -gt 0 ]; then
    mkdir -p "$DIR/dev"
    : >"$ETC/gres.conf.new"
    local i
    for ((i = 0; i < NODE_GPUS; i++)); do
      # gres.conf rejects plain files; character devices with /dev/null's numbers are accepted.
      if [ ! -c "$DIR/dev/fakegpu$i" ] && ! mknod "$DIR/dev/fakegpu$i" c 1 3 2>/dev/null; then
        say "WARNING: mknod not permitted here; starting without fake GPUs"
        NODE_GPUS=0
        break
      fi
      echo "NodeName=$NODE Name=gpu File=$DIR/dev/fakegpu$i" >>"$ETC/gres.conf.new"
    done
    if [ "$NODE_GPUS" -gt 0 ]; then
      mv "$ETC/gres.conf.new" "$ETC/gres.conf"
      gres_types="GresTypes=gpu
AccountingStorageTRES=gres/gpu"
      gres_node="Gres=gpu:$NODE_GPUS"
    fi
    rm -f "$ETC/gres.conf.new"
  fi

  cat >"$ETC/slurm.conf" <<EOF
# Generated by slurm/local_cluster.sh; rewritten on every start from nothing. Do not edit.
ClusterName=$CLUSTER
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCKET
CredType=cred/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$RUN/slurmctld.own.pid
SlurmdPidFile=$RUN/slurmd.own.pid
SlurmctldLogFile=$LOG/slurmctld.log
SlurmdLogFile=$LOG/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# No cgroups on these machines.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
SlurmdParameters=config_overrides
ReturnToService=2
JobRequeue=1
MailProg=/bin/true
# Seconds between the SIGTERM of a cancel/requeue and the SIGKILL (sites use ~30): short, so that
# tests of hard requeues need short runs.
KillWait=2
MinJobAge=300
InactiveLimit=0
SlurmdTimeout=300
# submitit polls sacct: without accounting a cancelled or killed job never looks finished.
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=$DBD_PORT
AccountingStoragePass=$MUNGE_SOCKET
$gres_types
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$NODE_CPUS RealMemory=$real_mem $gres_node State=UNKNOWN
PartitionName=$PARTITION Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF

  # slurmdbd has no -f: it reads slurmdbd.conf next to \$SLURM_CONF, and only if the mode is 600.
  (umask 077; cat >"$ETC/slurmdbd.conf" <<EOF
# Generated by slurm/local_cluster.sh. Do not edit.
AuthType=auth/munge
AuthInfo=socket=$MUNGE_SOCKET
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=$DBD_PORT
SlurmUser=root
LogFile=$LOG/slurmdbd.log
PidFile=$RUN/slurmdbd.own.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=$DB_PORT
StorageUser=slurm
StoragePass=$(cat "$ETC/db.pass")
StorageLoc=slurm_acct_db
EOF
  )
  chmod 600 "$ETC/slurmdbd.conf"
}

any_running() {
  local d
  for d in "${DAEMONS[@]}"; do running_pid "$d" >/dev/null && return 0; done
  return 1
}

# ----------------------------------------------------------------------------------------- daemons
munge_ok() { munge -S "$MUNGE_SOCKET" -n </dev/null | unmunge -S "$MUNGE_SOCKET"; }
db() { mariadb --no-defaults -S "$DB_SOCKET" -u root "$@"; }
sacctmgr_ok() { sacctmgr -n -P list cluster format=cluster; }
ctld_ok() { scontrol ping | grep -q 'is UP'; }
node_ok() {
  local state
  state="$(sinfo -h -n "$NODE" -o %t 2>/dev/null)"
  [[ "$state" =~ ^(idle|mix|alloc|comp)$ ]]
}

check_port_free() {  # check_port_free <daemon> <port>
  port_busy "$2" && die "port $2 (for $1) is taken by a process this script did not record (another cluster, or one whose scratch dir was deleted while running?); stop it or set RLVR_SLURM_PORT / RLVR_SLURM_DB_PORT"
  return 0
}

start_munged() {
  running_pid munged >/dev/null && { say "munged already running"; return; }
  rm -f "$MUNGE_SOCKET" "$MUNGE_SOCKET.lock"
  launch munged munged -F --force --socket="$MUNGE_SOCKET" --key-file="$DIR/munge/munge.key" \
    --pid-file="$RUN/munged.own.pid" --log-file="$LOG/munged.log" --seed-file="$DIR/munge/munged.seed"
  wait_until munged "munge round trip on $MUNGE_SOCKET" munge_ok
}

start_mariadbd() {
  running_pid mariadbd >/dev/null && { say "mariadbd already running"; return; }
  check_port_free mariadbd "$DB_PORT"
  if [ ! -d "$DIR/mariadb/mysql" ]; then
    say "initialising MariaDB data directory"
    mariadb-install-db --no-defaults --datadir="$DIR/mariadb" --user=root \
      --auth-root-authentication-method=socket --skip-test-db >"$LOG/mariadb-install.log" 2>&1 \
      || { tail -n 25 "$LOG/mariadb-install.log" >&2; die "mariadb-install-db failed"; }
  fi
  launch mariadbd mariadbd --no-defaults --user=root --datadir="$DIR/mariadb" --socket="$DB_SOCKET" \
    --port="$DB_PORT" --bind-address=127.0.0.1 --skip-name-resolve --pid-file="$RUN/mariadbd.own.pid" \
    --log-error="$LOG/mariadbd.log" --innodb-lock-wait-timeout=900
  wait_until mariadbd "MariaDB answering on $DB_SOCKET" db -e 'SELECT 1'
  local pass
  pass="$(cat "$ETC/db.pass")"
  db --batch <<EOF
CREATE OR REPLACE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '$pass';
CREATE OR REPLACE USER 'slurm'@'localhost' IDENTIFIED BY '$pass';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
EOF
}

start_slurmdbd() {
  running_pid slurmdbd >/dev/null && { say "slurmdbd already running"; return; }
  check_port_free slurmdbd "$DBD_PORT"
  launch slurmdbd slurmdbd -D
  wait_until slurmdbd "slurmdbd answering sacctmgr on port $DBD_PORT" sacctmgr_ok
}

register_accounting() {  # idempotent: add only what `sacctmgr list` does not show
  [ -n "$(sacctmgr -n -P list cluster "$CLUSTER" format=cluster)" ] \
    || sacctmgr -i add cluster "$CLUSTER" >/dev/null
  [ -n "$(sacctmgr -n -P list account "$ACCOUNT" format=account)" ] \
    || sacctmgr -i add account "$ACCOUNT" Cluster="$CLUSTER" Description="rlvr-scaling tests" \
      Organization=rlvr >/dev/null
  # root, plus the user behind sudo (CI runners start the cluster with sudo, submit as themselves)
  local user users=("$(id -un)")
  [ -n "${SUDO_USER:-}" ] && [ "$SUDO_USER" != root ] && users+=("$SUDO_USER")
  for user in "${users[@]}"; do
    [ -n "$(sacctmgr -n -P list association cluster="$CLUSTER" account="$ACCOUNT" user="$user" format=user)" ] \
      || sacctmgr -i add user "$user" Account="$ACCOUNT" DefaultAccount="$ACCOUNT" Cluster="$CLUSTER" >/dev/null
  done
  say "accounting: cluster=$CLUSTER account=$ACCOUNT users=${users[*]}"
}

start_slurmctld() {
  running_pid slurmctld >/dev/null && { say "slurmctld already running"; return; }
  check_port_free slurmctld "$CTLD_PORT"
  launch slurmctld slurmctld -D
  wait_until slurmctld "slurmctld answering scontrol ping on port $CTLD_PORT" ctld_ok
}

start_slurmd() {
  running_pid slurmd >/dev/null && { say "slurmd already running"; return; }
  check_port_free slurmd "$SLURMD_PORT"
  launch slurmd slurmd -D
  # ReturnToService=2 brings a DOWN node back once it registers with a valid config; a node left
  # DOWN/DRAIN from an earlier run (e.g. killed jobs) is resumed explicitly.
  local deadline=$((SECONDS + TIMEOUT)) state
  until node_ok; do
    running_pid slurmd >/dev/null || fail_with_log slurmd "slurmd exited before the node came up"
    state="$(sinfo -h -n "$NODE" -o %t 2>/dev/null || true)"
    case "$state" in
      down*|drain*|drng*|fail*) scontrol update NodeName="$NODE" State=RESUME >/dev/null 2>&1 || true ;;
    esac
    [ $SECONDS -lt $deadline ] || fail_with_log slurmd "timed out after ${TIMEOUT}s: node $NODE is '${state:-unknown}'"
    sleep 0.3
  done
}

cmd_start() {
  require_packages
  mkdir -p "$DIR" "$RUN" "$LOG"
  # Config is (re)written only when nothing runs: daemons must never see a config change under them.
  if any_running; then say "some daemons already running; keeping the existing config"
  else write_configs; fi
  local t0=$SECONDS
  start_munged
  start_mariadbd
  start_slurmdbd
  register_accounting
  start_slurmctld
  start_slurmd
  say "cluster up in $((SECONDS - t0))s: partition=$PARTITION node=$NODE cpus=$NODE_CPUS gpus=$NODE_GPUS"
  say "use it with: eval \"\$($0 env)\""
}

# -------------------------------------------------------------------------------------------- stop
kill_daemon() {  # TERM, wait up to 10 s, then KILL
  local d="$1" pid i
  pid="$(running_pid "$d")" || { rm -f "$(pidfile "$d")"; return 0; }
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < 50; i++)); do
    running_pid "$d" >/dev/null || break
    sleep 0.2
  done
  if running_pid "$d" >/dev/null; then
    say "$d (pid $pid) ignored SIGTERM for 10s; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    sleep 0.2
  fi
  rm -f "$(pidfile "$d")"
  say "stopped $d (pid $pid)"
}

cancel_all_jobs() {
  # Job steps (slurmstepd) outlive slurmd; cancel them through the controller so no job process is
  # left behind. This cluster is a scratch cluster: every job on it belongs to the tests.
  running_pid slurmctld >/dev/null && ctld_ok 2>/dev/null || return 0
  [ -n "$(squeue -h -o %i 2>/dev/null)" ] || return 0
  say "cancelling all jobs"
  squeue -h -o %A 2>/dev/null | sort -u | xargs -r scancel >/dev/null 2>&1 || true
  local deadline=$((SECONDS + 15))
  while [ -n "$(squeue -h -t R,CG -o %i 2>/dev/null)" ] && [ $SECONDS -lt $deadline ]; do sleep 0.5; done
}

# slurmd must be root to start jobs as their users; the other daemons here run as root too.
require_root() {
  [ "$(id -u)" -eq 0 ] || die "$1 needs root: sudo $0 $1 (then, as yourself: eval \"\$($0 env)\")"
}

cmd_stop() {
  cancel_all_jobs
  local i
  for ((i = ${#DAEMONS[@]} - 1; i >= 0; i--)); do kill_daemon "${DAEMONS[$i]}"; done
}

cmd_status() {
  local d pid rc=0
  for d in "${DAEMONS[@]}"; do
    if pid="$(running_pid "$d")"; then printf '%-10s running (pid %s)\n' "$d" "$pid"
    else printf '%-10s stopped\n' "$d"; rc=1; fi
  done
  if [ $rc -eq 0 ]; then sinfo || rc=1; fi
  return $rc
}

cmd_env() {
  echo "export SLURM_CONF=$SLURM_CONF"
  echo "export RLVR_SLURM_DIR=$DIR"
}

cmd_clean() {
  cmd_stop
  case "$DIR" in ""|"/") die "refusing to delete '$DIR'" ;; esac
  rm -rf "$DIR"
  say "deleted $DIR"
}

# ------------------------------------------------------------------------------------------- main
# One start/stop at a time (e.g. two test sessions starting the cluster together).
with_lock() {
  mkdir -p "$DIR"
  exec 9>"$DIR/.lock"
  flock -w 120 9 || die "another local_cluster.sh holds $DIR/.lock for over 120s"
  "$@"
}

case "${1:-}" in
  install) cmd_install ;;
  start) require_root start; with_lock cmd_start ;;
  stop) require_root stop; with_lock cmd_stop ;;
  clean) require_root clean; with_lock cmd_clean ;;
  status) cmd_status ;;
  env) cmd_env ;;
  *) echo "usage: $0 {install|start|stop|status|env|clean}" >&2; exit 2 ;;
esac
