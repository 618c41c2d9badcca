#!/usr/bin/env bash
# The agent image's entrypoint in a scratch root: a temp dir as PROVERFLEET_ROOT, PATH with a
# fake `cuzk` and a fake `proverfleet` that records what it was started with, crashes (SIGSEGV)
# on its first three starts and then runs until SIGTERM. Proves that the agent starts with the
# manager's environment (secret from a 0600 file, never on a command line), is restarted after
# a crash with a backoff that grows and stays bounded, logs to the documented path and to
# stdout, stops on SIGTERM, that --detach (vast's onstart) returns at once with the supervisor
# running, that a second start does nothing while one runs, and that bad settings are refused.
# Usage: entrypoint_test.sh PATH/TO/entrypoint.sh
#
# eventually() evaluates its condition itself, later and again: single quotes are meant.
# shellcheck disable=SC2016
set -uo pipefail

ENTRY=$(realpath "${1:?usage: entrypoint_test.sh ENTRYPOINT}")
SCRATCH=$(mktemp -d)
STARTED_PIDS=()
failures=0

cleanup() {
  local pid
  for pid in "${STARTED_PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null; done
  # The supervisors and agents started here write their pids; end those still running.
  local file
  for file in "$SCRATCH"/fake/pid.* "$SCRATCH"/fake/supervisor.*; do
    [ -f "$file" ] && read -r pid <"$file" && kill -KILL "$pid" 2>/dev/null
  done
  rm -rf "$SCRATCH"
}
trap cleanup EXIT

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
check() { # check DESCRIPTION COMMAND...
  local what=$1
  shift
  if "$@"; then echo "ok: $what"; else fail "$what"; fi
}
# Polls for up to $2 seconds (generous: the machine may be loaded).
eventually() {
  local deadline=$((SECONDS + $2))
  while [ "$SECONDS" -lt "$deadline" ]; do
    eval "$1" && return 0
    sleep 0.2
  done
  eval "$1"
}
contains() { grep -qF -- "$2" "$1" 2>/dev/null; }
starts() { cat "$SCRATCH/fake/starts" 2>/dev/null || echo 0; }

mkdir -p "$SCRATCH/bin" "$SCRATCH/fake"
cat >"$SCRATCH/bin/cuzk" <<'FAKE'
#!/bin/sh
echo "fake cuzk"
FAKE
cat >"$SCRATCH/bin/proverfleet" <<'FAKE'
#!/usr/bin/env bash
# A stand-in agent: records its start, its arguments and what it sees of the environment.
n=$(( $(cat "$FAKE_DIR/starts" 2>/dev/null || echo 0) + 1 ))
echo "$n" >"$FAKE_DIR/starts"
echo "$$" >"$FAKE_DIR/pid.$n"
{
  echo "args=$*"
  echo "manager=${PROVERFLEET_MANAGER:-}"
  echo "deployment=${PROVERFLEET_DEPLOYMENT:-}"
  echo "state_dir=${PROVERFLEET_STATE_DIR:-}"
  echo "secret_file_var=${PROVERFLEET_SECRET_FILE:-unset}"
  echo "cuzk=$(command -v cuzk)"
  if [ "${PROVERFLEET_SECRET:-}" = "$(cat "$FAKE_DIR/expected_secret")" ]; then
    echo "secret=matches"
  else
    echo "secret=wrong"
  fi
} >"$FAKE_DIR/start.$n"
echo "fake agent start $n says hello"
echo "fake agent start $n on stderr" >&2
if [ "$n" -le "${FAKE_CRASHES:-0}" ]; then kill -SEGV $$; fi
trap 'echo "fake agent $n got SIGTERM"; exit 0' TERM
while :; do sleep 0.2; done
FAKE
chmod +x "$SCRATCH/bin/cuzk" "$SCRATCH/bin/proverfleet"

SECRET="s3cret-$RANDOM$RANDOM-for-the-test"
printf '%s\n' "$SECRET" >"$SCRATCH/fake/expected_secret"
mkdir -p "$SCRATCH/etc"
(umask 077 && printf '%s\n' "$SECRET" >"$SCRATCH/etc/secret")

run_env=(
  env -i HOME="$SCRATCH" PATH="$SCRATCH/bin:/usr/bin:/bin" FAKE_DIR="$SCRATCH/fake"
  PROVERFLEET_ROOT="$SCRATCH" PROVERFLEET_MANAGER="http://manager.test:8080"
  PROVERFLEET_DEPLOYMENT="dep-42" PROVERFLEET_SECRET_FILE="$SCRATCH/etc/secret"
  PROVERFLEET_RESTART_MIN_S=1 PROVERFLEET_RESTART_MAX_S=2
)
LOG="$SCRATCH/var/log/proverfleet/agent.log"

# --- foreground (the image's ENTRYPOINT): crash, restart, backoff --------------------------
"${run_env[@]}" FAKE_CRASHES=3 "$ENTRY" --no-progress >"$SCRATCH/stdout" 2>&1 &
supervisor=$!
STARTED_PIDS+=("$supervisor")
check "the agent was restarted after three crashes (4 starts)" eventually '[ "$(starts)" -ge 4 ]' 90
check "the supervisor stays up while the agent runs" kill -0 "$supervisor"

