#pragma once
// The measurements of one outbox-bench run. Each one leaves the outbox table and the
// queue empty behind it, and throws BenchError when what it measured did not work
// (a row not published, a message not delivered, a relay that failed).

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

#include "amqp_bench_client.h"
#include "bench_env.h"

namespace bench {

// How the bench starts relays.
struct RelaySpec {
  std::string binary;
  int batch_size = 500;
  std::vector<std::string> settings;  // "key=value" lines for the relay: section
};

struct Percentiles {
  double p50 = 0, p99 = 0, p999 = 0, max = 0;
  std::size_t count = 0;
};
Percentiles percentiles(std::vector<double> values);
double median(std::vector<double> values);

struct CeilingResult {
  double msgs_per_s = 0;
  double broker_cpu_us_per_msg = 0;  // the RabbitMQ node's CPU (0 when its pid is unknown)
  double client_cpu_us_per_msg = 0;  // the publishing client's
};
// rabbitmq-c publishing `count` persistent messages of `bytes` to the run's durable
// queue, at most 1024 unconfirmed (streaming confirms), timed to the last confirm;
// each message shaped as `shape` (by default as the relay sends it).
CeilingResult measure_broker_ceiling(BenchEnv& env, int bytes, long count, const WireShape& shape = WireShape::relay());

// How a claimed batch is settled: the relay's mark (UPDATE published_at), or a
// DELETE, the design the relay does not use (replay, status and the retention
// window need the published rows), measured to show what it would gain.
enum class PgSettle { kMark, kDelete };
// The PostgreSQL backend's CPU per claimed row in the PG ceiling, by statement, in
// microseconds: the claim (with its BEGIN), the settle statement (mark or delete),
// the COMMIT. `measured` is false when the backend's /proc is unreadable (a server
// on another host).
struct PgStatementCpu {
  double claim_us = 0, settle_us = 0, commit_us = 0;
  bool measured = false;
};
// The relay's own claim (FOR UPDATE SKIP LOCKED) and `settle` statements in batches
// of `batch`, one client, no broker, over a backlog of `rows`. Rows/s; `cpu` (may be
// null) gets the backend's CPU per row by statement.
double measure_pg_ceiling(BenchEnv& env, long rows, int batch, int bytes, PgSettle settle = PgSettle::kMark,
                          PgStatementCpu* cpu = nullptr);

// Producer SDK enqueue on `connections` connections, `per_tx` messages per
// transaction (1: enqueue, more: enqueue_batch), for `seconds`. Messages/s.
// Which ordering keys the enqueue-rate producers give their messages: each key's
// rows are numbered in the producer's transaction (migration 0016), which costs an
// upsert of the key's counter row, and serialises producers of one key.
enum class EnqueueKeys {
  kNone,       // no ordering key: no number, the trigger skipped
  kNewEach,    // a key never used before on every message: a new counter row each time
  kThousand,   // 1 000 keys in turn, shared by the connections: an existing counter row
  kOneShared,  // one key for every message of every connection: they wait for each other
};
double measure_enqueue_rate(BenchEnv& env, int connections, int per_tx, double seconds, int bytes,
                            EnqueueKeys keys = EnqueueKeys::kNone);

struct DrainResult {
  double msgs_per_s = 0;         // rows over the wall time from the relays' start to their exit
  double steady_msgs_per_s = 0;  // rows after the first batch over the time between the first
                                 // and the last mark: no process start-up, no first claim
  double seconds = 0;
  double cpu_us_per_msg = 0;         // all relays' CPU time over the rows drained
  double pg_cpu_us_per_msg = 0;      // their PostgreSQL backends'
  double broker_cpu_us_per_msg = 0;  // the RabbitMQ node's (0 when its pid is unknown)
  double peak_rss_mib = 0;           // the largest relay
};
struct DrainPlan {
  long rows = 0;    // the backlog
  int relays = 1;   // processes started at once
  int bytes = 300;  // payload size
  long keys = 0;    // ordering keys of the backlog (0: none)
  // true: the relays run with --exit-when-idle and the time ends when all exited.
  // false (needed by per_key relays, which share lanes): the time ends when no row
  // is pending; then the relays get SIGTERM and must exit 0.
  bool exit_when_idle = true;
};
// Writes the plan's backlog, then times its relays draining it; every row must end
// published and in the queue.
DrainResult measure_drain(BenchEnv& env, const RelaySpec& spec, const DrainPlan& plan);

// Where this machine's CPU went while the producers of a latency step ran, in cores
// (CPU seconds per second); -1 where a process could not be read.
struct StepCpu {
  double machine = -1;            // every process and the kernel (/proc/stat: not idle, not iowait)
  double producers_pg = -1;       // the producers' PostgreSQL sessions: their INSERTs and commits
  double relay_pg = -1;           // the relay's PostgreSQL sessions: claims, marks, commits
  double broker = -1;             // the RabbitMQ node
  double relay = -1;              // the relay processes, together
  std::vector<double> per_relay;  // each relay process, in the order started (when more than one)
  double bench = -1;              // this process: the producers' and the consumer's client side
};

struct LatencyResult {
  long rate = 0;              // requested messages/s
  double achieved_rate = 0;   // enqueued messages/s, over the time the commits took (at least `seconds`)
  int producers = 0;          // producer connections
  int per_transaction = 1;    // messages each producer transaction commits together
  Percentiles to_confirm_ms;  // enqueue commit -> relay recorded the broker ack
  Percentiles to_receipt_ms;  // enqueue commit -> consumer received it
  // commit -> confirm p99 of the messages committed in each second of the step, in
  // order: a tail spread over every second is queueing for the CPU, one in a few
  // seconds is a stall (a checkpoint, a broker fsync, the VM).
  std::vector<double> p99_by_second_ms;
  StepCpu cpu;
};
// With a relay already running on the run's schema: producers commit messages at
// `rate` for `seconds` while a consumer receives; latencies in ms. Up to 1 000/s one
// message per transaction; above, ceil(rate / 1 000) per transaction, so the
// producers commit at most 1 000 transactions/s (a 2-core machine commits about
// 4 000 single-message transactions/s with nothing else running: docs/PERFORMANCE.md).
// `per_tx` > 0: that many messages per transaction instead. `relay_pids`: the relay
// processes, for their CPU (none: not measured).
LatencyResult measure_latency(BenchEnv& env, long rate, double seconds, int bytes, int per_tx = 0,
                              const std::vector<pid_t>& relay_pids = {});

// Statements per second the sessions of the run's relays start while nothing is
// pending (pg_stat_activity sampled every 10 ms for `seconds`).
double measure_idle_queries(BenchEnv& env, double seconds);

}  // namespace bench
