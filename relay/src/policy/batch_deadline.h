#pragma once
// BatchDeadline: how long a batch may publish, and by when it must commit, so that
// PostgreSQL never ends its session for idling in the transaction.

#include <chrono>

namespace relay {

// A batch's transaction sends no statement between its claim (or its last payload
// fetch) and its mark: to the server the session idles in a transaction, and after
// postgres.idle_in_transaction_timeout_ms it ends the session, the row locks go,
// and every row the broker had acked is published again. Confirm deadlines are per
// delivery tag, so a batch that keeps publishing (a slow link, rows that must go
// alone one round trip at a time, an isolation, a hold after a server's channel
// close) could outlive that timeout. So each batch has two limits, counted from
// the end of the last statement of its transaction:
// - publish_for(): publish nothing more of it after this (the rest stays pending,
//   no attempt, claimed again at once);
// - commit_within(): fail what is still unconfirmed (no attempt; a backoff) and
//   commit what was acked. A margin before the server's limit leaves time for the
//   loop to notice and send the mark.
//
// Pure arithmetic on the configuration: no I/O, no state. Thread-safe.
class BatchDeadline {
 public:
  // REQUIRES: idle_in_transaction > confirm_timeout > 0 (the configuration checks it).
  BatchDeadline(std::chrono::milliseconds idle_in_transaction, std::chrono::milliseconds confirm_timeout);

  std::chrono::milliseconds publish_for() const { return publish_for_; }
  std::chrono::milliseconds commit_within() const { return commit_within_; }

 private:
  std::chrono::milliseconds publish_for_, commit_within_;
};

}  // namespace relay
