// The status service: a running process answers `zcoll_info --status` with the state of its
// live communicators, and dumps their flight records on ZCOLL_DEBUG_DUMP_SIGNAL.
//
// One thread per process, started with its first communicator (ZCOLL_STATUS=on, the default),
// sleeps in poll() on an abstract unix socket named "zcoll-status.<uid>.<pid>" (no file: it
// vanishes with the process, so a killed job leaves nothing behind) and on a pipe the signal
// handler writes to. A client connects, sends "status" or "json", and reads one report:
//   status: one line per communicator, "key=value" fields (statusLine below);
//   json:   the flight record of each (core/flight_recorder.h), one JSON document per line.
// Only processes of the same user on this machine can connect (the kernel checks the peer's
// credentials: SO_PEERCRED, compared with our uid).
#pragma once

#include <string>

#include "base/result.h"

struct zcollComm;

namespace zcoll {

// Starts the service once per process (after a fork, once more in the child). ZCOLL_STATUS=off
// or a socket that cannot be made: nothing, with a warning for the latter (never fails init).
// Installs the ZCOLL_DEBUG_DUMP_SIGNAL handler the first time.
void startStatusService();

// The comm's state in one line: comm=NAME id=HEX rank=R nranks=N pid=P host=H error=E
// last=SEQ op=OP algo=A count=C dtype=D redop=O root=R peer=P state=running|done|idle
// age_ms=MS waiting=A,B ("-" for an empty field). `id` is the comm's (zcollComm::id): the same
// on every rank of it, different for two comms over the same ranks.
std::string statusLine(const zcollComm* comm);

// What the service answers to `request` ("status" or "json") for every live comm.
std::string statusReport(const std::string& request);

}  // namespace zcoll
