# What a killed or shrunk job must not leave behind, for the process-level scripts (sourced):
#   leftovers_before          remember /dev/shm before the runs
#   leftovers_check PROG      after the runs: no process running PROG, no new name in /dev/shm
#                             that lasts and that no process maps, and no status-service socket
#                             (abstract "@zcoll-status.UID.PID") of a process that has ended;
#                             prints each finding, returns 1 if any
# zcoll's shared memory is memfds and its sockets are abstract or belong to the processes, so
# they go with the processes; these checks hold that promise (docs/FAULT_TOLERANCE.md). One
# exception is UCX's: its posix transport names a segment in /dev/shm for the moment between
# creating and unlinking it, so a rank killed while UCX creates its worker leaves that name
# (ucx_shm_posix_*). Such a name is reported as UCX's, not counted (it cannot be told from one
# another job of this machine left), and not removed: nothing here deletes others' files.

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
  # Names other processes of this machine create and unlink a moment later, or keep mapped
  # while they run, are not leftovers: one counts when it is still there 2 s later and no
  # process maps it.
  local new name
  new=$(comm -13 <(echo "$LEFTOVERS_SHM") <(ls /dev/shm 2>/dev/null | sort))
  [ -n "$new" ] && sleep 2
  for name in $new; do
    [ -e "/dev/shm/$name" ] || continue
    grep -qs "/dev/shm/$name" /proc/[0-9]*/maps && continue
    case "$name" in
      ucx_shm_posix_*)
        echo "UCX left /dev/shm/$name (a rank of this machine killed while UCX created its" \
             "worker; docs/FAULT_TOLERANCE.md): not counted" ;;
      *) echo "LEFT: /dev/shm/$name is new and no process maps it"; bad=1 ;;
    esac
  done
  local pid
  while read -r name; do
    pid=${name##*.}
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "LEFT: status socket $name of ended process $pid"; bad=1
    fi
  done < <(awk -v u="@zcoll-status.$(id -u)." 'index($NF, u) == 1 {print $NF}' /proc/net/unix)
  return $bad
}
