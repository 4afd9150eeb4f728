#pragma once
// NackRun: when the broker's nacks mean that it refuses everything on this channel.

#include <chrono>
#include <cstddef>
#include <string>

namespace relay {

// Counts the nacked publishes since the last ack. A nack is the environment's
// failure (nobody's attempt), but a long run of them with no ack in between means the
// channel publishes into a wall: a quorum queue whose leader was on a node that died
// (measured on RabbitMQ 3.10: a channel opened during the election nacked every
// publish for over 40 s while a fresh channel on the same node was acked at once), or
// a queue that is full with overflow reject-publish. Every kRunLength nacks in a row,
// restart() says to start over on a fresh connection after a pause (PublishHold), so
// a stale channel is replaced and a broker that refuses everything is probed a few
// times a second at most, never hammered. An ack ends the run.
//
// Pure. Thread safety: none.
class NackRun {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::size_t kRunLength = 32;

  // `messages` publishes were nacked at `now` (a multiple nack counts each). True
  // when the run just reached another kRunLength: restart the connection now.
  bool nacked(std::size_t messages, Clock::time_point now);
  void acked();

  // Since kRunLength nacks in a row and until the next ack.
  bool nacking() const { return restarts_ > 0; }
  std::size_t in_row() const { return in_row_; }
  int restarts() const { return restarts_; }
  // "the broker nacked every publish since 12 s (480 in a row, 3 fresh connections)".
  std::string describe(Clock::time_point now) const;

 private:
  std::size_t in_row_ = 0;
  std::size_t since_restart_ = 0;
  int restarts_ = 0;
  Clock::time_point began_{};
};

}  // namespace relay
