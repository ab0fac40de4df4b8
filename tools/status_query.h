// zcoll_info --status (tools/status_query.cc): the state of every running zcoll job of this
// user on this machine, with the ranks that hold each communicator up. Returns the exit code.
#pragma once

int printStatus(bool json);
