// server/peer_watch.h — whether the client of a request that is answered in one piece has gone away.
//
// A streamed reply learns it when a write fails (the heartbeats see to that while it waits); a non-streamed
// reply writes nothing until the generation ends, so it looks at the connection instead. cpp-httplib 0.11
// (Debian's) hands a handler the request's addresses but not its socket, so PeerWatch finds the socket among
// the process's descriptors by those addresses (the connection is unique by its four of them and stays open
// while the handler runs), then asks it, without blocking and without consuming anything, whether the peer
// has closed: end of stream, a hang-up or an error. Bytes waiting (a pipelined request) are not a close; a
// client that shuts down only its sending half after the request reads the same as one that closed (as for
// any server that checks its peer this way: HTTP clients close whole connections).
// Linux (/proc/self/fd). Where the socket cannot be found, closed() is always false: the reply is then
// generated to its end, as before.
#pragma once

#include <string>

namespace helium::server {

class PeerWatch {
 public:
  PeerWatch(const std::string& local_addr, int local_port, const std::string& remote_addr, int remote_port);
  bool found() const { return fd_ >= 0; }
  bool closed() const;

 private:
  int fd_ = -1;
};

}  // namespace helium::server
