#!/usr/bin/env bash
# proverfleet-entrypoint: starts `proverfleet agent` on a rented machine and keeps it running.
# Installed in the agent image as /usr/local/bin/proverfleet-entrypoint (docs/deploy.md).
#
# Two ways in, one behaviour:
#   * as the image's ENTRYPOINT (`docker run`, vast's "args" run type): supervises in the
#     foreground; the agent's output goes to stdout and to the log file.
#   * from vast's onstart (the "ssh"/"direct" run types replace the ENTRYPOINT with vast's own
#     init and run the onstart after it): `proverfleet-entrypoint --detach` starts the same
#     supervisor in its own session and returns at once, so the onstart never blocks vast's
#     init; its output then goes to the log file only.
# A second start while a supervisor runs (vast re-running the onstart, an operator by hand)
# does nothing: one agent per machine.
#
# Environment (the manager puts the first three into every rental's env):
#   PROVERFLEET_MANAGER      the manager's URL
#   PROVERFLEET_DEPLOYMENT   this rental's deployment id
#   PROVERFLEET_SECRET       its single-use registration secret, or instead
#   PROVERFLEET_SECRET_FILE  a file holding it (refused when others may read it)
#   PROVERFLEET_STATE_DIR    the agent's state: token, journal, cuzk.toml, params/
#                            (default /var/lib/proverfleet)
#   PROVERFLEET_LOG_DIR      where agent.log goes (default /var/log/proverfleet)
#   PROVERFLEET_RESTART_MIN_S / _MAX_S   backoff after a crash: doubles from MIN up to MAX
#                            seconds (defaults 2 and 60); back to MIN after a run of
#   PROVERFLEET_RESTART_RESET_S          this many seconds (default 600)
#   PROVERFLEET_ROOT         prefix of every default path above (tests run in a scratch root)
# The secret reaches the agent through its environment only: never a command line, never a
# file this script writes. Arguments other than --detach are passed to `proverfleet agent`.
set -uo pipefail

readonly ME=proverfleet-entrypoint
readonly ROOT="${PROVERFLEET_ROOT:-}"
LOG_DIR="${PROVERFLEET_LOG_DIR:-$ROOT/var/log/proverfleet}"
RUN_DIR="${PROVERFLEET_RUN_DIR:-$ROOT/run/proverfleet}"
export PROVERFLEET_STATE_DIR="${PROVERFLEET_STATE_DIR:-$ROOT/var/lib/proverfleet}"
readonly LOG_FILE="$LOG_DIR/agent.log"
readonly LOCK_FILE="$RUN_DIR/entrypoint.lock"
# agent.log moves to agent.log.1 when a start finds it past this size: two files at most.
readonly LOG_MAX_BYTES="${PROVERFLEET_LOG_MAX_BYTES:-67108864}"
RESTART_MIN_S="${PROVERFLEET_RESTART_MIN_S:-2}"
RESTART_MAX_S="${PROVERFLEET_RESTART_MAX_S:-60}"
RESTART_RESET_S="${PROVERFLEET_RESTART_RESET_S:-600}"

# Secrets and the agent's token stay private; logs are for root (the operator over SSH).
umask 077
# A reader of our stdout may go away (vast's onstart pipe, a closed terminal): writes then fail
# with EPIPE instead of killing the supervisor.
trap '' PIPE

say() {
  local line
  line="$(date -u '+%Y-%m-%dT%H:%M:%SZ') $ME: $*"
  printf '%s\n' "$line" >>"$LOG_FILE" 2>/dev/null
  printf '%s\n' "$line" 2>/dev/null
  return 0
}

die() {
  printf '%s: %s\n' "$ME" "$*" >&2
  [ -d "$LOG_DIR" ] && printf '%s %s: %s\n' "$(date -u '+%Y-%m-%dT%H:%M:%SZ')" "$ME" "$*" \
    >>"$LOG_FILE" 2>/dev/null
  exit 2
}

is_count() { [[ "$1" =~ ^[0-9]+$ ]]; }

detach=0
agent_args=()
for arg in "$@"; do
  case "$arg" in
    --detach) detach=1 ;;
    -h | --help)
      sed -n '2,/^set -uo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
      exit 0
      ;;
    *) agent_args+=("$arg") ;;
  esac
done

for value in "$RESTART_MIN_S" "$RESTART_MAX_S" "$RESTART_RESET_S" "$LOG_MAX_BYTES"; do
  is_count "$value" || die "restart and log settings must be whole numbers, got '$value'"
done
[ "$RESTART_MIN_S" -ge 1 ] || RESTART_MIN_S=1
[ "$RESTART_MAX_S" -ge "$RESTART_MIN_S" ] || RESTART_MAX_S=$RESTART_MIN_S

mkdir -p "$LOG_DIR" "$RUN_DIR" "$PROVERFLEET_STATE_DIR" ||
  die "cannot create $LOG_DIR, $RUN_DIR or $PROVERFLEET_STATE_DIR"

# --- the environment the agent needs ------------------------------------------------------
[ -n "${PROVERFLEET_MANAGER:-}" ] ||
  die "PROVERFLEET_MANAGER is not set: the manager's URL (every rental's env carries it)"
