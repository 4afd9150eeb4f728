#pragma once
// HttpConnectionCap: which connection of the HTTP endpoint to shed when a new one
// arrives at the cap.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace relay {

// Tracks the endpoint's open connections and the phase each is in, and picks the one
// to close so that a new connection always fits under the cap. A new connection is
// never refused: an attacker who opens connections faster than the timeouts close
// them must not lock out the kubelet's probe. The victim is, in this order:
//   1. the keep-alive connection idle the longest (it finished a request and has
//      no other in progress: closing it costs its client a reconnect);
//   2. the connection whose response has been writing the longest. The server counts
//      a response as writing until the client's TCP has acknowledged it, so one still
//      writing when a connection arrives is most likely stuck: its client does not
//      read (an attacker pipelining requests it never reads the answers to). Were it
//      shed last, such clients would fill the cap and every new connection, a probe
//      too, would be shed for the next;
//   3. of the connections that have not yet sent a whole request (fresh ones, which
//      sent nothing yet, and ones whose request is still arriving), the one that has
//      had the longest to send it. A fresh connection is not shed before an older
//      slow one: a probe's request is in flight when it is accepted.
// A probe's request arrives whole and is answered in microseconds, so a probe is shed
// only if `max_connections` newer connections arrive before its request is read; a
// probe shed while writing its answer still gets it (the kernel holds the bytes).
//
// Pure bookkeeping, no I/O: the server closes the victim. Not thread-safe (the
// server uses it on its strand). REQUIRES max_connections >= 1.
class HttpConnectionCap {
 public:
  using Id = std::uint64_t;
  enum class Phase { fresh, idle, reading, writing };

  explicit HttpConnectionCap(std::size_t max_connections);

  // The connection to close before one more is added, when the cap is reached;
  // nullopt while there is room. The caller closes it and calls remove().
  std::optional<Id> victim() const;
  // Registers a new connection (fresh) and returns its id. REQUIRES room (victim()
  // was nullopt, or the victim was removed).
  Id add();
  // The connection enters `phase` now (it becomes the newest in that phase).
  void enter(Id id, Phase phase);
  // Forgets the connection; unknown ids are ignored (a shed connection is removed
  // when shed and again when it ends).
  void remove(Id id);
  std::size_t size() const { return entries_.size(); }
  std::size_t max_connections() const { return max_; }

 private:
  struct Entry {
    Id id;
    Phase phase;
    std::uint64_t since;  // order of entering the phase: smaller is older
  };
  std::size_t max_;
  std::vector<Entry> entries_;  // at most max_ entries: a scan is cheaper than an index
  Id next_id_ = 1;
  std::uint64_t clock_ = 0;
};

}  // namespace relay
