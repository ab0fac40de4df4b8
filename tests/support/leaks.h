// What a process holds that a communicator's life must give back: open descriptors (sockets,
// memfds, eventfds) and memfd mappings, counted before and after repeated runs of a scenario.
#pragma once

namespace zcoll::test {

// Open descriptors of this process, but for listening TCP sockets: a unique id's rendezvous
// service (zcollGetUniqueId, zcollCommGetUniqueId) keeps listening until its timeout, by
// design, to tell a reused id apart.
int openDescriptors();
// Mappings of memfds (shared memory segments, windows, registered memory) in this process.
int memfdMappings();

}  // namespace zcoll::test
