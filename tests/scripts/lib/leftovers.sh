# What a killed or shrunk job must not leave behind, for the process-level scripts (sourced):
#   leftovers_before          remember /dev/shm before the runs
#   leftovers_check PROG      after the runs: no process running PROG, /dev/shm as it was, and
#                             no status-service socket (abstract "@zcoll-status.UID.PID") of a
#                             process that has ended; prints each finding, returns 1 if any
# zcoll's shared memory is memfds and its sockets are abstract or belong to the processes, so
# they go with the processes; these checks hold that promise (docs/FAULT_TOLERANCE.md).

leftovers_before() {
  LEFTOVERS_SHM=$(ls /dev/shm 2>/dev/null | sort)
}

leftovers_check() {
  local prog=$1 bad=0 tries
  # A process SIGKILLed a moment ago may still be reaped: give the launcher a second.
  for tries in 1 2 3 4 5 6 7 8 9 10; do
    pgrep -f "$prog" >/dev/null || break
    sleep 0.1
  done
  if pgrep -f "$prog" >/dev/null; then
    echo "LEFT: processes of the job are still running:"; pgrep -af "$prog"; bad=1
  fi
  local after
  after=$(ls /dev/shm 2>/dev/null | sort)
  if [ "$LEFTOVERS_SHM" != "$after" ]; then
    echo "LEFT: /dev/shm changed:"; diff <(echo "$LEFTOVERS_SHM") <(echo "$after"); bad=1
  fi
  local name pid
  while read -r name; do
    pid=${name##*.}
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "LEFT: status socket $name of ended process $pid"; bad=1
    fi
  done < <(awk -v u="@zcoll-status.$(id -u)." 'index($NF, u) == 1 {print $NF}' /proc/net/unix)
  return $bad
}