for n in 1 4; do
  f="$SCRATCH/fake/start.$n"
  check "start $n: manager URL from the env" contains "$f" "manager=http://manager.test:8080"
  check "start $n: deployment id from the env" contains "$f" "deployment=dep-42"
  check "start $n: the secret from the 0600 file" contains "$f" "secret=matches"
  check "start $n: the secret file's name is not passed on" contains "$f" "secret_file_var=unset"
  check "start $n: state dir under the root" contains "$f" "state_dir=$SCRATCH/var/lib/proverfleet"
  check "start $n: arguments reach the agent" contains "$f" "args=agent --no-progress"
  check "start $n: the image's cuzk is on PATH" contains "$f" "cuzk=$SCRATCH/bin/cuzk"
done

check "the log is at the documented path" test -f "$LOG"
check "the log holds the agent's stdout" eventually 'contains "$LOG" "fake agent start 4 says hello"' 30
check "the log holds the agent's stderr" contains "$LOG" "fake agent start 1 on stderr"
check "the log names the crash" contains "$LOG" "killed by signal 11 (SEGV)"
check "first restart after 1 s" contains "$LOG" "restarting in 1s"
check "backoff doubles to 2 s" contains "$LOG" "restarting in 2s"
check "backoff stays at its 2 s bound" test "$(grep -c 'restarting in 2s' "$LOG")" -eq 2
check "stdout carries the agent's output too" \
  eventually 'contains "$SCRATCH/stdout" "fake agent start 4 says hello"' 30
check "the log is not readable by others" test "$(stat -c '%a' "$LOG")" = 600

leaked=0
for cmdline in /proc/[0-9]*/cmdline; do
  if tr '\0' ' ' 2>/dev/null <"$cmdline" | grep -qF -f "$SCRATCH/fake/expected_secret"; then
    leaked=1
  fi
done
check "the secret is on no command line" test "$leaked" = 0
leaked_files=$(grep -rlF -f "$SCRATCH/fake/expected_secret" "$SCRATCH/var" 2>/dev/null)
check "the secret is in no file the entrypoint wrote" test -z "$leaked_files"

"${run_env[@]}" "$ENTRY" >"$SCRATCH/second" 2>&1
check "a second start exits 0" test $? = 0
check "a second start says one runs already" contains "$SCRATCH/second" "already running"
check "a second start started no agent" test "$(starts)" = 4

kill -TERM "$supervisor"
check "SIGTERM reaches the agent" eventually 'contains "$LOG" "fake agent 4 got SIGTERM"' 30
check "the supervisor exits on SIGTERM" eventually '! kill -0 "$supervisor" 2>/dev/null' 30
wait "$supervisor"
check "the supervisor's exit code is 0" test $? = 0
check "no restart after SIGTERM" test "$(starts)" = 4

# --- detached (vast's onstart) ---------------------------------------------------------------
SECONDS_BEFORE=$SECONDS
"${run_env[@]}" "$ENTRY" --detach >"$SCRATCH/detach" 2>&1
check "--detach exits 0" test $? = 0
check "--detach returns at once" test $((SECONDS - SECONDS_BEFORE)) -lt 20
check "--detach names the log" contains "$SCRATCH/detach" "$LOG"
check "the detached supervisor starts the agent" eventually '[ "$(starts)" -ge 5 ]' 60
detached=$(grep -o 'supervisor pid [0-9]*' "$LOG" | tail -1 | grep -o '[0-9]*$')
echo "$detached" >"$SCRATCH/fake/supervisor.detached"
check "the detached supervisor runs" kill -0 "$detached"
"${run_env[@]}" "$ENTRY" --detach >"$SCRATCH/detach2" 2>&1
check "a second --detach does nothing" contains "$SCRATCH/detach2" "already running"
kill -TERM "$detached"
check "the detached supervisor stops on SIGTERM" eventually '! kill -0 "$detached" 2>/dev/null' 30
check "and stops its agent" contains "$LOG" "fake agent 5 got SIGTERM"

# --- refusals --------------------------------------------------------------------------------
chmod 644 "$SCRATCH/etc/secret"
"${run_env[@]}" "$ENTRY" >"$SCRATCH/refused" 2>&1
check "a world-readable secret file is refused (exit 2)" test $? = 2
check "naming the file and the fix" contains "$SCRATCH/refused" "world-readable"
chmod 600 "$SCRATCH/etc/secret"
"${run_env[@]}" PROVERFLEET_MANAGER= "$ENTRY" >"$SCRATCH/refused" 2>&1
check "a missing manager URL is refused (exit 2)" test $? = 2
check "naming the variable" contains "$SCRATCH/refused" "PROVERFLEET_MANAGER is not set"
check "no agent started by a refused start" test "$(starts)" = 5

if [ "$failures" -gt 0 ]; then
  echo "--- agent.log" >&2
  cat "$LOG" >&2
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "all entrypoint checks passed"
