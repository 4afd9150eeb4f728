#pragma once
// ReconnectSupervisor: when the relay tries to connect again, and what it says.

#include <chrono>
#include <set>
#include <string>

#include "metrics/relay_metrics.h"
#include "policy/backoff.h"
#include "policy/connect_failure.h"

namespace relay {

// The relay's sessions (PostgreSQL, AMQP, lanes) are connected by the loop; this
// decides the waits and the log lines around it:
// - a failed attempt waits a growing backoff (200 ms doubling, jitter): to at most
//   1 s while the cause may go away by itself (a refused or timed-out connection, a
//   standby being promoted), so publishing resumes within about 1 s of the server or the
//   link coming back; to 10 s when no retry can fix it (a wrong password, an unknown
//   database: ConnectFailure::permanent), which the operator must mend anyway;
// - a connection lost within a second of being made (a peer that accepts and then
//   drops) waits too before the next attempt, so it never turns into a hot loop;
// - each distinct error is worth a warning once per outage (at most 8: a restarting
//   peer alternates between a few; a new one, such as a certificate refused, still
//   shows); repeats are for debug, but for one warning every kRepeatEvery while the
//   outage lasts (an error that does not go away, a wrong password, must not fall
//   silent after its first line). The outage ends with "connected again".
//
// Pure but for the jitter: the caller passes the time and sleeps (report_connect_failure,
// below, is the I/O edge: metrics and the log). Thread safety: none.
class ReconnectSupervisor {
 public:
  using Clock = std::chrono::steady_clock;

  struct Failed {
    bool first_of_its_kind = false;  // log at warn
    bool repeat_due = false;         // not new, but kRepeatEvery since the last warning: warn again
    std::chrono::milliseconds wait{0};
    std::chrono::seconds outage_for{0};  // since the outage's first failed attempt
  };
  static constexpr std::chrono::seconds kRepeatEvery{30};
  static constexpr std::chrono::milliseconds kTransientMax{1000};

  ReconnectSupervisor();

  // Before an attempt: how long to wait first (zero unless the last connection was
  // lost within a second of being made).
  std::chrono::milliseconds before_attempt(Clock::time_point now);
  // The attempt failed with `error` (one line, no secret) at `now`; `permanent` when
  // no retry can fix it (the slower backoff).
  Failed failed(const std::string& error, Clock::time_point now, bool permanent = false);
  // The attempt succeeded: the line to log ("connected to ..." or "connected again
  // to ... after N failed attempt(s)").
  std::string connected(const std::string& endpoints, Clock::time_point now);

  int failed_attempts() const { return attempt_; }

 private:
  static constexpr std::size_t kDistinctErrors = 8;
  Backoff backoff_;            // transient causes: at most kTransientMax
  Backoff permanent_backoff_;  // permanent causes: environment_backoff()
  int attempt_ = 0;            // failed attempts in this outage
  int quick_losses_ = 0;       // connections lost within a second of being made, in a row
  Clock::time_point connected_at_{};
  bool outage_ = false;
  std::set<std::string> outage_errors_;  // warned about in this outage
  Clock::time_point outage_began_{}, warned_at_{};
};

// One failed connection attempt, told everywhere it is told: `error` (one line, no
// secret) as `kind` says, which the caller decided where it caught the exception
// (classify_amqp_failure on the AmqpError's fields, classify_postgres_failure on
// libpq's text); counted in `metrics` by target and cause (and named on /readyz),
// passed to `supervisor`, and logged as it says (a first of its kind or a repeat due
// at warn, else debug). Returns the supervisor's verdict: the wait.
ReconnectSupervisor::Failed report_connect_failure(ReconnectSupervisor& supervisor, RelayMetrics& metrics,
                                                   ConnectTarget target, const std::string& error,
                                                   const ConnectFailure& kind,
                                                   ReconnectSupervisor::Clock::time_point now);

}  // namespace relay
