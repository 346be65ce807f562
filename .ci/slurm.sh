#!/usr/bin/env bash
# A real Slurm on this one machine, for the test of sharded sweeps
# (cmd/bmx/slurm_linux_test.go): Debian's slurmctld, slurmd and munge, one
# node named after this host with 8 CPUs and 4 fake GPUs, no systemd, no
# cgroups, no accounting database. See ../shared/facts/slurm-localhost.md
# for why each setting is what it is.
#
#   .ci/slurm.sh start    install (if missing), configure, start; wait until the node is idle
#   .ci/slurm.sh stop     stop the daemons started here
#   .ci/slurm.sh status   exit 0 when the controller answers and the node is up
#   .ci/slurm.sh reset    stop, then delete the state directory
#   .ci/slurm.sh env      print the SLURM_CONF line a client needs
#
# Everything (config, munge key and socket, Slurm state, spool, logs, pid
# files, fake GPU devices) lives under one state directory, BMX_SLURM_DIR
# (default /tmp/bmx-slurm); nothing under /etc is written. Clients find the
# cluster through SLURM_CONF=$BMX_SLURM_DIR/etc/slurm.conf. Every step is
# idempotent: start on a running Slurm only checks it; stop on a stopped one
# does nothing. Needs root (Debian's packages, daemons as root and munge).
# With BMX_SLURM_NO_INSTALL=1, start fails instead of installing.
set -euo pipefail

state=${BMX_SLURM_DIR:-/tmp/bmx-slurm}
conf=$state/etc/slurm.conf
host=$(hostname -s)
export SLURM_CONF=$conf

say() { echo ".ci/slurm.sh: $*" >&2; }
die() { say "$*"; exit 1; }

# tail_logs prints the end of each daemon's log, for a start that failed.
tail_logs() {
  for f in "$state"/log/*.log; do
    [ -f "$f" ] && { echo "--- $f" >&2; tail -n 15 "$f" >&2; }
  done
  return 0
}

# alive NAME: the daemon whose pid file is $state/run/NAME.pid is running.
alive() {
  local pid
  pid=$(cat "$state/run/$1.pid" 2>/dev/null) || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

install_packages() {
  if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v sbatch >/dev/null && command -v munged >/dev/null; then
    return 0
  fi
  [ "${BMX_SLURM_NO_INSTALL:-}" = 1 ] && die "Slurm is not installed (slurmctld slurmd slurm-client munge) and BMX_SLURM_NO_INSTALL=1"
  [ "$(id -u)" = 0 ] || die "Slurm is not installed and installing it needs root"
  command -v apt-get >/dev/null || die "Slurm is not installed and there is no apt-get to install it"
  say "installing slurmctld slurmd slurm-client munge"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    slurmctld slurmd slurm-client munge >/dev/null
}

configure() {
  mkdir -p "$state"/{etc,ctld,spool,log,run,gpu}
  chmod 0755 "$state"
  # munge: its own directory, owned by munge, writable by nobody else and
  # searchable by all (clients reach its socket), as munged insists.
  install -d -o munge -g munge -m 0755 "$state/munge"
  if [ ! -s "$state/munge/munge.key" ]; then
    dd if=/dev/urandom of="$state/munge/munge.key" bs=1024 count=1 status=none
  fi
  chown munge:munge "$state/munge/munge.key"
  chmod 0400 "$state/munge/munge.key"
  # Fake GPUs: slurmd wants character devices; Slurm takes the index from
  # the trailing digits, so tasks get CUDA_VISIBLE_DEVICES=0..3.
  for i in 0 1 2 3; do ln -sfn /dev/null "$state/gpu/gpu$i"; done
  cat >"$conf.tmp" <<EOF
# Written by .ci/slurm.sh; rewritten on every start.
ClusterName=bmx
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmctldPort=6817
SlurmdPort=6818
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$state/munge/munge.socket.2
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/spool
SlurmctldPidFile=$state/run/slurmctld.pid
SlurmdPidFile=$state/run/slurmd.pid
SlurmctldLogFile=$state/log/slurmctld.log
SlurmdLogFile=$state/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$state/log/jobcomp.txt
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SlurmdParameters=config_overrides
MpiDefault=none
MailProg=/bin/true
MinJobAge=600
GresTypes=gpu
NodeName=$host NodeAddr=127.0.0.1 CPUs=8 Gres=gpu:4 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
  mv "$conf.tmp" "$conf"
  cat >"$state/etc/gres.conf" <<EOF
AutoDetect=off
NodeName=$host Name=gpu File=$state/gpu/gpu[0-3]
EOF
}

# answers: the controller answers within 5 s and the node is up.
answers() {
  local st
  st=$(timeout 5 sinfo -h -N -n "$host" -o %T 2>/dev/null) || return 1
  case $st in idle* | mixed* | allocated* | completing*) return 0 ;; esac
  return 1
}

start() {
  if alive munged && alive slurmctld && alive slurmd && answers; then
    say "already running (SLURM_CONF=$conf)"
    return 0
  fi
  install_packages
  [ "$(id -u)" = 0 ] || die "starting Slurm needs root"
  stop quiet
  configure
  runuser -u munge -- munged --socket="$state/munge/munge.socket.2" --key-file="$state/munge/munge.key" \
    --pid-file="$state/munge/munged.pid" --log-file="$state/munge/munged.log" --seed-file="$state/munge/munged.seed" ||
    { tail -n 15 "$state/munge/munged.log" >&2 || true; die "munged did not start"; }
  cp "$state/munge/munged.pid" "$state/run/munged.pid"
  slurmctld -f "$conf" || { tail_logs; die "slurmctld did not start"; }
  slurmd -f "$conf" || { tail_logs; die "slurmd did not start"; }
  for _ in $(seq 1 100); do
    if answers; then
      say "started (SLURM_CONF=$conf)"
      return 0
    fi
    alive slurmctld && alive slurmd || break
    sleep 0.1
  done
  tail_logs
  die "the node did not come up"
}

# stop [quiet]: SIGTERM the daemons started here, by their pid files, and
# wait for them to end (SIGKILL after 10 s).
stop() {
  local name pid any=
  for name in slurmd slurmctld munged; do
    pid=$(cat "$state/run/$name.pid" 2>/dev/null) || continue
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
      any=1
    fi
    rm -f "$state/run/$name.pid"
  done
  if [ -n "$any" ] && [ "${1:-}" != quiet ]; then say "stopped"; fi
  return 0
}

case ${1:-} in
start) start ;;
stop) stop ;;
status) alive slurmctld && alive slurmd && answers ;;
reset) stop && rm -rf "$state" ;;
env) echo "SLURM_CONF=$conf" ;;
*) echo "usage: $0 start|stop|status|reset|env" >&2; exit 2 ;;
esac
