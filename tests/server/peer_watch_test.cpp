// PeerWatch over real loopback TCP connections: it finds the server side's socket by the four addresses
// cpp-httplib gives a handler, tells a waiting or pipelining client from one that closed, and stays quiet
// where no such connection exists.
#include "server/peer_watch.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

namespace helium::server {
namespace {

struct Endpoint {
  std::string host;
  int port = 0;
};

Endpoint endpoint_of(int fd, bool peer) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  const int rc = peer ? getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len)
                      : getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  EXPECT_EQ(rc, 0);
  char h[NI_MAXHOST], p[NI_MAXSERV];
  EXPECT_EQ(getnameinfo(reinterpret_cast<sockaddr*>(&addr), len, h, sizeof h, p, sizeof p, NI_NUMERICHOST | NI_NUMERICSERV), 0);
  return {h, std::stoi(p)};
}

// A listening socket on 127.0.0.1 and one accepted connection: client_fd, server_fd.
struct Connection {
  int listen_fd = -1, client_fd = -1, server_fd = -1;
  Connection() {
    listen_fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(listen_fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(listen_fd, 4), 0);
    socklen_t len = sizeof addr;
    EXPECT_EQ(getsockname(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    client_fd = ::socket(AF_INET, SOCK_STREAM, 0);
    EXPECT_EQ(::connect(client_fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    server_fd = ::accept(listen_fd, nullptr, nullptr);
    EXPECT_GE(server_fd, 0);
  }
  ~Connection() {
    for (int fd : {listen_fd, client_fd, server_fd})
      if (fd >= 0) ::close(fd);
  }
  PeerWatch watch() const {
    const Endpoint local = endpoint_of(server_fd, false), remote = endpoint_of(server_fd, true);
    return PeerWatch(local.host, local.port, remote.host, remote.port);
  }
};

// closed() once the kernel has seen the peer's close (a loopback FIN lands at once; allow a moment).
bool becomes_closed(const PeerWatch& w) {
  for (int i = 0; i < 200; ++i) {
    if (w.closed()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

TEST(PeerWatch, FindsTheConnectionAndSeesTheClientClose) {
  Connection c;
  const PeerWatch w = c.watch();
  ASSERT_TRUE(w.found());
  EXPECT_FALSE(w.closed());  // connected and silent: a client waiting for its reply
  ::close(c.client_fd);
  c.client_fd = -1;
  EXPECT_TRUE(becomes_closed(w));
}

TEST(PeerWatch, PipelinedBytesAreNotAClose) {
  Connection c;
  const PeerWatch w = c.watch();
  ASSERT_TRUE(w.found());
  const std::string next = "GET /health HTTP/1.1\r\n\r\n";
  ASSERT_EQ(::send(c.client_fd, next.data(), next.size(), 0), static_cast<ssize_t>(next.size()));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(w.closed());
  char buf[64];  // and nothing was consumed: the bytes are still there for the server to read
  EXPECT_EQ(::recv(c.server_fd, buf, sizeof buf, MSG_DONTWAIT), static_cast<ssize_t>(next.size()));
  ::close(c.client_fd);  // closing after the bytes were read is a close
  c.client_fd = -1;
  EXPECT_TRUE(becomes_closed(w));
}

TEST(PeerWatch, AnUnknownConnectionIsNeverClosed) {
  Connection c;
  const Endpoint local = endpoint_of(c.server_fd, false);
  const PeerWatch nowhere(local.host, local.port, "127.0.0.1", 1);  // no such peer
  EXPECT_FALSE(nowhere.found());
  EXPECT_FALSE(nowhere.closed());
  const PeerWatch no_ports("", -1, "", -1);  // what a request without addresses carries
  EXPECT_FALSE(no_ports.found());
  EXPECT_FALSE(no_ports.closed());
}

}  // namespace
}  // namespace helium::server
