// zcoll_info --status (tools/status_query.cc): the state of every running zcoll job of this
// user on this machine, with the ranks that hold each communicator up. Returns the exit code.
#pragma once

#include <string>
#include <vector>

int printStatus(bool json);

// The report printStatus prints for the status services' answers (each the text one process
// sent for "status": a comm=... line per communicator; src/core/status_service.h): per
// communicator id, its ranks and the "=>" lines naming what holds it up.
std::string formatStatus(const std::vector<std::string>& answers);