[ -n "${PROVERFLEET_DEPLOYMENT:-}" ] ||
  die "PROVERFLEET_DEPLOYMENT is not set: the deployment id (every rental's env carries it)"
if [ -z "${PROVERFLEET_SECRET:-}" ] && [ -n "${PROVERFLEET_SECRET_FILE:-}" ]; then
  secret_file=$PROVERFLEET_SECRET_FILE
  [ -r "$secret_file" ] || die "PROVERFLEET_SECRET_FILE $secret_file cannot be read"
  mode=$(stat -L -c '%a' "$secret_file") || die "cannot stat $secret_file"
  (( (8#$mode & 8#004) == 0 )) ||
    die "PROVERFLEET_SECRET_FILE $secret_file is world-readable (mode $mode): chmod 600 it"
  IFS= read -r PROVERFLEET_SECRET <"$secret_file" || [ -n "${PROVERFLEET_SECRET:-}" ] ||
    die "PROVERFLEET_SECRET_FILE $secret_file is empty"
  export PROVERFLEET_SECRET
fi
unset PROVERFLEET_SECRET_FILE
[ -n "${PROVERFLEET_SECRET:-}" ] ||
  die "no registration secret: set PROVERFLEET_SECRET (every rental's env carries it) or PROVERFLEET_SECRET_FILE"
# cuzk and the agent live in /usr/local/bin; vast's init may start the onstart without it.
case ":$PATH:" in *:/usr/local/bin:*) ;; *) export PATH="$PATH:/usr/local/bin" ;; esac
export HOME="${HOME:-/root}"
command -v proverfleet >/dev/null 2>&1 || die "proverfleet is not on PATH ($PATH)"

# --- onstart: start the supervisor in its own session and return --------------------------
if [ "$detach" = 1 ]; then
  if ! flock -n "$LOCK_FILE" true; then
    say "a supervisor is already running (lock $LOCK_FILE); not starting another"
    exit 0
  fi
  setsid "$0" "${agent_args[@]}" </dev/null >/dev/null 2>&1 &
  say "started the agent's supervisor (pid $!) in the background; log: $LOG_FILE"
  exit 0
fi

# --- the supervisor -------------------------------------------------------------------------
exec 9>"$LOCK_FILE"
if ! flock -n 9; then
  say "a supervisor is already running (lock $LOCK_FILE); not starting another"
  exit 0
fi

agent_pid=""
stopping=""
on_signal() {
  stopping=$1
  say "$1: stopping the agent"
  [ -n "$agent_pid" ] && kill -TERM "$agent_pid" 2>/dev/null
}
trap 'on_signal SIGTERM' TERM
trap 'on_signal SIGINT' INT

describe_exit() {
  local rc=$1
  if [ "$rc" -gt 128 ]; then
    echo "killed by signal $((rc - 128)) ($(kill -l "$((rc - 128))" 2>/dev/null || echo '?'))"
  else
    echo "exit code $rc"
  fi
}

rotate_log() {
  local size
  size=$(stat -c '%s' "$LOG_FILE" 2>/dev/null) || return 0
  [ "$size" -gt "$LOG_MAX_BYTES" ] && mv -f "$LOG_FILE" "$LOG_FILE.1"
  return 0
}

say "supervisor pid $$; manager $PROVERFLEET_MANAGER, deployment $PROVERFLEET_DEPLOYMENT," \
  "state $PROVERFLEET_STATE_DIR, log $LOG_FILE," \
  "prover $(command -v cuzk 2>/dev/null || echo 'cuzk not on PATH')"
delay=$RESTART_MIN_S
starts=0
while :; do
  if [ -n "$stopping" ]; then
    say "$stopping before the agent started; exiting"
    exit 0
  fi
  rotate_log
  starts=$((starts + 1))
  started_at=$SECONDS
  say "starting proverfleet agent (start $starts)"
  proverfleet agent "${agent_args[@]}" > >(tee -a -p "$LOG_FILE") 2>&1 &
  agent_pid=$!
  # A signal taken between the start and the line above found no agent to stop: stop it now
  # (else the wait below would wait for an agent nobody told to stop).
  [ -n "$stopping" ] && kill -TERM "$agent_pid" 2>/dev/null
  # A trapped signal ends `wait` early: wait again until the agent itself has exited.
  rc=0
  while :; do
    wait "$agent_pid"
    rc=$?
    kill -0 "$agent_pid" 2>/dev/null || break
  done
  agent_pid=""
  ran=$((SECONDS - started_at))
  if [ -n "$stopping" ]; then
    say "the agent stopped ($(describe_exit "$rc")) after $stopping; exiting"
    exit 0
  fi
  if [ "$rc" -eq 0 ]; then
    say "the agent exited 0 (stopped by the manager); exiting"
    exit 0
  fi
  [ "$ran" -ge "$RESTART_RESET_S" ] && delay=$RESTART_MIN_S
  say "the agent ended after ${ran}s: $(describe_exit "$rc"); restarting in ${delay}s"
  sleep "$delay" &
  wait $! 2>/dev/null
  if [ -n "$stopping" ]; then
    say "$stopping while waiting to restart; exiting"
    exit 0
  fi
  delay=$((delay * 2))
  [ "$delay" -gt "$RESTART_MAX_S" ] && delay=$RESTART_MAX_S
done
