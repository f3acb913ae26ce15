#pragma once

// ConnectionTable: which connections an HttpServer holds, from which peer (remote IP address), and in which state;
// it decides whether a new connection is served, and which open one is closed to make room for it. No sockets here:
// the server calls Admit on every accepted socket and tells the table when each connection changes state, so the
// policy is tested on its own (connection_table_test.cc) and the server only carries it out.
//
// The policy (HttpLimits: max_connections, max_connections_per_peer):
//   1. A peer never holds more than max_connections_per_peer, whatever state its connections are in (idle, a slow
//      head, a body, a handler running). At that cap its own connection idle longest is closed for the new one (a
//      client's pool renewing itself, or the kubelet behind the same address as a pod); with none idle the new
//      connection is refused.
//   2. Below max_connections the connection is served.
//   3. At max_connections the connection idle longest is closed and the new one served. Idle: waiting for the first
//      byte of a request (a new plain connection that has sent nothing, a keep-alive one between requests); closing
//      it loses nothing but a connection the client may reopen.
//   4. With none idle: when the new peer holds at least two fewer connections than some peer with a connection still
//      reading its request head (or TLS handshake), the oldest such connection of the peer holding most is closed
//      and the new one served. A legitimate client sends its head at once; a connection still reading one is a
//      slow client, and the peer holding most is the one to give way. The two-fewer rule keeps two peers of equal
//      share from taking turns closing each other's connections.
//   5. Otherwise the new connection is refused.
// So a peer holding less than the largest holder, or anyone while an idle connection is open, is never refused at
// the global cap. A connection with a request being read past its head, handled or answered is never closed here.
//
// Thread-safety: every member may be called from any thread. Admit must not be called concurrently with itself (the
// server's accept loop is one strand), so a connection admitted is Attached before another Admit picks victims.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

namespace gpusched::net {

class ConnectionTable {
 public:
  enum class Verdict { kServed, kRefused, kRefusedPerPeer };
  enum class Evicted { kNone, kIdle, kReadingHead };
  struct Admission {
    Verdict verdict = Verdict::kRefused;
    uint64_t id = 0;  // of the new connection when served
    Evicted evicted = Evicted::kNone;
    std::function<void()> close_victim;  // call outside any lock; empty when none was closed
  };
  struct Counts {
    uint64_t served = 0;
    uint64_t refused = 0;
    uint64_t refused_per_peer = 0;
    uint64_t evicted_idle = 0;
    uint64_t evicted_head = 0;
    size_t open = 0;
    size_t idle = 0;  // of those open
  };

  ConnectionTable(size_t max_connections, size_t max_per_peer);

  // A connection from `peer` was accepted. When served it starts idle (call MarkReadingHead first for TLS, whose
  // handshake counts as reading the head).
  Admission Admit(const std::string& peer);
  // How to close connection `id` when it is picked to make room (posts the close to the connection's strand).
  void Attach(uint64_t id, std::function<void()> close);
  // State changes, from the connection's strand. false: the connection was closed to make room (it is no longer in
  // the table) and must close itself now.
  bool MarkIdle(uint64_t id);
  bool MarkReadingHead(uint64_t id);
  bool MarkBusy(uint64_t id);
  // The connection ended (its destructor); nothing when it was already removed.
  void Remove(uint64_t id);

  [[nodiscard]] Counts counts() const;
  [[nodiscard]] size_t open_from(const std::string& peer) const;

 private:
  enum class State { kIdle, kReadingHead, kBusy };
  struct Entry {
    std::string peer;
    State state = State::kIdle;
    uint64_t since = 0;  // order of entering the state (a sequence number, not a clock)
    std::function<void()> close;
  };

  bool Mark(uint64_t id, State state);
  void EraseLocked(std::unordered_map<uint64_t, Entry>::iterator it);
  size_t PeerCountLocked(const std::string& peer) const;

  const size_t max_connections_;
  const size_t max_per_peer_;
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, Entry> entries_;
  std::unordered_map<std::string, size_t> per_peer_;
  std::map<uint64_t, uint64_t> idle_;  // since -> id, idle longest first
  uint64_t next_id_ = 1;
  uint64_t seq_ = 0;
  Counts counts_;
};

}  // namespace gpusched::net
